"""Numbers the paper reports (arXiv 2604.02047), shown beside ours (docs/method.md describes the method)."""

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
BYPASS_ABLATION = "goose-no-bypass"  # the one that raises tau on the stand-ins (docs/results/bypass.md)
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

# --- what the paper's artifacts compare (the analysis code itself names no method) ---------------------------
GOOSE = "goose"
PAPER_BUDGET = "60"  # the paper's B: what an artifact that reads one budget reads where the rows have several
TABLE1 = (GOOSE, ("iso3", "iso5"))  # GOOSE against the balanced trees at equal budget
ABLATIONS = {  # Table 2: each switch and what it turns off
    "goose-no-spine-branches": "no spine branches (rho = 0)",
    "goose-no-bigram": "no bigram tier",
    "goose-no-bypass": "no consensus bypass",
    "goose-no-context-spine": "no context-match spine",
    "goose-no-continuation": "no spine continuation",
    "goose-no-prefill-harvest": "no prefill harvest",
}
METHOD_ORDER = ["ar", "pld", "tr", "lookahead", "rest", "iso3", "iso5", "suffix-chain", "suffix", GOOSE,
                "goose-suffix", *ABLATIONS]  # tables and legends; others last
SUFFIX_METHODS = ["pld", "tr", "suffix-chain", "suffix", GOOSE, "goose-suffix"]
BUDGET_SWEEP = [GOOSE, "tr", "iso3", "iso5"]  # the budget sweep's lines (a method no budget changes: a level)
FIGURE1_SOURCES = ("spine", "branch")  # GOOSE's context-matched and adjacency sources
SINGLE_SOURCES = ("spine-only", "branches-only")  # GOOSE's two sources, each given GOOSE's whole budget
PUBLISHED = ("pld", "tr")  # the single-source methods as published, each at its own draft size
OWN_SWITCHES = ("method.drafter._target_", "method.drafter.context_spine")  # what makes the single sources theirs
GAP_PAIRS = {  # (label, (method, source), (method, source)): context-matched first, adjacency second
    "standalone PLD vs TR (as published)": (("pld", ""), ("tr", "")),
    "standalone spine-only vs branches-only (equal budget)": (("spine-only", "spine"), ("branches-only", "branch")),
    "GOOSE's own spine vs branch nodes": ((GOOSE, "spine"), (GOOSE, "branch")),
}

# --- the claims scorecard (analysis.claims.card): what each claim compares and the paper's number ------------
PAPER_BENCHMARKS = ("humaneval", "mbpp", "classeval", "gsm8k", "mt_bench")  # the paper's five (its protocol)
CLAIMS_BUDGET = "60"  # the paper's B: every tau claim compares configurations at this budget
PEERS = ("pld", "tr", "lookahead", "rest")  # claim 5: GOOSE ahead of each in every cell
# Beyond the paper: the training-free drafters serving engines ship (#70), shown beside claim 5, never counted for it.
PRODUCTION_PEERS = ("sglang-ngram", "vllm-ngram", "llamacpp-ngram-mod", "llamacpp-ngram-simple")
# the same drafters at GOOSE's budget (SGLang's tree of B nodes, vLLM's chain of B - 1): llama.cpp's chains draft
# 48 (ngram-simple) and up to 64 tokens (ngram-mod) at their defaults, about the paper's B = 60 already
PRODUCTION_EQUAL_BUDGET = ("sglang-ngram-budget", "vllm-ngram-budget")
PRODUCTION_BESIDE = ("pld", "goose-suffix")  # shown beside them: the research PLD, GOOSE over SuffixDecoding
ISOTROPIC = TABLE1[1]
GAP_PAIR = ("pld", "tr")  # claim 1: context-matched (PLD) vs adjacency (TR) acceptance per drafted token
SOURCE_GAP_MEDIAN = 6  # the paper's median ratio (range SOURCE_GAP_RATIO)
ISO_GAIN_PCT = (12, 33)  # claim 3: GOOSE's tau over a balanced tree at equal budget
ABLATION_RANGE_PCT = (-5.1, -2.9)  # claim 7: what each switch costs GOOSE's tau (Table 2, Qwen3-8B)
