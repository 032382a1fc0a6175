"""goose.measurement.gpu_check (issue #48 item 5): one line and exit 2 without CUDA; with `--device cpu` on the tiny
model, one table whose columns and JSON (null, never NaN) are as documented, and a verdict that says diverged and
exits 1 when a method's tokens leave AR's."""

from __future__ import annotations

import json

import pytest
import torch

from goose.measurement import gpu_check
from tests.tiny import save_tiny


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    root = tmp_path_factory.mktemp("gpu_check")
    return save_tiny(root / "tiny"), root / "cache"


def smoke(tiny, tmp_path, monkeypatch, capsys) -> tuple[int, list[str], dict]:
    folder, cache = tiny
    monkeypatch.setenv("GOOSE_CACHE", str(cache))
    out = tmp_path / "gpu-check.json"
    rc = gpu_check.main(["--device", "cpu", "--model", "hf", "--model-path", str(folder), "--benchmarks", "gsm8k",
                         "--n-prompts", "1", "--max-new-tokens", "8", "--methods", "ar", "pld@60", "--json", str(out)])

    def refuse(name):
        raise AssertionError(f"{name} in {out}")

    return rc, capsys.readouterr().out.splitlines(), json.loads(out.read_text(), parse_constant=refuse)


def test_no_cuda_is_one_line(monkeypatch, tmp_path, capsys):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    monkeypatch.chdir(tmp_path)
    assert gpu_check.main([]) == 2
    cap = capsys.readouterr()
    lines = (cap.out + cap.err).splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: no CUDA device: ")
    assert not (tmp_path / "gpu-check.json").exists()


@pytest.mark.integration
def test_cpu_smoke(tiny, tmp_path, monkeypatch, capsys):
    rc, lines, data = smoke(tiny, tmp_path, monkeypatch, capsys)
    assert rc == 0
    head = "| " + " | ".join(gpu_check.COLUMNS) + " |"
    assert lines.count(head) == 1
    rows = [line for line in lines[lines.index(head) + 2:] if line.startswith("| ")]
    assert [r.split(" | ")[:2] for r in rows] == [["| ar", "float32"], ["| pld", "float32"],
                                                   ["| ar", "bfloat16"], ["| pld", "bfloat16"]]
    assert lines[-1] == "VERDICT: every method exact or numerics in float32 and bfloat16"
    assert sum(line.startswith("cost curve ") for line in lines) == 2
    assert set(data) == {"machine", "model", "model_path", "prompts", "max_new_tokens", "columns", "rows",
                         "cost_curves", "verdict", "diverged"}
    assert set(data["machine"]) == {"device", "torch", "cuda", "dtypes", "date"}
    assert data["machine"]["dtypes"] == ["float32", "bfloat16"] and data["prompts"] == 1
    assert data["columns"] == list(gpu_check.COLUMNS) and data["verdict"] == lines[-1] and not data["diverged"]
    for r in data["rows"]:
        assert set(r) == {"method", "dtype", "exact", "numerics", "diverged", "tokens_per_s", "x_ar", "tau"}
        assert r["exact"] + r["numerics"] == 1 and r["diverged"] == 0
    assert [r["x_ar"] for r in data["rows"] if r["method"] == "ar"] == [1.0, 1.0]
    for c in data["cost_curves"].values():
        assert len(c["widths"]) == len(c["ms"]) and c["widths"][0] == 1 and all(m > 0 for m in c["ms"])


@pytest.mark.integration
def test_forced_divergence(tiny, tmp_path, monkeypatch, capsys):
    real = gpu_check.generate

    def flipped(engine, ids, drafter, n, stops):  # pld's third token: one outside its recorded best
        g = real(engine, ids, drafter, n, stops)
        if type(drafter).__name__ != "ARDrafter" and len(g.tokens) > 2:
            g.tokens[2] = next(t for t in range(256) if t != g.tokens[2] and t not in g.runners_up[2])
        return g

    monkeypatch.setattr(gpu_check, "generate", flipped)
    rc, lines, data = smoke(tiny, tmp_path, monkeypatch, capsys)
    assert rc == 1 and data["diverged"]
    assert lines[-1].startswith("VERDICT: pld diverged in float32; pld diverged in bfloat16: report it")
    assert {(r["method"], r["diverged"]) for r in data["rows"]} == {("ar", 0), ("pld", 1)}
