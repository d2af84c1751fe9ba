# The commands of the README: `make demo`, `make test` (lint and the fast suite) and `make test-all` (everything,
# as CI runs it). Each creates .venv when it is missing.

PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV := .venv
PY := $(VENV)/bin/python
INSTALLED := $(VENV)/.installed

.PHONY: test test-all lint unit crash demo clean

$(INSTALLED): pyproject.toml constraints.txt
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -c constraints.txt -e '.[dev]'
	touch $(INSTALLED)

lint: $(INSTALLED)
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	$(VENV)/bin/lint-imports --no-cache

# Lint, then every test that runs in seconds against the real local servers: under 10 minutes on 2 cores.
test: lint
	$(PY) -m pytest -n 2 --dist loadfile -m "not long"

# Lint and the whole suite, the long end-to-end suites included (random-kill loops, the Celery deployment
# with a worker killed mid-unit, the LocalExecutor backfill): what .ci/run runs.
test-all: export ICEBERG_OPS_DEPLOYMENT_KILL := 1
test-all: lint
	$(PY) -m pytest -n 2 --dist loadfile

# The suite without the tests that start SeaweedFS and moto servers.
unit: $(INSTALLED)
	$(PY) -m pytest -n 2 --dist loadfile -m "not backends and not long"

# The crash tests in full: 40 random SIGKILLs during upgrades committing table by table, each followed
# by a recovering run; 30 during all-or-nothing upgrades, each checked before anything recovers;
# 30 during data moves (and 10 beside a second worker), each resumed and checked row for row;
# 12 during compactions. make test-all runs the same tests with a few kills each.
crash: $(INSTALLED)
	ICEBERG_OPS_CRASH_KILLS=40 $(PY) -m pytest tests/runner/test_crash_recovery.py
	ICEBERG_OPS_ATOMIC_KILLS=30 $(PY) -m pytest tests/runner/test_atomic_crashes.py
	ICEBERG_OPS_MOVE_KILLS=30 $(PY) -m pytest tests/data_migration/test_mover_crash.py
	ICEBERG_OPS_COMPACTION_KILLS=12 $(PY) -m pytest tests/maintenance/test_compaction_crash.py -k random
	ICEBERG_OPS_DEPLOYMENT_KILL=1 $(PY) -m pytest tests/deployment -k worker_killed

# The main job: the example DAG migrates the `demo` namespace, then loads into it, on a real Airflow
# (metadata database in airflow_home/) against the embedded SQLite catalog in local_data/.
demo: export AIRFLOW_HOME := $(CURDIR)/airflow_home
demo: export AIRFLOW__CORE__DAGS_FOLDER := $(CURDIR)/dags_examples
demo: export AIRFLOW__CORE__LOAD_EXAMPLES := False
# Third-party deprecation notices (Airflow's own dependencies) are not the demo's business.
demo: export PYTHONWARNINGS := ignore::DeprecationWarning,ignore:Could not import graphviz:UserWarning,ignore::Warning:fastapi.testclient
demo: export AIRFLOW_CONN_ICEBERG_OPS_DEFAULT := {"conn_type": "iceberg_ops", "extra": {"kind": "sqlite", "db_path": "$(CURDIR)/local_data/iceberg_catalog.db", "warehouse_dir": "$(CURDIR)/local_data/iceberg_warehouse"}}
demo: $(INSTALLED)
	mkdir -p airflow_home local_data
	$(VENV)/bin/airflow db migrate > airflow_home/db-migrate.log 2>&1 || (cat airflow_home/db-migrate.log; exit 1)
	$(VENV)/bin/airflow dags test migrate_then_load
	$(VENV)/bin/airflow dags test backfill_with_mover
	$(VENV)/bin/iceberg-ops --config dags_examples/iceberg-ops.yaml status
	$(VENV)/bin/iceberg-ops --config dags_examples/iceberg-ops.yaml history
	@echo ""
	@echo "Done: the DAG migrate_then_load applied dags_examples/migrations/ to namespace 'demo', then upserted a batch of orders;"
	@echo "      the DAG backfill_with_mover copied two weeks of demo.events into demo.events_v2, one verified move per week."
	@echo "  catalog   local_data/iceberg_catalog.db (SQLite); data files under local_data/iceberg_warehouse/"
	@echo "  Airflow   airflow_home/ (metadata database and task logs)"
	@echo "Try next:"
	@echo "  .venv/bin/iceberg-ops --config dags_examples/iceberg-ops.yaml check          # exit 0: up to date"
	@echo "  .venv/bin/iceberg-ops --config dags_examples/iceberg-ops.yaml plan -1        # what rolling back 0002 would do"
	@echo "  .venv/bin/iceberg-ops --config dags_examples/iceberg-ops.yaml downgrade -1 --yes   # roll it back (drops the channel column)"
	@echo "  make demo                                                                     # again: migrates what is pending, upserts"

clean:
	rm -rf $(VENV) local_data airflow_home .pytest_cache .hypothesis
