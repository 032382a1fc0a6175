"""n_prompts larger than the benchmark: the run decodes what the benchmark has and says so in one line (a sweep over
benchmarks of different sizes is legitimate, so it is not refused)."""

import json

from conftest import spec_of

from goose.running.inputs import benchmark_prompts


def test_n_prompts_beyond_the_benchmark_runs_what_it_has_and_says_so(tmp_path, capsys):
    """n_prompts=10 on a 3-line JSONL ran 3 without a word."""
    f = tmp_path / "three.jsonl"
    f.write_text("".join(json.dumps({"id": f"q{i}", "prompt": f"x = {i}"}) + "\n" for i in range(3)))
    every, chosen = benchmark_prompts(spec_of("benchmark=jsonl", f"benchmark.path={f}", "n_prompts=10"))
    assert len(every) == len(chosen) == 3
    lines = capsys.readouterr().out.splitlines()
    assert lines == [f"[goose] n_prompts=10 asked, but benchmark jsonl ({f}) has 3 prompt(s): running 3"], lines
    for n in ("3", "2", "null"):  # as many as it has, fewer, or all: nothing to say
        benchmark_prompts(spec_of("benchmark=jsonl", f"benchmark.path={f}", f"n_prompts={n}"))
        assert capsys.readouterr().out == ""
    benchmark_prompts(spec_of("benchmark=jsonl", f"benchmark.path={f}", "n_prompts=10"), say=False)
    assert capsys.readouterr().out == ""
