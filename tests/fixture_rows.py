"""Result rows written as runs write them (storage.result_files.ResultsFile), for tests of the analysis."""

from __future__ import annotations

from goose.storage.result_files import ResultsFile

TIMED = {"speedup_source": "interleaved", **{f"{p}{k}": v for p in ("", "ar_") for k, v in
         {"host": "h", "threads": 2, "torch": "2.13.0", "backend": "prepacked", "device_name": "cpu",
          "sweep_id": "s"}.items()}}
SOURCES = {"goose": ("spine", "branch"), "pld": ("ngram",), "ar": ()}


def put(root, method, budget="auto", bench="humaneval", prompts=2, model="smollm2-135m", concurrency=1,
        temperature=0.0, chash=None, speedup_reference="interleaved", **extra):
    """One configuration's rows as a run writes them: tau, a speedup against interleaved AR, per-source counts."""
    chash = chash or f"{model}-{bench}-{method}-{budget}-{concurrency}-{temperature}-{speedup_reference}"
    f = ResultsFile(root / model / bench / method / f"B{budget}-c{concurrency}-T{temperature}-{chash[-8:]}" /
                    "results.csv")
    for i in range(prompts):
        steps = 64 if method == "ar" else 30 + 3 * i
        row = {"model": model, "benchmark": bench, "method": method, "budget": budget, "prompt_id": f"{bench}/{i}",
               "new_tokens": 64, "steps": steps, "tau": 64 / steps, "wall_s": steps * 0.05,
               "tokens_per_s": 64 / (steps * 0.05), "lossless": True, "config_hash": chash,
               "concurrency": concurrency, "temperature": temperature, "seed": 0,
               "top_p": 0.95 if temperature else 1.0, "speedup_reference": speedup_reference,
               "memory": {"goose": "prompt"}.get(method, "none"), "memory_default": {"goose": "prompt"}.get(method, ""),
               "drafted": 100, "accepted": 30, "continuation_tokens": 2, "mean_width": 20.0, "max_width": 40,
               "ttft_s": 0.1, "tpot_s": 0.05, "dtype": "float32", "model_fingerprint": "abcdef0123", **TIMED}
        if speedup_reference == "interleaved":
            row.update({"ar_wall_s": 3.2, "speedup": 3.2 / (steps * 0.05)})
        else:
            row["speedup_source"] = "none"
        for k, src in enumerate(SOURCES.get(method, ())):
            row.update({f"{src}_drafted": 50 + 400 * k, f"{src}_accepted": 15 + 3 * k})
        f.append({**row, **extra})


def readme_sweep(root):
    """The README's sweep: pld and goose at budget=auto on two benchmarks, two prompts each."""
    for method in ("pld", "goose"):
        for bench in ("humaneval", "gsm8k"):
            put(root, method, bench=bench)
