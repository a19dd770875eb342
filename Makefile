# Local set-up and the everyday commands (.ci/run calls `make test` and `make lint`). torch is
# pinned here only (the CPU wheel on this project's machines): the package itself leaves torch
# unpinned so GPU clusters get CUDA.
PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin

.PHONY: quickstart test test-fast lint setup clean

quickstart: $(VENV)/.installed
	$(BIN)/attnsweep run sweeps/quickstart.yaml

# make test ARGS="tests/results -x": a part of the suite, or any pytest arguments.
test: $(VENV)/.installed
	$(BIN)/python -m pytest $(ARGS)

# The unit tier for the edit-test loop: everything but the tests marked slow (real Ray sweeps,
# the CLI end to end, the job server), a few minutes.
test-fast: $(VENV)/.installed
	$(BIN)/python -m pytest -m "not slow" $(ARGS)

# ruff (lint and format) over the repository; mypy over the package (attnsweep/ links each
# folder into the namespace, so the checker reads the source as it installs), where every error
# not in mypy-baseline.txt fails, and so does one fixed but still listed (the baseline only
# shrinks: after a fix, `make mypy-baseline`).
lint: $(VENV)/.installed
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy -p attnsweep | $(BIN)/mypy-baseline filter --no-colors

mypy-baseline: $(VENV)/.installed
	$(BIN)/mypy -p attnsweep | $(BIN)/mypy-baseline sync --sort-baseline

setup: $(VENV)/.installed

$(VENV)/.created:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet torch==2.13.0
	touch $@

$(VENV)/.installed: $(VENV)/.created pyproject.toml
	$(BIN)/pip install --quiet -e '.[test,dev]'
	touch $@

clean:
	rm -rf $(VENV) build results-store figures
