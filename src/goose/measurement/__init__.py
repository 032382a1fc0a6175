"""Measurement tools, not experiments: the speed benchmark against Hugging Face (`bench`), the concurrency sweep,
draft bounds, forward costs, the speed flags and the GPU check. The paper's experiments are goose.experiments
(the repository's experiments/)."""
