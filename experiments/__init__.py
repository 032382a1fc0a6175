"""The experiments: one Hydra sweep per paper artifact and measurement (`<name>-local.yaml` on this machine's CPU,
`<name>-paper.yaml` the paper's protocol), run as `python run.py -m +experiment=<name>-<profile>` or by its
`make reproduce-*` target, and the plans those targets print first (`sweep_plan`, `claims_plan`). Imported as
`goose.experiments`; the YAML files are the Hydra group `experiment` (goose.paths registers them).
experiments/README.md: target -> sweep -> artifact -> time."""
