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

# ruff (lint and format) over the repository; mypy over the package (read through the strict
# editable install's link tree, each module once, under its import name), where every error
# not in mypy-baseline.txt fails, and so does one fixed but still listed (the baseline only
# shrinks: after a fix, `make mypy-baseline`). The tree's folder name is cut from the paths
# so the baseline reads attnsweep/orchestrator/spec.py whatever the version.
MYPY_PATHS := sed -e 's|^build/__editable__[^/]*/||' -e 's|^$(CURDIR)/build/__editable__[^/]*/||'

lint: $(VENV)/.installed
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy -p attnsweep | $(MYPY_PATHS) | $(BIN)/mypy-baseline filter --no-colors

mypy-baseline: $(VENV)/.installed
	$(BIN)/mypy -p attnsweep | $(MYPY_PATHS) | $(BIN)/mypy-baseline sync --sort-baseline

setup: $(VENV)/.installed

$(VENV)/.created:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet torch==2.13.0
	touch $@

# Strict editable mode: setuptools builds a tree of links under build/ that every tool reads
# as the installed package (one path per module). A module added or removed needs the tree
# rebuilt, so the package folders (whose times change when a file comes or goes) are
# prerequisites; tests/conftest.py names the missing module if a tree is stale.
PACKAGE_DIRS := interface presentation analysis orchestrator stats results workers tasks sweeps

$(VENV)/.installed: $(VENV)/.created pyproject.toml $(PACKAGE_DIRS)
	$(BIN)/pip install --quiet -e '.[test,dev]' --config-settings editable_mode=strict
	touch $@

clean:
	rm -rf $(VENV) build results-store figures
