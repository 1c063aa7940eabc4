# ARI Bench toolkit. Two commands set everything up: `make demo` and `make test`.
SHELL := /bin/bash
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
# State of demo runs (prepared data, built exams, results) stays out of git.
DEMO_DIR ?= .ari/demo
# A warnings filter (python -W syntax) for the install: only setuptools' editable-install note.
QUIET_EDITABLE := ignore:Editable installation:UserWarning

.PHONY: help venv demo test test-quick check lint format site clean bench opencode

help:  ## list the targets
	@grep -E '^[a-z-]+:.*## ' Makefile | sed 's/:.*## /\t/'

$(STAMP): pyproject.toml
	@test -x $(BIN)/python || $(PY) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	# torch is pinned (2.13.0); installing its CUDA build: site/docs/operators/gpu.md.
	# setuptools' boxed "Editable installation" note is for packagers, not newcomers: hidden.
	PYTHONWARNINGS="$(QUIET_EDITABLE)" $(BIN)/python -m pip install --quiet -e '.[dev,ray]'
	@touch $(STAMP)

venv: $(STAMP)  ## create .venv and install the project

demo: $(STAMP)  ## the main job end to end on the embedded defaults (no GPU, no Docker)
	DEMO_DIR=$(DEMO_DIR) BIN=$(BIN) bash scripts/demo.sh

# Workers of the suite (pytest-xdist; tests that share a host resource run on one worker), and
# more pytest arguments (e.g. PYTEST_ARGS=--junitxml=suite.xml for scripts/suite-durations.py).
TEST_WORKERS ?= 3
PYTEST_ARGS ?=

test: $(STAMP)  ## the whole test suite
	bash scripts/test-setup.sh
	$(BIN)/python -m pytest -q -n $(TEST_WORKERS) --dist loadgroup $(PYTEST_ARGS)

# The inner loop's lane: every test not marked slow; the marker comes from measured seconds
# (tests/slow.json, written by scripts/suite-slow.py). CI and `make test` run everything.
test-quick: $(STAMP)  ## the tests measured quick (-m "not slow"), a few minutes
	bash scripts/test-setup.sh
	$(BIN)/python -m pytest -q -n $(TEST_WORKERS) --dist loadgroup -m "not slow" $(PYTEST_ARGS)

opencode: $(STAMP)  ## install the pinned opencode scaffold into .tools/opencode (npm), and ripgrep
	BIN=$(BIN) bash scripts/install-opencode.sh

check: $(STAMP)  ## ruff (lint + format check), mypy (strict on the library), the classes' shape
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy
	$(BIN)/python scripts/check-structure.py toolkit

format: $(STAMP)  ## apply ruff's formatting and safe fixes
	$(BIN)/ruff check --fix .
	$(BIN)/ruff format .

site: $(STAMP)  ## build the leaderboard site from results/ into public/
	$(BIN)/mkdocs build --strict

bench: $(STAMP)  ## run every benchmark (prints numbers)
	@for b in benchmarks/bench_*.py; do echo "== $$b"; $(BIN)/python $$b || exit 1; done

clean:  ## remove the environment, caches and demo state
	rm -rf $(VENV) .ari public .mypy_cache .ruff_cache .pytest_cache
