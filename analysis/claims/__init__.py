"""The claims scorecard: which of the paper's claims replicate (`python -m goose.analysis.reproduce claims`,
`make reproduce-claims`). The claims and the card they make from rows (`card`), each interval's verdicts of
direction and size (`verdicts`), the power section (`power`), the card in words (`summaries`), and the card written
out as docs/results/claims.md, claims.csv, claims.png and the README's summary (`page`). It reads rows through the
analysis's shared pieces (load, selection, comparable, bootstrap, loops, paper) and knows nothing about the other
tables and figures, nor about how the rows were run. Imported as `goose.analysis.claims`."""
