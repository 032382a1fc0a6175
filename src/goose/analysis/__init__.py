"""Analysis: result rows into tables, figures and the claims scorecard (`python -m goose.analysis.reproduce`).
It knows no method by name."""
