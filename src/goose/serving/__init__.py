"""Serving: an OpenAI-compatible HTTP server over the batch engine (goose-serve), for any model and method the
harness runs. One engine thread owns the batch (goose.running.batch_loop.Batch); HTTP handlers hand requests over
and get tokens back through queues. Knows nothing about rows, run folders or benchmarks. docs/serving.md."""
