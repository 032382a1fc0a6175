"""Migration: results folders written under an older row schema, read and verified (`legacy`), re-keyed
(`rekey`), by the goose-migrate command (`migrate`). It sits above running, whose method registry and spec it
drives to compose each old configuration as run.py would today."""
