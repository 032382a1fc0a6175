"""bench.py --json is the run (issue #46): always written when the run ends (or the run refused up front), no stale
file standing in for it, null and never NaN, what it ran on and everything it printed; the header counts the
prompts it ran; one TPOT definition (prefill excluded, TTFT beside it) at every concurrency."""

from __future__ import annotations

import json
from types import SimpleNamespace

import pytest
import torch

from goose.measurement import bench


def strict(path) -> dict:
    """The JSON file at `path`, refusing NaN and Infinity (Python's json reads them by default)."""
    def refuse(name):
        raise AssertionError(f"{name} in {path}")

    return json.loads(path.read_text(), parse_constant=refuse)


@pytest.fixture
def four_prompts(tmp_path):
    p = tmp_path / "prompts.jsonl"
    p.write_text("".join(json.dumps({"id": f"p{i}", "prompt": f"def f{i}(x):\n    return x + {i}\n" * 2}) + "\n"
                         for i in range(4)))
    return p


def run_bench(tiny_folder, prompts, *more):
    bench.main(["--model", "hf", "--model-path", str(tiny_folder), "--methods", "pld@60", "--prompts", str(prompts),
                "--max-new-tokens", "6", "--backends", "eager", *more])


@pytest.mark.integration
def test_json_is_the_run_what_it_ran_on_and_everything_it_printed(tiny_folder, four_prompts, tmp_path, capsys):
    """--n-prompts takes the first N of a --prompts file; the header counts them and names the file; the JSON
    carries the model (name, path, fingerprint), dtype, threads, backends, torch, device, date, the cost table,
    every row with TTFT/TPOT beside tokens/s, and the profiled pass, as printed."""
    from goose.models.loading import identify_model, model_config

    out = tmp_path / "bench.json"
    run_bench(tiny_folder, four_prompts, "--n-prompts", "2", "--repeats", "1", "--json", str(out))
    printed = capsys.readouterr().out
    header = next(line for line in printed.splitlines() if line.startswith("hf float32 on cpu"))
    assert f"2 prompts ({four_prompts})" in header, header
    data = strict(out)
    want = identify_model(model_config("hf", str(tiny_folder)))
    assert data["prompts"] == 2 and data["prompts_file"] == str(four_prompts) and data["repeats"] == 1
    assert (data["model"], data["model_name"], data["model_path"], data["model_fingerprint"]) == (
        "hf", want.label, want.where, want.fingerprint)
    assert (data["dtype"], data["device"], data["threads"], data["backends"], data["torch"]) == (
        "float32", "cpu", torch.get_num_threads(), ["eager"], torch.__version__)
    assert data["when"][:4].isdigit() and "--n-prompts" in data["argv"]
    # the cost table, as printed
    assert data["cost"]["widths"] == list(bench.COST_WIDTHS)
    for T, ms in zip(bench.COST_WIDTHS, data["cost"]["ms"]["eager"]):
        assert f"| {T} | {ms:.1f} (" in printed
    # every row, as printed, with latency beside it: ours measured, Hugging Face's loops none
    rows = {r["method"]: r for r in data["rows"]}
    assert set(rows) == {"hf-greedy", "ar", "pld"}
    for m, r in rows.items():
        line = next(x for x in printed.splitlines() if x.startswith(f"| {m} |"))
        assert f"| {r['tokens_per_s']:.2f} (" in line and line.rstrip().endswith(f"{r['lossless']} |")
        assert {"ttft_p50_ms", "ttft_p95_ms", "tpot_p50_ms", "tpot_p95_ms"} <= set(r)
    assert rows["hf-greedy"]["tpot_p50_ms"] is None and rows["ar"]["lossless"] == "2/2"
    for m in ("ar", "pld"):
        assert 0 < rows[m]["ttft_p50_ms"] <= rows[m]["ttft_p95_ms"] and 0 < rows[m]["tpot_p50_ms"] <= rows[m][
            "tpot_p95_ms"]
        line = next(x for x in printed.splitlines() if x.startswith(f"| {m} |"))
        assert f"| {rows[m]['ttft_p50_ms']:.1f} / {rows[m]['tpot_p50_ms']:.1f} |" in line
    # the profiled pass, as printed
    for m in ("ar", "pld"):
        p = data["profiled"][m]
        assert f"{p['forward_ms']:8.2f} | {p['engine_overhead_ms']:6.2f} | {p['drafter_ms']:6.2f}" in printed


@pytest.mark.integration
def test_repeats_0_writes_the_profiled_pass_over_a_stale_file(tiny_folder, four_prompts, tmp_path, capsys):
    """--repeats 0 runs the profiled pass only, and its --json is that run: never an earlier file left at OUT."""
    out = tmp_path / "bench.json"
    out.write_text(json.dumps({"rows": [{"method": "stale"}], "repeats": 3}))
    run_bench(tiny_folder, four_prompts, "--repeats", "0", "--json", str(out))
    data = strict(out)
    assert data["repeats"] == 0 and data["rows"] == [] and data["prompts"] == 4
    assert set(data["profiled"]) == {"ar", "pld"} and data["profiled"]["pld"]["forward_ms"] > 0
    assert data["cost"]["ms"]["eager"] and f"wrote {out}" in capsys.readouterr().out


def test_a_run_that_cannot_write_its_json_or_fails_leaves_no_stale_file(tiny_folder, tmp_path, capsys):
    """--json into a missing folder is refused up front with one error line (not after the run); a run that fails
    after it started leaves no earlier file at OUT; --n-prompts 0 is refused as before."""
    missing = tmp_path / "nowhere" / "bench.json"
    with pytest.raises(SystemExit) as e:
        run_bench(tiny_folder, tmp_path / "prompts.jsonl", "--json", str(missing))
    err = capsys.readouterr().err.strip().splitlines()
    assert e.value.code != 0 and len(err) == 1 and err[0].startswith("error: --json") and "does not exist" in err[0]

    out = tmp_path / "bench.json"
    out.write_text("{}")
    with pytest.raises(SystemExit) as e:  # the prompt file is missing: the run fails once started
        run_bench(tiny_folder, tmp_path / "no-such-prompts.jsonl", "--json", str(out))
    assert e.value.code != 0 and not out.exists()
    with pytest.raises(SystemExit):
        bench.parse(["--n-prompts", "0"])
    assert bench.parse([]).n_prompts is None  # the benchmarks' first 10, a file's every prompt


@pytest.mark.integration
def test_concurrency_json_has_null_not_nan_when_every_request_stops_after_one_token(tiny_folder, four_prompts,
                                                                                    tmp_path, capsys):
    """One token per request: TPOT is undefined (null, '-' in the table), TTFT is there; the file also says what it
    ran on and how many prompts."""
    out = tmp_path / "conc.json"
    bench.main(["--model", "hf", "--model-path", str(tiny_folder), "--methods", "pld@60", "--prompts",
                str(four_prompts), "--n-prompts", "3", "--max-new-tokens", "1", "--repeats", "1", "--concurrency", "1",
                "2", "--json", str(out)])
    printed = capsys.readouterr().out
    data = strict(out)
    assert data["prompts"] == 3 and f"3 prompts ({four_prompts})" in printed
    assert data["model_fingerprint"] and data["torch"] == torch.__version__ and data["backends"] == [data["backend"]]
    assert {(c["method"], c["concurrency"]) for c in data["cells"]} == {(m, c) for m in ("ar", "pld") for c in (1, 2)}
    for c in data["cells"]:
        assert c["tpot_p50_ms"] is None and c["tpot_p95_ms"] is None
        assert c["ttft_p50_ms"] > 0 and c["ttft_p95_ms"] >= c["ttft_p50_ms"]
    assert "| ar | 1 |" in printed and "- / -" in printed


def test_one_tpot_definition_prefill_excluded_at_every_concurrency(tiny, monkeypatch, tmp_path):
    """TPOT = (last token - first token) / (new tokens - 1), TTFT = first token - start (admission in a batch), for a
    batch's request and a single request alike; null for one token; concurrency 1 and 2 report exactly that."""
    from argparse import Namespace

    from tiny import byte_tokenizer

    from goose.measurement import bench_report, concurrency_sweep
    from goose.running.batch_loop import Served
    from goose.running.loop import Generation
    from goose.running.registry import build_drafters

    served = Served(tokens=[1] * 6, steps=2, wall_s=0.01, admitted_s=0.5, first_token_s=0.7, done_s=1.7)
    assert bench_report.latency_ms(served) == pytest.approx((200.0, 200.0))  # its timeline, not its share of the pass
    single = Generation(tokens=[1] * 6, steps=2, wall_s=1.2, first_token_s=0.2)  # from its call's start
    assert bench_report.latency_ms(single) == pytest.approx((200.0, 200.0))
    ttft, tpot = bench_report.latency_ms(Generation(tokens=[1], steps=1, wall_s=0.3, first_token_s=0.3))
    assert ttft == pytest.approx(300.0) and tpot is None
    assert bench_report.latency_ms(SimpleNamespace(tokens=[1, 2], wall_s=1.0)) == (None, None)  # no first token's time
    assert bench_report.percentile([], 0.5) is None and bench_report.percentile([3.0, 1.0, 2.0], 0.5) == 2.0

    calls = {}  # concurrency: the generations of each batch, in order (the warm-up, then ar, then pld)
    real = concurrency_sweep.decode_batch

    def recording(engine, reqs, *a, **k):
        gens, wall = real(engine, reqs, *a, **k)
        calls.setdefault(engine.rows, []).append(gens)
        return gens, wall

    monkeypatch.setattr(concurrency_sweep, "decode_batch", recording)
    g = torch.Generator().manual_seed(3)
    prompts = [("tiny", torch.randint(0, 250, (12,), generator=g).tolist() * 2) for _ in range(3)]
    args = Namespace(max_new_tokens=8, concurrency=[1, 2], repeats=1, json=str(tmp_path / "c.json"), figure=None,
                     model="tiny")
    out = concurrency_sweep.run(args, tiny, byte_tokenizer(), frozenset(), prompts,
                                build_drafters(["pld@60"], "smollm2-135m"), None, None, torch.device("cpu"),
                                torch.float32, None)
    cells = {(r["method"], r["concurrency"]): r for r in out}
    for c in (1, 2):
        _, ar, pld = calls[c]
        for m, gens in (("ar", ar), ("pld", pld)):
            assert all(len(x.tokens) == 8 for x in gens)
            tpot = [(x.done_s - x.first_token_s) / 7 * 1e3 for x in gens]
            ttft = [(x.first_token_s - x.admitted_s) * 1e3 for x in gens]
            for q in (0.5, 0.95):
                assert cells[(m, c)][f"tpot_p{int(q * 100)}_ms"] == pytest.approx(sorted(tpot)[min(2, int(q * 3))])
                assert cells[(m, c)][f"ttft_p{int(q * 100)}_ms"] == pytest.approx(sorted(ttft)[min(2, int(q * 3))])
    data = strict(tmp_path / "c.json")  # and AR alone on the single-request engine, the same way
    assert 0 < data["ar_alone_single_engine_tpot_p50_ms"] and 0 < data["ar_alone_single_engine_ttft_p50_ms"]


def test_single_request_latency_uses_the_generations_first_token_time(tiny):
    """goose.running.loop.generate's Generation: TTFT its first_token_s, TPOT the rest of its wall time over the tokens
    after the first."""
    from goose.drafting.contract import Drafter
    from goose.engine.single import Engine
    from goose.measurement import bench_report
    from goose.running.loop import generate

    g = generate(Engine(tiny), list(range(40, 60)), Drafter(), 8)
    ttft, tpot = bench_report.latency_ms(g)
    assert ttft == pytest.approx(g.first_token_s * 1e3)
    assert 0 < ttft <= g.wall_s * 1e3 and tpot == pytest.approx((g.wall_s * 1e3 - ttft) / (len(g.tokens) - 1))


def test_the_json_refuses_nan_and_is_written_whole_or_not_at_all(tmp_path):
    from goose.measurement import bench_report

    out = tmp_path / "x.json"
    out.write_text("old")
    with pytest.raises(ValueError):
        bench_report.write(str(out), {"tpot_p50_ms": float("nan")})
    assert out.read_text() == "old" and [p.name for p in tmp_path.iterdir()] == ["x.json"]
    bench_report.write(str(out), {"tpot_p50_ms": None})
    assert strict(out) == {"tpot_p50_ms": None}


# --- a new user's trial: every mistake refused up front, in one line, leaving no earlier file -------------------------
def refused(capsys, argv) -> str:
    """bench.main(argv) refuses with exit status 2 before any work; its stderr's last line."""
    with pytest.raises(SystemExit) as e:
        bench.main(argv)
    assert e.value.code == 2
    return capsys.readouterr().err.strip().splitlines()[-1]


def test_json_and_figure_at_one_path_are_refused(tmp_path, capsys):
    same = str(tmp_path / "same.png")
    err = refused(capsys, ["--concurrency", "2", "--json", same, "--figure", same])
    assert "--json and --figure name one file" in err, err


@pytest.mark.parametrize("bad", [["--repeats", "-1"], ["--n-prompts", "0"], ["--methods", "gooose"], ["--bogus-flag"],
                                 ["--temperature", "-1"], ["--figure", "{fig}"]])
@pytest.mark.parametrize("form", ["apart", "equals"])
def test_a_refused_command_line_leaves_no_earlier_json_or_figure(bad, form, tmp_path, capsys):
    """parse() refuses before bench_report.claim() runs: the earlier run's files at --json and --figure go anyway."""
    out, fig = tmp_path / "out.json", tmp_path / "f.png"
    out.write_text('{"rows": "stale"}')
    fig.write_bytes(b"stale")
    given = ["--json", str(out)] if form == "apart" else [f"--json={out}"]
    refused(capsys, [*given, *[a.format(fig=fig) for a in bad]])
    assert not out.exists()
    if "--figure" in bad:
        assert not fig.exists()


def test_figure_says_only_what_is_missing(tmp_path, capsys):
    out = str(tmp_path / "out.json")
    err = refused(capsys, ["--figure", str(tmp_path / "f.png"), "--json", out])
    assert "give --concurrency too" in err and "--json too" not in err, err
    err = refused(capsys, ["--figure", str(tmp_path / "f.png"), "--concurrency", "2"])
    assert "give --json too" in err and "--concurrency" not in err.split("give")[1], err


def test_a_figure_format_matplotlib_cannot_write_is_refused_before_the_run(tmp_path, capsys):
    out = str(tmp_path / "out.json")
    err = refused(capsys, ["--concurrency", "2", "--json", out, "--figure", str(tmp_path / "fig.xyz")])
    assert "--figure" in err and "matplotlib cannot write .xyz" in err and ".png" in err, err
    for ok in ("fig.svg", "fig.PDF", "fig"):
        assert bench.parse(["--concurrency", "2", "--json", out, "--figure", str(tmp_path / ok)]).figure


def test_a_prompt_longer_than_the_context_is_refused_before_any_work_naming_its_id(tiny_folder, tmp_path, capsys):
    """The tiny model holds 1024 positions: a 2400-token prompt is refused in run.py's words (not an IndexError after
    the first prompt ran), and so is one whose --max-new-tokens would not fit; the --json is not left behind."""
    out = tmp_path / "out.json"
    for text, says in (("x " * 1200, "prompt 'long' has 2400 tokens: not one new token fits in the model's context "
                                     "of 1024"),
                       ("x " * 510, "prompt 'long' has 1020 tokens; with max_new_tokens=6 it exceeds the model's "
                                    "context of 1024. Lower max_new_tokens to 4 or less")):
        p = tmp_path / "long.jsonl"
        p.write_text(json.dumps({"id": "short", "prompt": "def f(x):\n    return x\n"}) + "\n"
                     + json.dumps({"id": "long", "prompt": text}) + "\n")
        out.write_text("{}")
        with pytest.raises(SystemExit) as e:
            run_bench(tiny_folder, p, "--repeats", "1", "--json", str(out))
        err = capsys.readouterr().err.strip().splitlines()
        assert e.value.code == 2 and err[-1].startswith(f"error: {says}"), err
        assert not out.exists()
