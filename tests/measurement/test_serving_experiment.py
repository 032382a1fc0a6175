"""The serving experiment's driver (goose.measurement.serving_experiment, `make reproduce-serving`): its results page
from a finished run's folder, on the hand-written GuideLLM-shaped report of tests/guidellm_shaped.py."""

import pytest
from guidellm_shaped import write_report

from goose.measurement import serving_experiment
from goose.measurement.guidellm_report import read_report, write_rows


def test_the_results_page_names_its_rows_by_content_and_what_they_ran_on(tmp_path, capsys):
    """`--page`: serving.md, the figure and serving.csv (the rows, copied beside the page) from a finished run's
    folder; the page names the rows by their sha256 and says what they ran on."""
    import hashlib
    import json

    results, out = tmp_path / "results", tmp_path / "out"
    results.mkdir()
    write_rows(read_report(write_report(tmp_path), "ar"), results / "rows.csv")
    (results / "lossless.json").write_text(json.dumps({"ar": {"exact": 4, "checked": 4, "under_load_same": 8,
                                                              "under_load": 8}}))
    with pytest.raises(SystemExit, match="holds no finished run"):
        serving_experiment.main(["--results", str(results), "--out", str(out), "--page"])
    (results / "measured_on.json").write_text(json.dumps({
        "date": "2026-12-06", "model": "m (fingerprint 0123456789ab)", "device": "a cpu", "cores": 2,
        "machine": "x86_64", "torch": "2.13.0+cpu", "commit": "abc1234"}))
    serving_experiment.main(["--results", str(results), "--out", str(out), "--page"])
    page = (out / "serving.md").read_text()
    digest = hashlib.sha256((out / "serving.csv").read_bytes()).hexdigest()[:12]
    assert f"sha256 {digest}" in page and "code abc1234" in page and "m (fingerprint 0123456789ab), a cpu" in page
    assert (out / "serving.csv").read_bytes() == (results / "rows.csv").read_bytes()
    assert (out / "serving.png").stat().st_size > 0 and "- ar: 4/4 answers' token ids equal" in page
