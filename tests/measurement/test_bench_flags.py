"""bench's command line (goose.measurement.speed_flags): a combination that would silently drop a flag is refused
before any model loads."""

import pytest

from goose.measurement import bench


def test_benchmarks_beside_a_prompts_file_is_refused_in_one_line(tmp_path, capsys):
    """--benchmarks humaneval --prompts F ran F's prompts and ignored --benchmarks without a word."""
    f = tmp_path / "p.jsonl"
    f.write_text('{"id": "a", "prompt": "x = 1"}\n')
    with pytest.raises(SystemExit) as e:
        bench.parse(["--benchmarks", "humaneval", "--prompts", str(f)])
    error = [line for line in capsys.readouterr().err.splitlines() if "error:" in line]
    assert e.value.code == 2 and len(error) == 1, error
    assert "--benchmarks" in error[0] and "--prompts" in error[0] and "one or the other" in error[0], error
    args = bench.parse(["--prompts", str(f)])  # a file alone, and the benchmarks alone, as before
    assert args.prompts == str(f)
    assert bench.parse([]).benchmarks == ["humaneval", "gsm8k", "mt_bench"]
    assert bench.parse(["--benchmarks", "gsm8k"]).benchmarks == ["gsm8k"]
