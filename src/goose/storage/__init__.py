"""What a run leaves on disk and how it is read back: the row schema, result files and AR references, run folders
keyed by config hash, content fingerprints and code fingerprints (rows of other code are not resumed), durable
appends, equality against AR, metrics, and the migration of older folders."""
