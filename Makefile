# `make run`: install into .venv and run the default workflow (real MiniLM, offline corpora).
# `make test`: install into .venv and run the test suite (what .ci/run runs); `make check`: its fast tier.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
CORES ?= all

.PHONY: install run test check report bench clean

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

# the fast tier for contributors: everything but whole-workflow and Slurm runs (`make test` runs all)
check: install
	$(BIN)/python -m pytest -m "not slow and not slurm" -x

bench: install
	$(BIN)/python benchmarks/run.py

clean:
	rm -rf results results-smoke results-rehearsal .snakemake
