"""The peers GOOSE is measured against, one file each: AR (`ar`), Prompt Lookup Decoding (`pld`), Token Recycling
(`token_recycling`), Lookahead (`lookahead`), REST (`rest`), SuffixDecoding (`suffix_decoding`) and balanced
trees (`balanced_tree`, the paper's Iso(3)/Iso(5)). Imported as `goose.baselines`; each registered by a YAML in
conf/method/ (docs/baselines.md). GOOSE and its variants are in goose.methods."""
