"""A results.csv whose last line was cut mid-line (a writer killed in its append) holds a damaged line like any
other: readers leave it out with a notice naming file:line and write nothing; the run's writer moves it to
results.csv.damaged and decodes its prompt again. It was dropped without a word, and its prompt read as "did not
run"."""

import pytest

from goose.storage.result_files import ResultsFile


def three_rows(path):
    results = ResultsFile(path)
    for i in range(3):
        results.append({"prompt_id": f"p{i}", "config_hash": "h", "tau": 1.5 + i})
    return results


def cut_last(path, keep=7):
    data = path.read_bytes()
    last = data.rstrip(b"\n").rfind(b"\n") + 1
    path.write_bytes(data[: last + keep])  # the last row cut mid-line: no newline at its end
    return data[last : last + keep].decode()


def test_a_cut_last_line_is_a_damaged_line_and_reading_writes_nothing(tmp_path):
    path = tmp_path / "results.csv"
    results = three_rows(path)
    cut_last(path)
    before = path.read_bytes()
    assert [r["prompt_id"] for r in results.rows()] == ["p0", "p1"]
    assert len(results.damaged) == 1
    said = str(results.damaged[0])
    assert said.startswith(f"{path}:4 (") and "cut short" in said, said
    assert path.read_bytes() == before  # a reader never repairs


def test_the_writer_moves_a_cut_last_line_aside_and_appends_stay_aligned(tmp_path):
    path = tmp_path / "results.csv"
    results = three_rows(path)
    text = cut_last(path)
    moved = results.repair()
    assert len(moved) == 1 and moved[0].line == 4 and "cut short" in moved[0].why
    aside = path.with_name("results.csv.damaged").read_text()
    assert aside.startswith(f"# {path}:4 (") and text in aside
    assert path.read_bytes().endswith(b"\n")
    results.append({"prompt_id": "p2", "config_hash": "h", "tau": 3.5})  # decoded again
    again = ResultsFile(path)
    assert [r["prompt_id"] for r in again.rows()] == ["p0", "p1", "p2"] and not again.damaged
    assert results.repair() == []  # nothing left to move


def test_a_file_cut_inside_its_first_row_is_moved_aside_too(tmp_path):
    path = tmp_path / "results.csv"
    path.write_text("prompt_id,config_hash,row_check\np0,h,ab")  # header and first row are one append
    results = ResultsFile(path)
    assert results.rows() == [] and len(results.damaged) == 1 and results.damaged[0].line == 2
    assert len(results.repair()) == 1 and ResultsFile(path).rows() == []


def test_the_analysis_leaves_a_cut_last_line_out_with_a_notice(tmp_path, capsys):
    from goose.analysis.load import read_files

    path = tmp_path / "m" / "b" / "pld" / "run" / "results.csv"
    path.parent.mkdir(parents=True)
    three_rows(path)
    cut_last(path)
    df = read_files(tmp_path)
    assert sorted(df.prompt_id) == ["p0", "p1"]
    assert f"left out a damaged line: {path}:4 (" in capsys.readouterr().out


@pytest.mark.integration
def test_a_run_resumed_after_its_writer_was_killed_mid_row_decodes_that_prompt_again(tiny_folder, tmp_path,
                                                                                   run_goose):
    import json
    from pathlib import Path

    prompts = tmp_path / "p.jsonl"
    prompts.write_text("".join(json.dumps({"id": f"p{i}", "prompt": f"x{i} = {i}\n" * 2}) + "\n" for i in range(3)))
    args = ["model=hf", f"model.path={tiny_folder}", "benchmark=jsonl", f"benchmark.path={prompts}",
            f"results_dir={tmp_path / 'res'}", "max_new_tokens=8", "method=pld", "speedup_reference=none"]
    first, _ = run_goose(*args)
    folder = Path(first["run_dir"])
    cut_last(folder / "results.csv", keep=20)
    second, out = run_goose(*args)
    assert "damaged row moved to results.csv.damaged, its prompt is decoded again" in out
    assert f"{folder / 'results.csv'}:4 (" in out and "2 row(s) already in" in out and "1 prompt(s) to go" in out
    assert second["prompts"] == 3
    assert sorted(r["prompt_id"] for r in ResultsFile(folder / "results.csv").rows()) == ["p0", "p1", "p2"]
