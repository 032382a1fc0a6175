"""Benchmarks: where their files are found and how prompts are read (`prompts`), the built-in loaders (`builtin`),
and `make data` (`fetch`)."""
