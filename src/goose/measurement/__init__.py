"""Measurement tools: the speed benchmark against Hugging Face (`bench`, its timed passes `bench_passes`), the
concurrency sweep, draft bounds, forward costs, the speed flags and the GPU check; load on an OpenAI-compatible
server from GuideLLM (`serving_load`, its report read by `guidellm_report`) and the serving experiment that drives it
over goose-serve (`serving_experiment`, `make reproduce-serving`). The paper's sweeps and plans are goose.experiments
(the repository's experiments/)."""
