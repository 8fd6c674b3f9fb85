# The two commands of the README:
#   make demo   set everything up, fetch the embedded default model, run the main job on it
#   make test   set everything up and run the test suite (what CI runs)
SHELL := /bin/bash
VENV ?= .venv
BIN := $(VENV)/bin
MODEL ?= qwen2.5-coder-0.5b
# The held-out protocol of the demo: `demo` takes minutes; `make demo PROTOCOL=full` is the paper's sizes.
PROTOCOL ?= demo

.PHONY: setup demo test test-fast bench bench-env clean

setup:
	@scripts/setup.sh

# Two labelled rows: first the model writes the harness itself (the rules fitted to explored
# states switched off, so they cannot write it first), then those fitted rules alone, which solve
# TicTacToe without a model call, for comparison. Neither starts from a harness kept by earlier runs.
# Both run on the improvement engine, the command's one search.
DEMO_CALLS ?= 8
AUTOHARNESS := $(BIN)/ratchet autoharness --env TicTacToe-v0 --mode verifier --model local:$(MODEL) --set ideas.library_seed=false

demo: setup
	$(BIN)/ratchet models pull $(MODEL)
	@echo "== 1 of 2: the model's own harness (fitted rules off, at most $(DEMO_CALLS) model calls to write it) =="
	$(AUTOHARNESS) --set ideas.induce=false --max-calls $(DEMO_CALLS) --protocol $(PROTOCOL)
	@echo "== 2 of 2: rules fitted to the explored states (no model call), checked on the same held-out seeds =="
	$(AUTOHARNESS) --protocol none

# The real-model tests need the default model on disk, the tiny SmolLM2 (0.1 GB) for the
# adapter-conversion test and the default judge's sentence encoder (0.08 GB); pulling is a no-op
# once cached.
test: setup
	$(BIN)/ratchet models pull $(MODEL)
	$(BIN)/ratchet models pull smollm2-135m
	$(BIN)/ratchet models pull all-minilm-l6-v2
	$(BIN)/python -m pytest

# Everything except the real-model tests: seconds, not minutes.
test-fast: setup
	$(BIN)/python -m pytest -m "not real_model"

bench: setup
	$(BIN)/python -m bench

# The peers' environments, outside the package's dependencies: $(BENCH_VENV) (GEPA, OpenEvolve,
# mini-swe-agent) and .venv-bench-ace (ace-framework, which needs Python >= 3.12).
# BENCH_ONLY=peers or BENCH_ONLY=ace builds one of them.
BENCH_VENV ?= .venv-bench
bench-env:
	@scripts/setup-bench.sh $(BENCH_VENV) $(if $(BENCH_ONLY),--only $(BENCH_ONLY))

clean:
	rm -rf $(VENV) .venv-envs build *.egg-info
