# Local set-up and the everyday commands (.ci/run calls `make test` and `make lint`). torch is
# pinned here only (the CPU wheel on this project's machines): the package itself leaves torch
# unpinned so GPU clusters get CUDA.
PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin

.PHONY: quickstart test test-fast coverage lint setup clean

quickstart: $(VENV)/.installed
	$(BIN)/attnsweep run sweeps/quickstart.yaml

# make test ARGS="tests/results -x": a part of the suite, or any pytest arguments.
test: $(VENV)/.installed
	$(BIN)/python -m pytest $(ARGS)

# The fast tier for the edit-test loop: every test not marked slow (the slow ones run real Ray
# sweeps, the CLI end to end, the job server, wheel builds), under 3 minutes on 2 cores.
test-fast: $(VENV)/.installed
	$(BIN)/python -m pytest -m "not slow" $(ARGS)

# make test under coverage (what .ci/run runs): the CLI subprocesses and Ray's workers are
# measured too (pyproject's [tool.coverage.run]); then a table of line coverage per package,
# failing below a package's floor (.ci/coverage_floors.py). Exits with pytest's status when
# pytest fails (5: no tests collected, a failure too), else with the floors' check.
coverage: $(VENV)/.installed
	rm -f .coverage .coverage.*
	@$(BIN)/python -m coverage run -m pytest $(ARGS); rc=$$?; \
	[ $$rc -ne 5 ] || echo "pytest collected no tests: failing" >&2; \
	$(BIN)/python .ci/coverage_floors.py || { [ $$rc -ne 0 ] || rc=1; }; \
	exit $$rc

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
	rm -rf $(VENV) build results-store figures .coverage .coverage.*
