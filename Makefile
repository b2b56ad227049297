# The two commands: `make run` (the smoke sweep) and `make test` (the test suite).
# Each creates .venv and installs the package (editable, with dev tools) when needed.
PYTHON ?= python3.11
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
OLDEST := .venv-oldest
MLFLOW2 := .venv-mlflow2
EXP ?= smoke
ARGS ?=
PAPERS ?= ../shared/papers

.PHONY: help reproduce run test test-papers test-e2e test-slow test-batch test-faults test-scale test-range test-slurm bench-scale tracking-server test-experiments test-install test-cluster bench-orchestration bench-tuners lint bench report check-pages clean movielens obd

# An editable install: setuptools' import finder maps sweeper_tasks to tasks/ (setup.py); the
# checkout itself is not put on sys.path, so a tasks.py beside the user shadows nothing of ours.
$(STAMP): pyproject.toml setup.py
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e ".[dev]"
	touch $(STAMP)

run: $(STAMP)  ## run an experiment's sweep on embedded Ray into ./mlflow.db (EXP=smoke)
	$(BIN)/python -m sweeper +exp=$(EXP) $(ARGS)

test: $(STAMP)  ## the test suite (slow-marked reproductions excluded), from a hostile shell: MLFLOW_*, RAY_*, SWEEPER_DATA_DIR, PYTHONPATH set, a tasks.py beside it (tests/hermetic.py)
	$(BIN)/python -m ruff check .
	$(BIN)/python -m tests.hermetic $(ARGS)

test-e2e: $(STAMP)  ## whole sweeps of 20 s to a minute each: the docs' walk-throughs, kills mid-sweep, main batched = alone (~13 min; marked e2e, kept out of `make test`)
	$(BIN)/python -m tests.hermetic -m e2e $(ARGS)

test-papers: $(STAMP)  ## the published numbers against the papers' text (PAPERS=dir of the papers' .txt)
	@test -d "$(PAPERS)" || { echo "make test-papers: no papers at PAPERS=$(PAPERS); set PAPERS=<directory of the papers' text files>" >&2; exit 2; }
	SWEEPER_PAPERS_DIR="$(abspath $(PAPERS))" $(BIN)/python -m pytest -q -m papers $(ARGS)

test-slow: $(STAMP)  ## only the slow-marked reproductions
	$(BIN)/python -m pytest -q -m slow $(ARGS)

test-install: $(STAMP)  ## build the wheel, install it (core; orchestrator) in fresh venvs, run it elsewhere
	$(BIN)/python -m pytest -q -m slow tests/test_install.py $(ARGS)

test-cluster: $(STAMP)  ## a real `ray start` head + worker and `ray job submit`; fake autoscaling; the printed MLflow UI link in Chromium; the servers locked to their owner (slow)
	$(BIN)/python -m pytest -q -m slow tests/test_cluster_submit.py tests/test_cluster_autoscale.py tests/test_ui_link.py tests/test_extending_ui.py tests/test_servers_locked.py tests/test_shared_machine.py $(ARGS)

test-batch: $(STAMP)  ## every cell of ablation and candidates batched = alone, to the last digit (slow; main is in `make test-e2e`)
	$(BIN)/python -m pytest -q -m slow tests/test_batch.py $(ARGS)

KILLS ?= 30
test-faults: $(STAMP)  ## kill -9 at KILLS (30) moments, worker kills, double Ctrl-C, two drivers, stalls: exactly once (slow)
	SWEEPER_FAULT_KILLS=$(KILLS) $(BIN)/python -m pytest -q -m slow tests/test_faults_injection.py $(ARGS)

test-scale: $(STAMP)  ## PostgreSQL-backed server: batches, a server and a database restarted mid-sweep (slow)
	$(BIN)/python -m pytest -q -m slow tests/test_scale_faults.py tests/test_bulk.py tests/test_postgres_server.py $(ARGS)

test-range: $(STAMP) $(OLDEST)/.installed $(MLFLOW2)/.installed  ## MLflow and Ray at both ends of their ranges: .venv (upgraded to the newest they allow) and .venv-oldest (their lower bounds) each run the direct writes, the private names, a smoke sweep, its resume and its report; a sweep into an MLflow 2.22 server (slow)
	$(BIN)/python -m tests.version_range newest > $(VENV)/newest.txt
	$(BIN)/python -m pip install --quiet --upgrade -r $(VENV)/newest.txt
	$(BIN)/python -m pytest -q -m slow tests/test_version_range.py tests/test_mlflow2_server.py $(ARGS)

# A tracking server of MLflow's previous major line, in its own venv (tests/test_mlflow2_server.py).
$(MLFLOW2)/.installed:
	test -x $(MLFLOW2)/bin/python || $(PYTHON) -m venv $(MLFLOW2)
	$(MLFLOW2)/bin/python -m pip install --quiet "mlflow==2.22.*" "sqlalchemy<2.1"
	touch $@

# The oldest end: the package with each ranged library at its lower bound (tests/version_range.py).
$(OLDEST)/.installed: pyproject.toml setup.py tests/version_range.py $(STAMP)
	test -x $(OLDEST)/bin/python || $(PYTHON) -m venv $(OLDEST)
	$(OLDEST)/bin/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m tests.version_range oldest > $(OLDEST)/oldest.txt
	$(OLDEST)/bin/python -m pip install --quiet -e ".[dev]" -r $(OLDEST)/oldest.txt
	touch $@

test-slurm: $(STAMP)  ## a real one-host Slurm (as root): the sweeper-slurm recipe sbatch-ed, scancel-ed, resubmitted; exactly once on PostgreSQL (slow)
	$(BIN)/python -m pytest -q -m slow tests/test_slurm.py $(ARGS)

bench-scale: $(STAMP)  ## cells/s per store, driver memory, resume and report times; starts/stops PostgreSQL itself
	$(BIN)/python bench/bench_scale.py $(ARGS)

tracking-server: $(STAMP)  ## PostgreSQL + mlflow server on 127.0.0.1 in DIR (default /tmp/sweeper-tracking); Ctrl-C or kill <pid> stops
	$(BIN)/python -m sweeper.servers --postgres --dir $(or $(DIR),/tmp/sweeper-tracking)

test-experiments: $(STAMP)  ## every experiment of conf/exp/ at reduced size, on Ray (slow)
	$(BIN)/python -m pytest -q -m slow tests/test_experiments.py $(ARGS)

bench-orchestration: $(STAMP)  ## cells/s of 1000 trivial cells, expected experiment times
	$(BIN)/python bench/bench_orchestration.py $(ARGS)

bench-tuners: $(STAMP)  ## tuners at paper scale, next to the papers' (ARGS="--part released")
	$(BIN)/python bench/bench_tuners.py $(ARGS)

bench: $(STAMP)  ## every benchmark of bench/, each writing bench/results/*.md (tens of minutes)
	$(BIN)/python bench/bench_algorithms.py
	$(BIN)/python bench/bench_datasets.py
	$(BIN)/python bench/bench_report.py
	$(BIN)/python bench/bench_orchestration.py
	$(BIN)/python bench/bench_tuners.py
	$(BIN)/python bench/bench_paired_stats.py

lint: $(STAMP)  ## ruff: lint and formatting
	$(BIN)/python -m ruff check .
	$(BIN)/python -m ruff format --check .

reproduce: $(STAMP)  ## full-size sweep of EXP, then its report into docs/results/EXP
	$(BIN)/python -m sweeper +exp=$(EXP) $(ARGS)
	$(BIN)/python -m sweeper.report $(EXP) --out docs/results/$(EXP)

report: $(STAMP)  ## tables and figures of an experiment (EXP=smoke)
	$(BIN)/python -m sweeper.report $(EXP) $(ARGS)

movielens: $(STAMP)  ## MovieLens 100K ratings into .cache/datasets (from PyPI), factorised once
	$(BIN)/python -m sweeper_tasks.bandit_tuning.environments.movielens_data --source recbole

obd: $(STAMP)  ## Open Bandit Dataset sample (obp wheel on PyPI) into .cache/datasets/obd, checksummed
	$(BIN)/python -m sweeper_tasks.opl_hpo.data.obd

check-pages: $(STAMP)  ## render every docs/results page in headless Chromium: no broken image, no console error
	$(BIN)/python -m pytest -q -m slow tests/test_report_page.py tests/test_ui_link.py
	$(BIN)/python -m sweeper.report.pagecheck docs/results/*/index.html

help:  ## every target, with what it does
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | sed -E 's/:[^#]*## /\t/' | expand -t 20

clean:
	rm -rf $(VENV) $(OLDEST) $(MLFLOW2) outputs multirun mlflow.db mlflow.db.lock mlartifacts reports
