"""Numbers the paper reports (arXiv 2604.02047), shown beside ours. See ../shared/docs/goose-method.md."""

# Figure 1: median acceptance of context-matched (spine) vs adjacency (branch) tokens.
FIGURE1_MEDIANS = (0.21, 0.033)
# Figure 4: GOOSE speedup over AR in 24 of 25 model x benchmark cells (A40-class GPU, fp16).
FIGURE4_RANGE = (1.9, 4.3)
# Table 1: (GOOSE tau, best isotropic tau) where the summary gives them; macro mean gain +25.4%.
TABLE1_TAU = {("llama3-8b", "classeval"): (4.89, 3.67)}
TABLE1_MACRO_GAIN_PCT = 25.4
# Table 2 (Qwen3-8B): tau change of each ablation, percent.
ABLATION_DELTA_PCT = {
    "goose-no-spine-branches": -2.9,
    "goose-no-bigram": -3.7,
    "goose-no-bypass": -5.1,
    "goose-no-context-spine": -3.4,
    "goose-no-continuation": -4.4,
    "goose-no-prefill-harvest": None,
}
# Synergy: the spine tree's tau over the best single-source method, percent (paper's aggregate claim).
SYNERGY_GAIN_PCT = (16, 45)
# Source gap: context-matched tokens are accepted this many times as often as adjacency guesses.
SOURCE_GAP_RATIO = (2, 18)

# Spec-Bench leaderboard, Vicuna-7B v1.3, A100, greedy, batch 1: (speedup over AR, mean accepted tokens),
# mean accepted tokens = generated tokens / decoding forwards, prefill excluded.
SPEC_BENCH_VICUNA7B = {
    "pld": (1.66, 1.75),
    "tr": (2.22, 2.73),
    "rest": (1.48, 1.82),
    "lookahead": (1.34, 1.64),
}
