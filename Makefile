# Plain verbs. `make test` on a fresh machine builds its own virtualenv, installs everything and runs
# lint, types and the whole suite.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
# Folders that hold Python today (an empty folder is not in git).
PY_DIRS := $(wildcard shared functions tests bench infra)

.PHONY: install dev test lint types unit bench clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[dev]'
	touch $(STAMP)

install: $(STAMP)

lint: $(STAMP)
	$(BIN)/ruff check $(PY_DIRS)
	$(BIN)/ruff format --check $(PY_DIRS)

types: $(STAMP)
	$(BIN)/mypy

test: $(STAMP) lint types
	$(BIN)/pytest -q

unit: $(STAMP)
	$(BIN)/pytest -q tests/unit

dev: $(STAMP)
	$(BIN)/langorch dev

bench: $(STAMP)
	$(BIN)/python bench/engine.py

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache .langorch
