"""Analysis: result rows into tables, figures and the claims scorecard (`python -m goose.analysis.reproduce`), and
the plotting notebook (figures.ipynb). Imported as `goose.analysis`. It knows no method by name."""
