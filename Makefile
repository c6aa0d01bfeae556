# `make run`: install into .venv and run the default workflow (real MiniLM, offline corpora).
# `make test`: install into .venv and run the test suite (what .ci/run runs).
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
CORES ?= all

.PHONY: install run test report bench clean

$(BIN)/snakemake: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e ".[test]"
	@touch $@

install: $(BIN)/snakemake

run: install
	$(BIN)/snakemake --cores $(CORES)

report: install
	$(BIN)/snakemake --report results/report.html

test: install
	$(BIN)/python -m pytest

bench: install
	$(BIN)/python benchmarks/run.py

clean:
	rm -rf results results-smoke .snakemake
