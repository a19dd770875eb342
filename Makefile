# Local set-up and the two everyday commands (.ci/run calls `make test`). torch is pinned
# here only (the CPU wheel on this project's machines): the package itself leaves torch
# unpinned so GPU clusters get CUDA.
PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin

.PHONY: quickstart test setup clean

quickstart: $(VENV)/.installed
	$(BIN)/attnsweep run sweeps/quickstart.yaml

# make test ARGS="tests/results -x": a part of the suite, or any pytest arguments.
test: $(VENV)/.installed
	$(BIN)/python -m pytest $(ARGS)

setup: $(VENV)/.installed

$(VENV)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet torch==2.13.0
	$(BIN)/pip install --quiet -e '.[test]'
	touch $@

clean:
	rm -rf $(VENV) results-store figures
