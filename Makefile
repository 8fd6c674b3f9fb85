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

demo: setup
	$(BIN)/ratchet models pull $(MODEL)
	$(BIN)/ratchet autoharness --env TicTacToe-v0 --mode verifier --model local:$(MODEL) --protocol $(PROTOCOL)

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

# The peers' environment (GEPA, OpenEvolve, mini-swe-agent), outside the package's dependencies.
BENCH_VENV ?= .venv-bench
bench-env:
	@scripts/setup-bench.sh $(BENCH_VENV)

clean:
	rm -rf $(VENV) .venv-envs build *.egg-info
