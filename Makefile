# `make run`: install into .venv and run the default workflow (real MiniLM, offline corpora).
# `make test`: install into .venv, lint, and run the test suite (what .ci/run runs) in $(WORKERS) pytest-xdist
# workers, one test file per worker, the long files first, the three longest each on its own worker from the start
# (tests/conftest.py; --no-loadscope-reorder: by default pytest-xdist starts the files with the most tests first,
# the long files last; the Slurm tests mostly wait on the scheduler, so the whole-workflow runs share the 2 cores
# beside them); everything but the
# `rehearsal` tier, the full rehearsal that `make rehearse` runs (its time: at the `rehearse` target);
# `make check`: the fast tier; `make coverage`: the lines of papa/ no test runs (`make test`'s tests, jobs included);
# `make test-cuda`: the tests marked cuda, on a GPU machine with the GPU visible (the
# other tiers hide it; `make rehearse` leaves it visible too); `make lint`: ruff's linter and formatter check;
# `make prune`: remove a config's folder's probe and lambda files of runs it no longer makes.
# `make report` / `make clean` use the folder of a config's `results:` key (CONFIG=config/paper.yaml ...; `make
# clean` without CONFIG: those of CLEAN_CONFIGS, below), and `make clean` drops the Snakemake records of what it
# removes only (python -m papa.records forget): the other configs' results keep theirs.
PYTHON ?= python3
# this Makefile's folder, the checkout (make clean imports papa.records from it, with any python3)
HERE := $(patsubst %/,%,$(dir $(abspath $(lastword $(MAKEFILE_LIST)))))
# a checkout in a path with whitespace: make splits the path (HERE above), and Snakemake writes the venv's python
# unquoted into every job's command (papa.checks.check_interpreter): refused before anything runs
ifneq ($(words $(abspath $(MAKEFILE_LIST))),1)
$(error papa's checkout is in a path with whitespace ($(if $(filter /%,$(firstword $(MAKEFILE_LIST))),,$(CURDIR)/)$(strip \
$(MAKEFILE_LIST))): make splits it, and Snakemake \
cannot run the workflow's jobs from there; clone or move the checkout to a path without spaces)
endif
VENV ?= .venv
BIN := $(VENV)/bin
CORES ?= all
WORKERS ?= 3
CONFIG ?= config/config.yaml
# the configs whose results `make clean` removes: the default run's and the tests' smoke and rehearsal runs
CLEAN_CONFIGS ?= config/config.yaml config/smoke.yaml config/rehearsal.yaml

# a goal this Makefile does not have (`make clean config/paper.yaml`: CONFIG= forgotten) or a setting it does not read
# given on the command line (`make clean CONFG=config/paper.yaml`) stop make: it went on with the default config, and
# make clean removed the default runs' folders
GOALS := install run test lint check coverage rehearse test-cuda report bench clean prune
SETTINGS := CONFIG CORES WORKERS PYTHON VENV CLEAN_CONFIGS SHELL MAKEFLAGS
unknown_goal := $(firstword $(filter-out $(GOALS),$(MAKECMDGOALS)))
ifneq ($(unknown_goal),)
$(error $(unknown_goal) is not a target of papa's Makefile ($(GOALS))$(if $(wildcard $(unknown_goal)),: give a config \
file as CONFIG=$(unknown_goal)))
endif
unknown_setting := $(firstword $(filter-out $(SETTINGS),$(foreach v,$(.VARIABLES),$(if $(filter command \
line,$(origin $(v))),$(v)))))
ifneq ($(unknown_setting),)
$(error $(unknown_setting)= is not a setting of papa's Makefile: it reads $(SETTINGS))
endif
# `make clean CONFIG=config/paper.yaml` (or CONFIG in the environment, as `make run` reads it) cleans that config's
# results only, as `make report CONFIG=...` reports them (several files, merged as `make run` merges them: that
# run's folder)
ifneq ($(filter command line environment environment override,$(origin CONFIG)),)
CLEAN_FOLDERS = $(call results_path,$(CONFIG))
else
CLEAN_FOLDERS = $(foreach c,$(CLEAN_CONFIGS),$(call results_path,$(c)))
endif

# results_path(configs): the folder a run with these configs writes into, quoted for the shell: `python -m
# papa.records results-of` reads each file as Snakemake does (JSON, else YAML, whatever its name; later files update
# earlier ones: the last that sets `results:`, else the schema's default), with the checkout's venv python (else
# $(PYTHON), as in an environment.yml environment: it needs Snakemake). A file that is not there or does not read, or a value that is not one plain path (whitespace, which papa
# refuses and make would split into several folders, or a quote), stops make with what to change: a line-wise read
# took a JSON file's, a flow mapping's or a block's folder for the default's, another run's.
READ_PYTHON := $(firstword $(wildcard $(BIN)/python $(HERE)/$(BIN)/python) $(PYTHON))
results_read = $(shell out=$$(PYTHONPATH='$(HERE)' $(READ_PYTHON) -m papa.records results-of -- $(1) 2>/dev/null) && \
  echo "papa-ok: $$out" || echo "papa-failed: $${out:-python -m papa.records results-of $(1) failed: run it to see why}")
results_path = $(if $(strip $(1)),,$(error CONFIG is empty: name a config file (make clean without CONFIG removes the \
  results of CLEAN_CONFIGS)))$(call results_quoted,$(call results_read,$(1)))
# results_quoted(what results_read printed, read once): the folder quoted, or make stopped with the reason
results_quoted = $(if $(filter papa-ok:,$(firstword $(1))),'$(word 2,$(1))',$(error $(wordlist 2,999,$(1))))

# the targets but clean read the checkout's files by relative paths (pyproject.toml, config/, .venv): from another
# folder (make -f <checkout>/Makefile), make -C instead (clean removes the folders of the configs given, relative to
# where it runs)
ifeq ($(wildcard pyproject.toml),)
ifneq ($(filter-out clean,$(or $(MAKECMDGOALS),install)),)
$(error run make in the checkout ($(HERE)): make -C $(HERE) $(MAKECMDGOALS), or cd there first)
endif
endif

.PHONY: $(GOALS)

# pip compiles the installed modules' bytecode on one core; compileall then writes the same .pyc files on up to 8
# cores (`make install` on 2 cores: 94 s instead of 124 s, measured 2026-11-28; at most 8 processes on a shared
# login node). Like pip, it skips what does not compile (torch's Python 3.12 test file), and a failure of this
# step only leaves Python to compile on first import.
# papa needs Python 3.11 or newer (pyproject.toml); a venv an older python made is made again (`python3.11 -m venv`
# over it kept its python 3.10, and the README's PYTHON=python3.11 failed as before); a venv of 3.11 or newer is
# kept as it is (a CUDA torch installed by hand in it stays)
$(BIN)/snakemake: pyproject.toml
	@command -v $(PYTHON) >/dev/null || { echo "make install: $(PYTHON) is not there: give a Python 3.11 or newer, \
	make install PYTHON=python3.11" >&2; exit 1; }
	@$(PYTHON) -c 'import sys; sys.exit(sys.version_info < (3, 11))' || { echo "make install: $(PYTHON) is \
	Python $$($(PYTHON) -c 'import platform; print(platform.python_version())'), and papa needs 3.11 or newer: \
	give one, make install PYTHON=python3.11" >&2; exit 1; }
	@if [ -x $(BIN)/python ] && ! $(BIN)/python -c 'import sys; sys.exit(sys.version_info < (3, 11))'; then \
	  echo "make install: $(VENV) holds a Python older than 3.11: made again with $(PYTHON)"; \
	  $(PYTHON) -m venv --clear $(VENV); fi
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet --no-compile -e ".[test]"
	$(BIN)/python -c 'import compileall, os, sysconfig; compileall.compile_dir(sysconfig.get_path("purelib"), \
	  quiet=2, workers=min(8, os.cpu_count() or 1))' || true
	@touch $@

install: $(BIN)/snakemake

# the configs read first as `make report` reads them: a YAML error's line and column (Snakemake's message names none)
run: install
	$(if $(strip $(CONFIG)),,$(error CONFIG is empty: name a config file))$(foreach c,$(CONFIG),$(if $(wildcard $(c)),,$(error $(c): no such config file)))
	@out=$$($(BIN)/python -m papa.records results-of -- $(CONFIG)) || { echo "make run: $$out" >&2; exit 1; }
	$(BIN)/snakemake --cores $(CORES) --configfile $(CONFIG)

# the probe and lambda files of a config's folder that it does not make (an earlier config's runs: a dropped seed,
# fraction_dynamic, constants spec, head order, model or task; every start names them): the tables never read them,
# a read of the whole results/probe folder would. A folder not there is left so (Snakemake's prune made it, claimed
# it and logged there: make report then took it for a run's)
prune: install
	$(if $(strip $(CONFIG)),,$(error CONFIG is empty: name a config file))$(foreach c,$(CONFIG),$(if $(wildcard $(c)),,$(error $(c): no such config file)))
	@out=$$($(BIN)/python -m papa.records results-of -- $(CONFIG)) || { echo "make prune: $$out" >&2; exit 1; }; \
	[ -d "$$out" ] || { echo "make prune: $$out is not there: nothing to prune (a prune would claim it for no run)"; \
	exit 0; }; echo "$(BIN)/snakemake prune --cores 1 --configfile $(CONFIG)"; \
	$(BIN)/snakemake prune --cores 1 --configfile $(CONFIG)

# a folder without a finished run's marker (Snakemake would say "Missing metadata" per output, then stop on a
# figure), or results the config would rerun jobs for (Snakemake reports them silently, as they are): make run first.
# The folder is read once (REPORT_DIR).
report: install
	$(eval REPORT_DIR := $(call results_path,$(CONFIG)))
	@d=$(REPORT_DIR); [ -e "$$d/.papa-records.json" ] || { \
	  echo "make report: $$d holds no run's results yet: run the workflow first (make run CONFIG=\"$(CONFIG)\", or on a cluster snakemake --profile slurm --configfile $(CONFIG))" >&2; exit 1; }; \
	out=$$($(BIN)/snakemake -n -q --configfile $(CONFIG) 2>&1) || { echo "make report: snakemake -n --configfile \
	$(CONFIG) failed:" >&2; printf '%s\n' "$$out" | tail -n 20 >&2; exit 1; }; \
	printf '%s\n' "$$out" | grep -q "Nothing to be done" || { echo "make report: the \
	results in $$d are not all those of $(CONFIG) and this papa code as they are now (snakemake -n --configfile \
	$(CONFIG) lists the jobs to run, and why): run the workflow first (make run CONFIG=\"$(CONFIG)\", or on a cluster snakemake --profile slurm --configfile $(CONFIG)), or report them as they are: snakemake --configfile $(CONFIG) --report $$d/report.html" >&2; exit 1; }
	$(BIN)/snakemake --configfile $(CONFIG) --report $(REPORT_DIR)/report.html

test: lint
	$(BIN)/python -m pytest -n $(WORKERS) --dist loadfile --no-loadscope-reorder -m "not rehearsal"

lint: install
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

# the fast tier for contributors: everything but whole-workflow and Slurm runs (`make test` runs all), in two
# pytest-xdist workers (WORKERS=N on the command line or in the environment: N; its README figure is for two), one
# test file per worker
CHECK_WORKERS := $(if $(and $(filter command line environment%,$(origin WORKERS)),$(strip $(WORKERS))),$(WORKERS),2)
check: install
	$(BIN)/python -m pytest -n $(CHECK_WORKERS) --dist loadfile -m "not slow and not slurm" -x

# the lines of papa/ no test runs: what `make test` runs, under coverage.py (installed into the venv here: no
# dependency of papa's), Snakemake's job processes included: pyproject.toml's [tool.coverage] starts it in every
# Python process a test starts (patch = subprocess), measures papa wherever a test's copy of the checkout imports it
# from (source_pkgs) and counts those copies' lines as the checkout's (paths); the report's Missing column names them
coverage: install
	$(BIN)/python -m pip install --quiet "coverage>=7.10.3"
	rm -f .coverage .coverage.*
	$(BIN)/python -m coverage run -m pytest -n $(WORKERS) --dist loadfile --no-loadscope-reorder -m "not rehearsal"
	$(BIN)/python -m coverage combine --quiet
	$(BIN)/python -m coverage report --skip-covered --show-missing

# the full rehearsal of config/paper.yaml's grid (config/rehearsal.yaml, 389 jobs, ~25 min on 2 cores): the pre-flight
# of a run, so on a GPU machine it runs on the GPU, as the run will (the other tiers hide it: tests/conftest.py)
rehearse: install
	PAPA_TEST_CUDA=1 $(BIN)/python -m pytest -m rehearsal

# on a machine with a GPU: the tests marked `cuda` (the other tiers hide CUDA from their tests: tests/conftest.py)
test-cuda: install
	PAPA_TEST_CUDA=1 $(BIN)/python -m pytest -m cuda

bench: install
	$(BIN)/python benchmarks/run.py

# A results folder is removed only where it is papa's: it holds the records' marker, logs/ or benchmarks/ (what
# every run that ran a job leaves), or nothing; never the working directory or a folder above it (papa.checks
# refuses such a results: in the workflow too). `.snakemake/` stays: only the records of the removed folders' files
# go (`python -m papa.records forget`); deleting it would orphan every other config's results (their markers name
# its id: papa.records).
clean:
	@refused=; for d in $(CLEAN_FOLDERS); do \
	  [ -e "$$d" ] || { PYTHONPATH='$(HERE)' $(PYTHON) -m papa.records forget -- "$$d" >/dev/null; continue; }; \
	  [ -d "$$d" ] || { echo "make clean: $$d is no folder: not removed (the config's results: names a file)"; refused=1; continue; }; \
	  case "$$(pwd -P)/" in "$$(cd "$$d" && pwd -P)/"*) echo "make clean: $$d is or holds the working directory: not removed"; refused=1; continue;; esac; \
	  if ! { [ -e "$$d/.papa-records.json" ] || [ -d "$$d/logs" ] || [ -d "$$d/benchmarks" ] || [ -z "$$(ls -A "$$d")" ]; }; then \
	    echo "make clean: $$d holds no papa results (no .papa-records.json, logs/ or benchmarks/): not removed"; refused=1; continue; fi; \
	  PYTHONPATH='$(HERE)' $(PYTHON) -m papa.records removable -- "$$d" || { echo "make clean: $$d: not removed"; refused=1; continue; }; \
	  if [ -L "$$d" ]; then echo "make clean: $$d is a link to $$(readlink -- "$$d"): the link is removed, not the files there (remove them by hand; papa refuses them should the link come back)"; fi; \
	  echo "rm -rf -- $$d"; rm -rf -- "$$d" && PYTHONPATH='$(HERE)' $(PYTHON) -m papa.records forget -- "$$d" || refused=1; \
	done; [ -z "$$refused" ]
