# Local set-up and the everyday commands (.ci/run calls `make test` and `make lint`). torch is
# pinned here only (the CPU wheel on this project's machines): the package itself leaves torch
# unpinned so GPU clusters get CUDA.
PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
# The package's folders: a module added or removed there changes the folder, and the editable
# install (strict: a tree of links that type checkers and IDEs read) is made again.
FOLDERS := $(shell $(PYTHON) -c "import tomllib; t = tomllib.load(open('pyproject.toml', 'rb'))['tool']['setuptools']; \
	print(' '.join(sorted({t['package-dir'].get(p, p.replace('.', '/')) for p in t['packages']})))" 2>/dev/null)
LINKS   = $(firstword $(wildcard build/__editable__.attnsweep-*))

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

# ruff (lint and format) over the repository; mypy over the installed package, where every
# error not in mypy-baseline.txt fails, and so does one fixed but still listed (the baseline
# only shrinks: after fixing, `make mypy-baseline`).
lint: $(VENV)/.installed
	$(BIN)/ruff check .
	cd $(LINKS) && $(CURDIR)/$(BIN)/mypy --config-file $(CURDIR)/pyproject.toml -p attnsweep \
		| $(CURDIR)/$(BIN)/mypy-baseline filter --baseline-path $(CURDIR)/mypy-baseline.txt --no-colors

mypy-baseline: $(VENV)/.installed
	cd $(LINKS) && $(CURDIR)/$(BIN)/mypy --config-file $(CURDIR)/pyproject.toml -p attnsweep \
		| $(CURDIR)/$(BIN)/mypy-baseline sync --baseline-path $(CURDIR)/mypy-baseline.txt --sort-baseline

setup: $(VENV)/.installed

$(VENV)/.created:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet torch==2.13.0
	touch $@

$(VENV)/.installed: $(VENV)/.created pyproject.toml $(FOLDERS)
	$(BIN)/pip install --quiet -e '.[test,dev]' --config-settings editable_mode=strict
	touch $@

clean:
	rm -rf $(VENV) build results-store figures
