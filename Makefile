# The two commands of the README: `make demo` (the main job) and `make test` (the test suite).
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin

.PHONY: install demo test lint clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	# torch first, pinned, so the CPU wheel satisfies the range and no multi-GB CUDA build is pulled
	$(BIN)/pip install -q torch==2.13.0
	$(BIN)/pip install -q -e ".[dev,ct2,ecosystem]"

install: $(BIN)/python

demo: install
	$(BIN)/python -m training.train --config demo

test: install
	$(BIN)/ruff check .
	$(BIN)/python -m pytest

lint: install
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

clean:
	rm -rf $(VENV) *.egg-info .pytest_cache .ruff_cache
