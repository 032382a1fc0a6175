"""GOOSE and its variants, one file each: `goose` (the anisotropic tree, its ablations and single-source controls)
and `goose_suffix` (GOOSE with SuffixDecoding's spine). The peers it is measured against are goose.baselines
(the repository's baselines/). A new method is one file anywhere importable plus one YAML in conf/method/
(docs/adding.md)."""
