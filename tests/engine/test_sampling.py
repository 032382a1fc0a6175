"""Sampling: exact draws from the filtered softmax, every method token-identical to AR sampling.

The distribution tests use chi-square goodness of fit (rare cells pooled into one) with the
p-value from torch's regularized incomplete gamma. The pair test is the one that catches noise
shared between positions; `test_the_pair_test_catches_noise_shared_between_positions` shows it
does, by breaking the keying on purpose.
"""

import json
from collections import Counter

import pytest
import torch
from conftest import drafter_for, hash_of, hf_greedy
from runs import rows, run_folder

from goose.drafting.contract import Drafter
from goose.engine import sampling as sampling_module
from goose.engine.draft import Draft
from goose.engine.sampling import (
    GUMBEL_MAX,
    GUMBEL_MIN,
    NOISE_BITS,
    Sampler,
    Sampling,
    filter_logits,
    gumbel_at,
    kept_tokens,
    noise_seed,
    token_ids_fingerprint,
)
from goose.engine.single import Engine
from goose.errors import GooseError
from goose.models.reference import hf_greedy as hf_reference
from goose.running.loop import generate
from goose.running.registry import method_names

N_SEEDS = 2000
SETTINGS = [(0.7, 0, 1.0), (1.0, 0, 1.0), (0.7, 20, 0.9), (1.0, 20, 0.9)]  # temperature, top_k, top_p


def chi_square_p(observed: torch.Tensor, expected: torch.Tensor, min_expected: float = 5.0) -> float:
    """Goodness of fit of counts to expected counts; cells expected below `min_expected` are pooled."""
    observed, expected = observed.double().flatten(), expected.double().flatten()
    rare = expected < min_expected
    obs = torch.cat([observed[~rare], observed[rare].sum().reshape(1)])
    exp = torch.cat([expected[~rare], expected[rare].sum().reshape(1)])
    if exp[-1] < min_expected:  # the pooled cell itself is too small: fold it into the largest cell
        big = int(exp[:-1].argmax())
        obs[big] += obs[-1]
        exp[big] += exp[-1]
        obs, exp = obs[:-1], exp[:-1]
    stat = float(((obs - exp) ** 2 / exp).sum())
    df = len(exp) - 1
    return float(torch.special.gammaincc(torch.tensor(df / 2, dtype=torch.float64), torch.tensor(stat / 2)))


def same_distribution_p(a: torch.Tensor, b: torch.Tensor, min_expected: float = 5.0) -> float:
    """Two-sample chi-square (homogeneity) of two count vectors over the same categories; categories
    expected below `min_expected` in either sample are pooled into one."""
    both = torch.stack([a, b]).double()
    both = both[:, both.sum(0) > 0]
    expected = both.sum(1, keepdim=True) * both.sum(0, keepdim=True) / both.sum()
    keep = expected.min(0).values >= min_expected
    obs, exp = both[:, keep], expected[:, keep]
    if (~keep).any():
        obs = torch.cat([obs, both[:, ~keep].sum(1, keepdim=True)], 1)
        exp = torch.cat([exp, expected[:, ~keep].sum(1, keepdim=True)], 1)
    stat = float(((obs - exp) ** 2 / exp).sum())
    df = obs.shape[1] - 1
    return float(torch.special.gammaincc(torch.tensor(df / 2, dtype=torch.float64), torch.tensor(stat / 2)))


def probs(model, ids: list[int], t: float, k: int, p: float) -> torch.Tensor:
    with torch.no_grad():
        row = model(torch.tensor([ids])).logits[0, -1]
    return filter_logits(row, t, k, p).softmax(-1)


PREFIX = [1, 2, 3, 4, 5, 6, 7, 8]


@pytest.fixture(scope="module")
def small():
    """A tiny random model with 32 tokens, so 2,000 draws fill the pair test's cells (with 260 tokens
    nearly every (a, b) cell is rare, gets pooled, and the test loses the power to see shared noise)."""
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(0)
    config = LlamaConfig(vocab_size=32, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                         num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=256,
                         bos_token_id=None, eos_token_id=None, pad_token_id=None)
    model = LlamaForCausalLM(config).eval()
    with torch.no_grad():
        model.lm_head.weight.mul_(8.0)  # peaked enough that top-k 20 and top-p 0.9 cut something
    return model


# --- settings --------------------------------------------------------------------------------
@pytest.mark.parametrize("bad, says", [("temperature=-0.5", "temperature must be a number >= 0"),
                                       ("top_p=0", "top_p must be a number in (0, 1]"),
                                       ("top_p=1.5", "top_p must be a number in (0, 1]"),
                                       ("top_k=-1", "top_k must be an integer >= 0"),
                                       ("top_k=2.5", "top_k must be an integer >= 0"),
                                       ("temperature=hot", "temperature must be a number"),
                                       ("temperature=1e-9", "temperature must be 0 .greedy. or at least 0.001")])
def test_bad_sampling_settings_are_clear_errors(bad, says, run_goose, tmp_path):
    with pytest.raises(GooseError, match=says if ".greedy." in says else says.replace("(", r"\(").replace("]", r"\]")):
        run_goose(bad, f"results_dir={tmp_path}")
    assert not any(tmp_path.iterdir())  # refused before any folder was made


@pytest.mark.integration
def test_greedy_keys_ignore_top_k_top_p_and_sampled_keys_carry_every_setting():
    key = hash_of
    assert key() == key("top_p=0.5", "top_k=3") == key("temperature=0", "top_p=0.9") == key("seed=7")
    assert key("temperature=1", "top_p=1") == key("temperature=1.0", "top_p=1.0")
    sampled = {key("temperature=0.7"), key("temperature=0.7", "seed=1"), key("temperature=0.7", "top_p=0.9"),
               key("temperature=0.7", "top_k=20"), key("temperature=1.0")}
    assert len(sampled) == 5 and key() not in sampled
    assert Sampling(0.7, 20, 0.9, 1).label() == "T0.7-k20-p0.9-s1" and Sampling().label() == ""


# --- the noise and the filter ----------------------------------------------------------------
def test_noise_is_keyed_by_the_whole_tuple():
    fp = token_ids_fingerprint([1, 2, 3])
    seeds = {noise_seed(s, f, t) for s in (0, 1) for f in (fp, token_ids_fingerprint([1, 2, 4])) for t in (5, 6)}
    assert len(seeds) == 8  # no two of (seed, prompt, position) share noise, e.g. (0, t + 1) vs (1, t)


@pytest.mark.integration
def test_noise_is_the_same_in_another_process_whatever_the_global_generator():
    """Noise drawn from the global torch generator (or any process state) would differ between a run and its
    resume: another interpreter, its global generator seeded otherwise, must draw the same numbers."""
    import subprocess
    import sys

    fp = token_ids_fingerprint([1, 2, 3])
    torch.manual_seed(123)
    here = gumbel_at(noise_seed(0, fp, 5), torch.arange(6)).tolist()
    code = ("import torch; torch.manual_seed(7); "
            "from goose.engine.sampling import gumbel_at, noise_seed, token_ids_fingerprint; import torch; "
            "print(gumbel_at(noise_seed(0, token_ids_fingerprint([1, 2, 3]), 5), torch.arange(6)).tolist())")
    there = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120).stdout
    assert eval(there) == here and len(set(here)) == 6


def splitmix_reference(seed: int, token: int) -> float:
    """The noise of one token in plain Python integers (no int64 wrapping to trust)."""
    mask = (1 << 64) - 1
    z = (seed + (token + 1) * 0x9E3779B97F4A7C15) & mask
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & mask
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & mask
    k = (z ^ (z >> 31)) >> (64 - NOISE_BITS)
    u = torch.tensor((k + 0.5) / (1 << NOISE_BITS), dtype=torch.float64)
    return float((-torch.log(-torch.log(u))).float())


def test_noise_is_a_counter_based_function_of_position_seed_and_token():
    seed = noise_seed(0, token_ids_fingerprint([1, 2, 3]), 5)
    ids = torch.tensor([0, 1, 2, 49151, 7, 123456, 2**31 + 5])
    assert gumbel_at(seed, ids).tolist() == [splitmix_reference(seed, int(v)) for v in ids]
    row = gumbel_at(seed, torch.arange(300))
    subset = torch.tensor([299, 3, 150, 3])
    assert torch.equal(gumbel_at(seed, subset), row[subset])  # any subset, any order, drawn alike
    assert GUMBEL_MIN <= float(row.min()) and float(row.max()) <= GUMBEL_MAX
    mean = float(gumbel_at(seed, torch.arange(200_000)).double().mean())
    assert abs(mean - 0.5772) < 0.01  # Euler-Mascheroni: Gumbel(0, 1)


ROW_CASES = [(0.7, 0, 1.0), (1.0, 0, 1.0), (0.3, 0, 1.0), (0.7, 0, 0.95), (1.0, 20, 0.9), (1.0, 0, 0.5), (0.7, 3, 1.0)]


@pytest.mark.parametrize("t, k, p", ROW_CASES)
def test_choose_is_the_argmax_of_the_whole_perturbed_row(t, k, p):
    """`choose` draws noise for a few tokens only: it must pick what the whole perturbed row picks, with the same
    runners-up and gaps, on peaked rows, flat rows and rows with ties (ties go to the smaller id)."""
    from goose.engine.sampling import ranked

    g = torch.Generator().manual_seed(11)
    rows = [torch.randn(5000, generator=g) * scale for scale in (0.5, 3.0, 8.0)]
    tied = torch.randn(5000, generator=g)
    tied[[10, 700, 4000]] = 9.0
    rows += [tied, torch.zeros(5000)]
    for i, row in enumerate(rows):
        sampler = Sampler(Sampling(t, k, p, 3), [1, 2, i])
        for position in range(40):
            full = sampler.perturbed(row, position)
            want = ranked(full, int(full.argmax()))
            got = sampler.choose(row, position)
            assert got.token == want.token
            kept = [(i, g) for i, g in zip(want.runners_up, want.gaps) if g != float("inf")]  # cut tokens: -inf
            assert list(zip(got.runners_up, got.gaps)) == kept
            if not kept:  # a single token kept
                assert int(torch.isfinite(full).sum()) == 1 and got.margin == float("inf")


def test_the_nucleus_keeps_every_token_tied_at_its_edge_and_ranks_only_what_it_needs(monkeypatch):
    row = torch.tensor([5.0, 3.0, 3.0, 3.0, 0.0, -1.0])
    ids, values = kept_tokens(row, 1.0, 0, 0.9)
    assert ids.tolist() == [0, 1, 2, 3] and torch.equal(values, row[:4])  # p(5) ~ 0.79 < 0.9: the tied 3s all stay
    wide = torch.randn(49152, generator=torch.Generator().manual_seed(0))
    monkeypatch.setattr(sampling_module, "NUCLEUS_FIRST", 8)  # the first ranking falls short: it ranks more
    ids8, _ = kept_tokens(wide, 1.0, 0, 0.5)
    monkeypatch.setattr(sampling_module, "NUCLEUS_FIRST", 49152)
    assert torch.equal(ids8, kept_tokens(wide, 1.0, 0, 0.5)[0]) and 1000 < ids8.numel() < 49152


@pytest.mark.parametrize("t, k, p", [*SETTINGS, (0.3, 5, 1.0), (1.5, 0, 0.5), (1.0, 0, 0.999)])
def test_filter_matches_hugging_face_warpers(t, k, p):
    from transformers.generation.logits_process import TemperatureLogitsWarper, TopKLogitsWarper, TopPLogitsWarper

    g = torch.Generator().manual_seed(3)
    logits = torch.randn(6, 300, generator=g) * 3
    logits[0, :10] = 4.0  # ties at the top-k / nucleus edge
    want = TemperatureLogitsWarper(t)(None, logits.clone())
    if k:
        want = TopKLogitsWarper(k)(None, want)
    if p < 1:
        want = TopPLogitsWarper(p)(None, want)
    assert torch.equal(filter_logits(logits, t, k, p), want)


# --- our AR sampler vs an independent one ----------------------------------------------------
def reference_sampler(model, prompt: list[int], n: int, s: Sampling) -> list[int]:
    """Plain full-sequence forwards (no cache, no engine), Hugging Face's warpers, the same noise."""
    from transformers.generation.logits_process import TemperatureLogitsWarper, TopKLogitsWarper, TopPLogitsWarper

    fp = token_ids_fingerprint(prompt)
    ids = list(prompt)
    for _ in range(n):
        with torch.no_grad():
            row = model(torch.tensor([ids])).logits[:, -1].float()
        row = TemperatureLogitsWarper(s.temperature)(None, row)
        if s.top_k:
            row = TopKLogitsWarper(s.top_k)(None, row)
        if s.top_p < 1:
            row = TopPLogitsWarper(s.top_p)(None, row)
        ids.append(int((row[0] + gumbel_at(noise_seed(s.seed, fp, len(ids)), torch.arange(row.shape[-1]))).argmax()))
    return ids[len(prompt):]


@pytest.mark.integration
@pytest.mark.parametrize("seed", [0, 1, 2])
@pytest.mark.parametrize("t, k, p", [(0.7, 0, 0.95), (1.0, 20, 0.9), (0.3, 0, 1.0)])
def test_ar_sampler_matches_an_independent_reference(tiny, prompts, t, k, p, seed):
    s = Sampling(t, k, p, seed)
    engine = Engine(tiny)
    for prompt in prompts:
        ours = generate(engine, prompt, Drafter(), 24, sampling=s).tokens
        assert ours == reference_sampler(tiny, prompt, 24, s)
        assert ours == hf_reference(tiny, prompt, 24, frozenset(), s)  # HF's loop and cache, our noise


@pytest.mark.integration
def test_sampled_output_differs_from_greedy_and_between_seeds(tiny, prompts):
    engine = Engine(tiny)
    for prompt in prompts:
        greedy = generate(engine, prompt, Drafter(), 24).tokens
        assert greedy == hf_greedy(tiny, prompt, 24)
        a, b = (generate(engine, prompt, Drafter(), 24, sampling=Sampling(0.7, 0, 0.95, s)).tokens for s in (0, 1))
        assert a != greedy and a != b
        assert generate(engine, prompt, Drafter(), 24, sampling=Sampling(0.0, 5, 0.5, 3)).tokens == greedy


# --- distributions ---------------------------------------------------------------------------
@pytest.mark.parametrize("t, k, p", [pytest.param(*x, marks=() if i == 0 else pytest.mark.integration)
                                     for i, x in enumerate(SETTINGS)])
def test_one_position_draws_from_the_filtered_softmax(small, t, k, p):
    want = probs(small, PREFIX, t, k, p)
    with torch.no_grad():
        row = small(torch.tensor([PREFIX])).logits[0, -1]
    picks = torch.tensor([Sampler(Sampling(t, k, p, seed), PREFIX).pick(row, len(PREFIX)) for seed in range(N_SEEDS)])
    counts = torch.bincount(picks, minlength=want.numel())
    assert counts[want == 0].sum() == 0  # nothing outside the top-k / nucleus
    assert chi_square_p(counts, want * N_SEEDS) > 1e-3


def pair_p_value(model, t: float, k: int, p: float) -> float:
    """Two tokens from the engine's AR sampler over N_SEEDS seeds vs p(a) * p(b | a)."""
    engine = Engine(model)
    pairs = [tuple(generate(engine, PREFIX, Drafter(), 2, sampling=Sampling(t, k, p, s)).tokens)
             for s in range(N_SEEDS)]
    first = probs(model, PREFIX, t, k, p)
    top = first.argsort(descending=True)[:40].tolist()  # the likely first tokens; the rest is one pooled cell
    counts = Counter(pairs)
    observed, expected = [], []
    for a in top:
        second = probs(model, PREFIX + [a], t, k, p)
        seen = torch.zeros(second.numel())
        for (x, b), n in counts.items():
            if x == a:
                seen[b] += n
        observed.append(seen)
        expected.append(first[a] * second * N_SEEDS)
    observed.append(torch.tensor([float(sum(n for (x, _), n in counts.items() if x not in top))]))
    expected.append((1 - first[top].sum()).reshape(1) * N_SEEDS)
    return chi_square_p(torch.cat(observed), torch.cat(expected))


@pytest.mark.integration
def test_two_positions_draw_from_the_joint_distribution(small):
    assert pair_p_value(small, 1.0, 0, 1.0) > 1e-3
    assert pair_p_value(small, 0.7, 20, 0.9) > 1e-3


@pytest.mark.integration
def test_the_pair_test_catches_noise_shared_between_positions(small, monkeypatch):
    """Key the noise by position // 2 (PREFIX has even length, so the first two new tokens share it):
    every single position is still an exact draw, the pair is not, and the test must say so."""
    keyed = sampling_module.noise_seed
    monkeypatch.setattr(sampling_module, "noise_seed", lambda s, f, t: keyed(s, f, t // 2))
    assert len(PREFIX) % 2 == 0
    assert pair_p_value(small, 1.0, 0, 1.0) < 1e-3


@pytest.mark.parametrize("t, k, p", [(0.7, 20, 1.0), pytest.param(1.0, 20, 0.9, marks=pytest.mark.integration)])
def test_first_token_matches_hugging_face_sampling_in_distribution(small, t, k, p):
    """HF generate(do_sample=True) against our sampler: a two-sample (homogeneity) chi-square."""
    torch.manual_seed(0)
    with torch.no_grad():
        hf = small.generate(torch.tensor([PREFIX]), do_sample=True, temperature=t, top_k=k, top_p=p,
                           num_return_sequences=N_SEEDS, max_new_tokens=1, pad_token_id=0)[:, -1]
        row = small(torch.tensor([PREFIX])).logits[0, -1]
    ours = torch.tensor([Sampler(Sampling(t, k, p, s), PREFIX).pick(row, len(PREFIX)) for s in range(N_SEEDS)])
    vocab = row.numel()
    assert same_distribution_p(torch.bincount(hf, minlength=vocab), torch.bincount(ours, minlength=vocab)) > 1e-3
    want = probs(small, PREFIX, t, k, p)
    assert chi_square_p(torch.bincount(hf, minlength=vocab), want * N_SEEDS) > 1e-3


# --- every method, and a drafter that knows the answer ---------------------------------------
@pytest.mark.integration
@pytest.mark.parametrize("name", method_names())
def test_every_method_is_identical_to_the_ar_sampler(name, tiny, prompts, store):
    d, _ = drafter_for(name, extra=[f"rest_datastore={store}"])
    engine = Engine(tiny)
    for seed in (0, 1, 2):
        s = Sampling(0.7, 0, 0.95, seed) if seed != 2 else Sampling(1.0, 20, 0.9, seed)
        for prompt in prompts:
            want = generate(engine, prompt, Drafter(), 32, sampling=s).tokens
            assert generate(engine, prompt, d, 32, sampling=s).tokens == want, (name, seed)


class Oracle(Drafter):
    """Knows AR sampling's answer: drafts its next tokens as a chain with a wrong sibling at every depth
    (put first, so the walk must pick by token). Under sampling on a tiny random model little else is
    ever accepted, so this is the drafter that makes a wrong noise key visible."""

    name = "oracle"

    def __init__(self, answer: list[int], prompt_len: int, depth: int = 6):
        super().__init__()
        self.answer, self.start_at, self.depth = answer, prompt_len, depth

    def propose(self, context: list[int]) -> Draft:
        done = len(context) - self.start_at
        nxt = self.answer[done: done + self.depth]
        tokens, parents = [context[-1]], [-1]
        for i, tok in enumerate(nxt):
            parent = 0 if i == 0 else len(tokens) - 1  # the previous right node
            tokens += [(tok + 1) % 250, tok]
            parents += [parent, parent]
        return Draft(tokens, parents)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_an_oracle_drafter_is_accepted_and_identical(tiny, prompts, seed):
    s = Sampling(0.7, 0, 0.95, seed)
    engine = Engine(tiny)
    for prompt in prompts:
        want = generate(engine, prompt, Drafter(), 40, sampling=s).tokens
        got = generate(engine, prompt, Oracle(want, len(prompt)), 40, sampling=s)
        assert got.tokens == want
        assert got.tau > 5  # the chain is accepted: 7 tokens per forward but for the last step


def test_a_node_keyed_by_its_own_position_is_caught(tiny, prompts, monkeypatch):
    """If verify keyed a node's noise by the node's position instead of the position it emits, the oracle's
    chain would be rejected and the output would differ from AR: the identity test above would fail."""
    s = Sampling(0.7, 0, 0.95, 0)
    engine = Engine(tiny)
    prompt = prompts[0]
    want = generate(engine, prompt, Drafter(), 40, sampling=s).tokens
    real = Sampler.choose
    monkeypatch.setattr(Sampler, "choose", lambda self, row, t: real(self, row, t - 1))
    got = generate(engine, prompt, Oracle(want, len(prompt)), 40, sampling=s)
    assert got.tokens != want


# --- run.py end to end -----------------------------------------------------------------------
@pytest.mark.integration
def test_a_sampled_run_is_lossless_against_the_ar_sampler(tiny_folder, prompt_file, tmp_path, run_goose):
    common = ["model=hf", f"model.path={tiny_folder}", "benchmark=jsonl", f"benchmark.path={prompt_file}",
              "max_new_tokens=24", f"results_dir={tmp_path}", "n_prompts=3", "budget=60"]
    sampled = ["temperature=0.7", "top_p=0.95"]
    run_goose("method=goose", *common, *sampled)
    run_goose("method=goose", *common)
    run_goose("method=ar", *common, *sampled)  # AR checked against HF generate with our noise
    got = rows(run_folder(tmp_path, "model", "jsonl", "goose", "B60-Mprompt-N24-T0.7-p0.95-s0") / "results.csv")
    greedy_dir = [f for f in (tmp_path / "model" / "jsonl" / "goose").iterdir() if "-T" not in f.name]
    assert len(greedy_dir) == 1  # greedy folders are named as before sampling existed
    greedy = rows(greedy_dir[0] / "results.csv")
    ar = rows(run_folder(tmp_path, "model", "jsonl", "ar", "Bfixed-Mnone-N24-T0.7-p0.95-s0") / "results.csv")
    assert all(r["lossless"] == "True" for r in got + greedy + ar)
    assert {(r["temperature"], r["top_p"], r["top_k"], r["seed"]) for r in got} == {("0.7", "0.95", "0", "0")}
    assert {r["temperature"] for r in greedy} == {"0.0"}
    refs = tmp_path / "references"
    for a, b in zip(got, greedy):
        assert a["reference_key"] != b["reference_key"]
        sampled_tokens, greedy_tokens = (json.loads((refs / k[:2] / f"{k}.json").read_text())["tokens"]
                                         for k in (a["reference_key"], b["reference_key"]))
        assert sampled_tokens != greedy_tokens
    assert [r["reference_key"] for r in ar] == [r["reference_key"] for r in got]  # one AR sample per prompt


def test_new_columns_widen_an_old_results_file(tmp_path):
    from goose.storage.result_files import ResultsFile

    f = ResultsFile(tmp_path / "results.csv")
    f.append({"prompt_id": "p0", "tau": 2.0})
    f.append({"prompt_id": "p1", "tau": 3.0, "temperature": 0.7})
    assert f.header() == ["prompt_id", "tau", "row_check", "temperature"]
    assert [(r["prompt_id"], r["temperature"]) for r in f.rows()] == [("p0", ""), ("p1", "0.7")]


@pytest.mark.integration
def test_bench_samples_every_method_and_hugging_face_with_the_same_noise(tiny_folder, tmp_path):
    """bench.py --temperature: our methods and HF's greedy and prompt-lookup loops on the perturbed logits
    all return AR sampling's tokens (the lossless column compares against hf-greedy)."""
    import os
    import subprocess
    import sys

    env = dict(os.environ, HF_HUB_OFFLINE="1", OMP_NUM_THREADS="1", PYTHONPATH="")
    b = subprocess.run([sys.executable, "-m", "goose.measurement.bench", "--model", "hf", "--model-path",
                        str(tiny_folder), "--methods", "goose@60", "pld@60", "hf-prompt-lookup", "--benchmarks",
                        "humaneval", "--n-prompts", "3", "--max-new-tokens", "24", "--repeats", "1", "--temperature",
                        "0.7", "--top-p", "0.95", "--seed", "3"], cwd=tmp_path, env=env, capture_output=True, text=True,
                       timeout=600)
    assert b.returncode == 0, b.stderr[-2000:]
    assert "sampling T0.7-p0.95-s3" in b.stdout
    lines = {line.split("|")[1].strip(): line for line in b.stdout.splitlines() if line.startswith("| ")}
    for m in ("ar", "goose@60:prompt", "pld", "hf-prompt-lookup"):
        assert lines[m].rstrip().endswith("3/3 |"), lines[m]
    bad = subprocess.run([sys.executable, "-m", "goose.measurement.bench", "--top-p", "0"], cwd=tmp_path,
                         env=env, capture_output=True, text=True, timeout=600)
    assert bad.returncode == 2 and "top_p must be a number in (0, 1]" in bad.stderr
