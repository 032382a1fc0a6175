"""The ground floor: the run's vocabulary, which every room may import and which imports no room above it (only
goose.errors and goose.paths): the typed config sections (`sections`), content fingerprints (`fingerprints`) and
what a model is (`identity`). docs/map.md."""
