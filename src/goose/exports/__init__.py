"""Exports: goose's drafts in the shapes other systems verify. `sglang`: SGLang's model-free (NGRAM) speculative
path (docs/concurrency.md, "SGLang"). Above running: an export command decodes with a method as run.py does."""
