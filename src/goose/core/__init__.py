"""The ground floor: the run's vocabulary, which every room may import and which imports no room above it (only
goose.errors and goose.paths): the typed config sections (`sections`), content fingerprints (`fingerprints`),
what a model is (`identity`), and what a one-off measurement says before it starts (`waits`). docs/map.md."""
