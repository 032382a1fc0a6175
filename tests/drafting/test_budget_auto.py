"""budget=auto: cost curve, acceptance model, pruning to what pays; still lossless."""

import pytest
from conftest import hf_greedy
from tiny import tiny_model

from goose.baselines.balanced_tree import BalancedTreeDrafter
from goose.baselines.token_recycling import TokenRecyclingDrafter
from goose.drafting.budget import AutoBudget, CostCurve
from goose.drafting.tree import TreeNodes
from goose.engine.single import Engine
from goose.methods.goose import BRANCH, SPINE, GooseDrafter
from goose.running.loop import generate


def test_cost_curve_interpolates_and_extrapolates():
    c = CostCurve([1, 8, 64], [1.0, 1.6, 3.2])
    assert c(1) == 1.0 and c(8) == 1.6 and c(36) == pytest.approx(2.4)
    assert c(128) == pytest.approx(6.4)


def test_cost_curve_follows_the_context_it_was_measured_after():
    c = CostCurve([1, 8], [1.0, 2.0], [256, 1024], [[1.0, 2.0], [1.5, 4.0]])
    assert c(8) == 2.0 and c(8, 100) == 2.0 and c(8, 1024) == 4.0 and c(4, 640) == pytest.approx((1.5 + 2.5) / 2)
    assert c(8, 1792) == pytest.approx(6.0)  # beyond the last context: its slope continues
    assert CostCurve([1, 8], [1.0, 2.0])(8, 4096) == 2.0  # measured after one context only


def sample_tree():
    n = TreeNodes(0)
    s1 = n.add(0, 1, SPINE)
    n.add(s1, 2, SPINE)
    for t, sc in [(5, 0.6), (6, 0.3), (7, 0.05)]:
        b = n.add(0, t, BRANCH, sc)
    n.add(b, 8, BRANCH, 0.9)
    return n


def test_nothing_accepted_shrinks_to_ar():
    auto = AutoBudget(CostCurve([1, 8, 64], [1.0, 1.6, 3.2]))
    tree = sample_tree()
    for _ in range(200):
        auto.observe(tree, [0])  # every child reached, none accepted
    assert len(auto.prune(tree)) == 1


def test_flat_cost_keeps_everything_and_pruned_sets_are_ancestor_closed():
    flat = AutoBudget(CostCurve([1, 128], [1.0, 1.0]))
    tree = sample_tree()
    assert len(flat.prune(tree)) == len(tree)
    steep = AutoBudget(CostCurve([1, 2, 8], [1.0, 1.3, 8.0]))
    # Prior values: spine 2/3 at depth 1 (held 1: Laplace's (1 + 1) / (1 + 2)), 2/3 * 3/4 = 0.5 at depth 2;
    # branch 0.6 -> 0.65, 0.3 -> 0.35. With cost(2) = 1.3 and cost(3) = 2.4, (1 + 2/3) / 1.3 beats both AR
    # (1 / 1) and three nodes ((1 + 1.32) / 2.4): keep the root and token 1.
    kept = steep.prune(tree)
    assert kept.tokens == [0, 1] and kept.parents == [-1, 0]
    medium = AutoBudget(CostCurve([1, 4, 8], [1.0, 1.1, 8.0])).prune(tree)
    assert medium.tokens == [0, 1, 2, 5]  # the spine's two nodes (0.67, 0.5) and the best branch (0.65)
    assert all(p < i for i, p in enumerate(medium.parents) if i)


def test_a_long_held_span_is_trusted_deeper_and_a_pruned_source_is_tried_again():
    """A chain node's prior follows how long its span has held ((h + 1) / (h + 2)), so a chain continuing a
    30-token match is kept deeper than one continuing a 1-token match; a key rejected a few times and then
    pruned drifts back to its prior while unobserved, and one observed step after step keeps its evidence."""
    from goose.drafting.budget import AcceptanceModel

    curve = CostCurve([1, 8, 16, 64], [1.0, 1.15, 1.6, 4.0])

    def chain(held: int) -> TreeNodes:
        n = TreeNodes(0)
        for i in range(20):
            n.add(i, 100 + i, SPINE, 0.5, held + i)
        return n

    assert len(AutoBudget(curve).prune(chain(30))) > len(AutoBudget(curve).prune(chain(1))) > 1
    model = AcceptanceModel()
    short = chain(1)
    key = model.key(short, 1)
    for _ in range(6):
        model.observe(short, [0])  # rejected at depth 1 six steps running
    low = model.q(key)
    assert low < 0.3
    other = TreeNodes(0)
    other.add(0, 7, BRANCH, 0.5)
    for _ in range(30):
        model.observe(other, [0])  # steps in which the chain was pruned
    assert low < model.q(key) < model.prior(key) and model.prior(key) - model.q(key) < 0.1


@pytest.mark.parametrize("make", [GooseDrafter, lambda: BalancedTreeDrafter(branching=3),
                                  TokenRecyclingDrafter])
def test_auto_budget_is_lossless(tiny, prompts, make):
    d = make()
    d.enable_auto_budget(AutoBudget(CostCurve([1, 8, 32, 64], [1.0, 1.3, 2.0, 3.0])))
    engine = Engine(tiny)
    for prompt in prompts:
        assert generate(engine, prompt, d, 40).tokens == hf_greedy(tiny, prompt, 40)
    assert 1 <= d.stats()["auto_budget_mean"] <= 101


def test_engine_measures_one_cost_per_width_with_the_widths_taking_turns(tiny, monkeypatch):
    """On a clock that advances by exactly T ms per verification of T nodes (and by 0 elsewhere), every round
    of every width reads T ms: the warm-up round is dropped, rounds are per width, the median is taken."""
    import goose.engine.single as engine_module

    clock = {"t": 0.0}
    engine = Engine(tiny)
    real_verify = engine.verify
    order = []

    def verify(draft, **kw):
        order.append(len(draft))
        clock["t"] += len(draft) / 1000
        return real_verify(draft, **kw)

    monkeypatch.setattr(engine, "verify", verify)
    monkeypatch.setattr(engine_module.time, "perf_counter", lambda: clock["t"])
    rounds = engine.measure_rounds([1, 8, 64], context_len=32, repeats=3)
    assert rounds == [pytest.approx([t / 1000] * 3) for t in (1, 8, 64)]
    assert order == [1, 8, 64] * 4  # one warm-up round, then three, the widths taking turns in each
    order.clear()
    assert engine.measure_cost([1, 8], context_len=32, repeats=2) == pytest.approx([0.001, 0.008])


def test_cost_curve_is_measured_once_and_keyed_by_model_content_and_cpu(tmp_path, monkeypatch):
    import torch

    from goose.core.identity import ModelIdentity
    from goose.drafting.budget import cost_curve

    class Engine:
        backend = "eager"
        calls = 0

        def measure_rounds(self, widths, repeats, context_len, progress=None):
            Engine.calls += context_len == 256  # one curve: a round of measurements per context
            return [[0.01 * w] * repeats for w in widths]

    monkeypatch.setenv("GOOSE_CACHE", str(tmp_path))
    a = ModelIdentity("model", "aaaa", "/x/model", "hf", "/x/model")
    b = ModelIdentity("model", "bbbb", "/y/model", "hf", "/y/model")  # same name, other weights
    cpu = torch.device("cpu")
    first = cost_curve(Engine(), a, cpu, torch.float32)
    again = cost_curve(Engine(), a, cpu, torch.float32)
    assert Engine.calls == 1 and again.seconds == first.seconds
    cost_curve(Engine(), b, cpu, torch.float32)
    cost_curve(Engine(), a, cpu, torch.float16)
    assert Engine.calls == 3
    names = sorted(p.name for p in (tmp_path / "profiles").iterdir())
    assert len(names) == 3 and sum("aaaa" in n for n in names) == 2 and all("threads" in n for n in names)
    # another CPU model (other kernels, other costs) with the same cache folder measures its own curve
    monkeypatch.setattr("goose.drafting.budget.device_name", lambda device: "Other CPU 9000 (AVX2)")
    cost_curve(Engine(), a, cpu, torch.float32)
    assert Engine.calls == 4 and any("Other_CPU_9000_AVX2" in p.name for p in (tmp_path / "profiles").iterdir())


def test_the_curve_is_keyed_by_what_determines_it_not_the_models_file_name(tiny_folder, tmp_path, monkeypatch):
    """The same weights under another folder name read one curve; other threads, another dtype or another CPU
    (another kernel instruction set) each their own (#61: a renamed model was measured again, 1m14s)."""
    import shutil

    import torch

    from goose.drafting.budget import profile_key
    from goose.models.loading import identify_model, model_config

    renamed = shutil.copytree(tiny_folder, tmp_path / "my-renamed-model")
    a, b = (identify_model(model_config("hf", str(f))) for f in (tiny_folder, renamed))
    assert a.label != b.label and a.fingerprint == b.fingerprint
    engine, cpu = Engine(tiny_model()), torch.device("cpu")
    key = profile_key(engine, a, cpu, torch.float32)
    assert profile_key(engine, b, cpu, torch.float32) == key and a.label not in key
    assert profile_key(engine, a, cpu, torch.bfloat16) != key
    threads = torch.get_num_threads()
    try:
        torch.set_num_threads(1 if threads != 1 else 2)
        assert profile_key(engine, a, cpu, torch.float32) != key
    finally:
        torch.set_num_threads(threads)
    monkeypatch.setattr("goose.drafting.budget.device_name", lambda device: "Other CPU 9000 (AVX2)")
    assert profile_key(engine, a, cpu, torch.float32) != key


def test_the_first_curve_is_announced_with_an_estimate_and_a_renamed_model_reads_it(tiny_folder, tmp_path,
                                                                                     monkeypatch, capsys):
    """Before measuring, one line says what is measured and about how long it takes, then a progress bar on
    stderr counts the timed forwards; the same model under another name is not measured again."""
    import shutil

    import torch

    from goose.drafting.budget import cost_curve
    from goose.models.loading import identify_model, model_config

    monkeypatch.setenv("GOOSE_CACHE", str(tmp_path / "cache"))
    monkeypatch.setattr("goose.drafting.budget.BUSY_SPREAD", float("inf"))  # once, however busy the machine is
    monkeypatch.setattr("goose.drafting.budget.DEFAULT_WIDTHS", (1, 4, 16))  # a short curve: what is said is tested
    monkeypatch.setattr("goose.drafting.budget.CURVE_REPEATS", 2)
    renamed = shutil.copytree(tiny_folder, tmp_path / "my-renamed-model")
    a, b = (identify_model(model_config("hf", str(f))) for f in (tiny_folder, renamed))
    engine, cpu = Engine(tiny_model()), torch.device("cpu")
    real, said, bars = engine.measure_rounds, [], []

    def measure_rounds(*args, **kw):
        got = capsys.readouterr()
        said.append(got.out)  # what was printed before the first forward was timed
        bars.append(got.err)
        return real(*args, **kw)

    monkeypatch.setattr(engine, "measure_rounds", measure_rounds)
    curve = cost_curve(engine, a, cpu, torch.float32)
    assert said and "[goose] budget=auto measures this model's verification cost on this machine once" in said[0]
    assert "9 timed forwards (3 node counts x 3 rounds x 1 context(s)), about " in said[0]
    assert "s on an idle machine (estimated from the model's size and" in said[0]
    assert "several times that where other processes share the cores" in said[0]  # not "3x" (#61: 25x once)
    assert len(said[0].strip().splitlines()) == 1
    assert "cost curve" in "".join(bars) + capsys.readouterr().err  # the bar
    calls = len(said)
    assert cost_curve(engine, b, cpu, torch.float32).by_context == curve.by_context and len(said) == calls
    assert "measures" not in capsys.readouterr().out


def test_the_estimate_said_before_measuring_is_the_commented_one_and_none_on_a_gpu():
    """core/waits.py's comment: SmolLM2's first curve (12 node counts x 6 rounds x 2 contexts) is announced at about
    14 s on 2 threads, twice that on one; a GPU is not estimated."""
    from types import SimpleNamespace

    import torch
    from transformers import LlamaConfig

    from goose.core.waits import verify_seconds
    from goose.drafting.budget import CURVE_CONTEXTS, DEFAULT_WIDTHS

    smollm2 = LlamaConfig(hidden_size=576, num_hidden_layers=30, intermediate_size=1536, vocab_size=49152)
    engine = SimpleNamespace(device=torch.device("cpu"), model=SimpleNamespace(config=smollm2))

    def curve_s():
        return sum(verify_seconds(engine, n, c) for c in CURVE_CONTEXTS for n in (c, *DEFAULT_WIDTHS * 6))

    threads = torch.get_num_threads()
    try:
        torch.set_num_threads(2)
        two = curve_s()
        torch.set_num_threads(1)
        assert 12 < two < 16 and curve_s() == pytest.approx(2 * two)
    finally:
        torch.set_num_threads(threads)
    assert verify_seconds(SimpleNamespace(device=torch.device("cuda"), model=engine.model), 8) is None


def test_a_curve_cached_under_the_old_name_is_read_not_measured_again(tmp_path, monkeypatch, capsys):
    """Files of the old name began with the model's label: the curve they hold is taken over, not measured."""
    import torch

    from goose.core.identity import ModelIdentity
    from goose.drafting.budget import CostCurve, cost_curve, profile_key

    class Engine:
        backend = "eager"

        def measure_rounds(self, *args, **kw):
            raise AssertionError("measured again")

    monkeypatch.setenv("GOOSE_CACHE", str(tmp_path))
    model, cpu = ModelIdentity("old-name", "aaaa", "/x", "hf", "/x"), torch.device("cpu")
    old = tmp_path / "profiles" / f"old-name-{profile_key(Engine(), model, cpu, torch.float32)}-ctx256-1024.json"
    old.parent.mkdir()
    old.write_text(CostCurve([1, 64], [0.01, 0.05], [256, 1024], [[0.01, 0.05], [0.02, 0.06]]).to_json())
    renamed = ModelIdentity("new-name", "aaaa", "/y", "hf", "/y")
    assert cost_curve(Engine(), renamed, cpu, torch.float32).by_context == [[0.01, 0.05], [0.02, 0.06]]
    assert capsys.readouterr().out == "" and len(list(old.parent.glob("aaaa-*-ctx256-1024.json"))) == 1


def test_a_short_context_model_gets_a_curve_that_fits_it(tmp_path, monkeypatch):
    """A model of 256 positions cannot verify 128 nodes after 256 tokens: it is measured at widths that leave
    half its context to the prefix, after the prefix that fits."""
    import torch

    from goose.core.identity import ModelIdentity
    from goose.drafting.budget import cost_curve

    class Engine:
        backend = "eager"
        max_positions = 256
        asked: list = []

        def measure_rounds(self, widths, repeats, context_len, progress=None):
            assert context_len + max(widths) <= self.max_positions
            Engine.asked.append((tuple(widths), context_len))
            return [[0.01 * w] * repeats for w in widths]

    monkeypatch.setenv("GOOSE_CACHE", str(tmp_path))
    curve = cost_curve(Engine(), ModelIdentity("m", "cccc", "/m", "hf", "/m"), torch.device("cpu"), torch.float32)
    assert Engine.asked == [((1, 2, 4, 8, 12, 16, 24, 32, 48, 64, 96, 128), 128)]
    assert curve.contexts == [128] and curve(128) == pytest.approx(1.28)


def test_a_cost_curve_measured_on_a_busy_machine_is_measured_again(capsys):
    """Rounds that disagree (another process had the cores for a while) are not kept as the hardware's curve."""
    from goose.drafting.budget import measure_quietly, round_spread

    class Busy:
        attempts = 0

        def measure_rounds(self, widths, repeats, context_len=256):
            Busy.attempts += 1
            slow = 3.0 if Busy.attempts == 1 else 1.0  # busy during the first measurement's second round
            return [[0.01 * w, 0.01 * w * slow, 0.01 * w] + [0.01 * w] * (repeats - 3) for w in widths]

    secs = measure_quietly(Busy(), [1, 8], repeats=5)
    assert Busy.attempts == 2 and secs == [0.01, 0.08]
    assert "busy while measuring: rounds 3.00x apart; measuring again" in capsys.readouterr().out

    class Narrow:  # busy only while the cheap widths ran: their rounds still count as much
        def measure_rounds(self, widths, repeats, context_len=256):
            return [[w, w * 2.0 if w <= 16 else w, w] for w in widths]

    assert round_spread(Narrow().measure_rounds([1, 2, 4, 8, 16, 32, 64], 3)) == 2.0


def test_a_cost_curve_is_never_cheaper_for_more_nodes_and_a_slow_measurement_says_so(capsys, monkeypatch):
    """A noisy time below a narrower width's (a busy spell) would make a wider tree look free: the curve kept is the
    closest non-decreasing one (by hand: 4 then 2 pool to 3, 3); a measurement that ran far slower than its estimate
    says so even when its rounds agree."""
    from goose.drafting import budget
    from goose.drafting.budget import measure_quietly, monotone

    assert monotone([1.0, 4.0, 2.0, 5.0]) == [1.0, 3.0, 3.0, 5.0]
    assert monotone([1.0, 2.0]) == [1.0, 2.0]

    class Dip:
        def measure_rounds(self, widths, repeats, context_len=256):
            return [[{1: 0.4, 4: 0.2, 12: 0.6}[w]] * repeats for w in widths]

    clock = iter([0.0, 30.0])  # the measurement "took" 30 s
    monkeypatch.setattr(budget.time, "perf_counter", lambda: next(clock))
    assert measure_quietly(Dip(), [1, 4, 12], repeats=3, estimate=5.0) == pytest.approx([0.3, 0.3, 0.6])
    out = capsys.readouterr().out
    assert "measured 6x slower than estimated (other processes share the cores); its rounds agree, so it is kept" in out


@pytest.mark.parametrize("make", [GooseDrafter, lambda: BalancedTreeDrafter(branching=3)])
def test_auto_budget_decisions_depend_on_the_prompt_only(tiny, prompts, make):
    """A prompt decoded after others (one drafter, one process) gets the same drafts as when it runs alone:
    resumed runs, n_prompts and prompt order cannot change a row."""
    curve = CostCurve([1, 8, 32, 64], [1.0, 1.3, 2.0, 3.0])
    engine = Engine(tiny)

    def fresh():
        d = make()
        d.enable_auto_budget(AutoBudget(curve))
        return d

    alone = generate(engine, prompts[-1], fresh(), 40)
    d = fresh()
    for p in prompts[:-1]:
        generate(engine, p, d, 40)
    after = generate(engine, prompts[-1], d, 40)
    assert (after.tokens, after.steps, after.widths) == (alone.tokens, alone.steps, alone.widths)
    assert after.stats["auto_budget_mean"] == alone.stats["auto_budget_mean"]
