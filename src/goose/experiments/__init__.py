"""Experiments beyond single runs: the speed benchmark (`bench`), the concurrency sweep, draft bounds, forward
costs, the GPU check and the claims plan."""
