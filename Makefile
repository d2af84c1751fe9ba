# The commands of the README: `make demo`, `make test` (lint and the fast suite) and `make test-all` (everything,
# as CI runs it). Each creates .venv when it is missing.

PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV := .venv
PY := $(VENV)/bin/python
INSTALLED := $(VENV)/.installed

.PHONY: test test-all lint unit crash memory demo airflow clean spark-peer rust-peer chromium test-newest-pyarrow

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
test-all: lint spark-peer rust-peer chromium
	$(PY) -m pytest -n 2 --dist loadfile

# The Spark peer of the interop suite (tests/interop, docs/spark.md): pyspark 3.5 and Iceberg 1.10.2's jars in
# a cache folder outside the checkout (~/.cache/iceberg-ops/spark-peer, or ICEBERG_OPS_SPARK_PEER_DIR), built
# once per set of pins; a rerun only looks. Without Java, or without root to apt-get its Debian packages, it
# says why in one line and the interop tests skip with that reason. Under test-all a failed build (a download
# that failed) does the same instead of stopping the run (--optional); make spark-peer alone fails on it.
test-all: SPARK_PEER_OPTIONS := --optional
spark-peer: $(INSTALLED)
	$(PY) tests/interop/spark_peer.py install $(SPARK_PEER_OPTIONS)

# The iceberg-rust peer (tests/interop/test_rust_interop.py): pyiceberg-core 0.11 and DataFusion 54 in a venv of
# their own under ~/.cache/iceberg-ops/rust-peer (or ICEBERG_OPS_RUST_PEER_DIR), built once; the project's own
# pyiceberg-core 0.10 has no DataFusion release its table provider works with. Optional under test-all, as above.
test-all: RUST_PEER_OPTIONS := --optional
rust-peer: $(INSTALLED)
	$(PY) tests/interop/rust_peer.py install $(RUST_PEER_OPTIONS)

# The browser of the UI suite (tests/airflow/ui, marker browser): Debian's Chromium at /usr/bin/chromium, installed
# with apt where it is missing and make runs as root; elsewhere it says so in one line and the suite skips.
chromium:
	@if [ -x /usr/bin/chromium ]; then :; \
	elif [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then \
	  echo "installing Debian's chromium for the browser suite ..."; \
	  (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends chromium fonts-liberation) >/dev/null \
	    || echo "chromium could not be installed; the browser suite will skip"; \
	else echo "no /usr/bin/chromium and no root to apt-get it: the browser suite (tests/airflow/ui) will skip"; fi

# The Parquet joiner's tests (core/parquet_parts.py, docs/core.md) on the newest PyArrow the registry has, in a
# venv of its own with only the engine's libraries (the checkout on PYTHONPATH, no Airflow): a field a newer
# PyArrow adds to its footers must make the joiner fall back, never write a wrong file. A CI step of its own
# (over 3 minutes from nothing, most of it installing; a minute once the venv exists): .ci/run leaves it out.
NEWEST_PYARROW := .venv-newest-pyarrow
test-newest-pyarrow:
	test -x $(NEWEST_PYARROW)/bin/python || $(PYTHON) -m venv $(NEWEST_PYARROW)
	grep -v '^pyarrow==' constraints.txt > $(NEWEST_PYARROW)/constraints.txt
	$(NEWEST_PYARROW)/bin/python -m pip install --quiet -c $(NEWEST_PYARROW)/constraints.txt \
	  'pyiceberg[sql-sqlite]' pyiceberg-core pyyaml sqlalchemy click rich requests pytest pytest-timeout
	$(NEWEST_PYARROW)/bin/python -m pip install --quiet --upgrade pyarrow
	$(NEWEST_PYARROW)/bin/python -c 'import pyarrow; print("joiner tests on pyarrow", pyarrow.__version__)'
	PYTHONPATH=$(CURDIR) $(NEWEST_PYARROW)/bin/python -m pytest -q \
	  tests/core/test_thrift_compact.py tests/core/test_parquet_parts.py tests/core/test_parallel_output_file.py

# The suite without the tests that start SeaweedFS and moto servers.
unit: $(INSTALLED)
	$(PY) -m pytest -n 2 --dist loadfile -m "not backends and not long"

# The crash tests in full: 40 random SIGKILLs during upgrades committing table by table, each followed
# by a recovering run; 30 during all-or-nothing upgrades, each checked before anything recovers;
# 30 during data moves (and 10 beside a second worker), each resumed and checked row for row;
# 12 during compactions; 20 during data steps, each rerun and checked row for row; 75 inside migrations'
# data steps (15 per operation), each settled by a plain upgrade. make test-all runs the same tests with
# a few kills each.
crash: $(INSTALLED)
	ICEBERG_OPS_CRASH_KILLS=40 $(PY) -m pytest tests/runner/test_crash_recovery.py
	ICEBERG_OPS_ATOMIC_KILLS=30 $(PY) -m pytest tests/runner/test_atomic_crashes.py
	ICEBERG_OPS_MOVE_KILLS=30 $(PY) -m pytest tests/data_migration/test_mover_crash.py
	ICEBERG_OPS_COMPACTION_KILLS=12 $(PY) -m pytest tests/maintenance/test_compaction_crash.py -k random
	ICEBERG_OPS_STEP_KILLS=20 $(PY) -m pytest tests/data_steps/test_data_step_crash.py -k random
	ICEBERG_OPS_DATA_STEP_KILLS=15 $(PY) -m pytest tests/runner/test_data_step_crashes.py
	ICEBERG_OPS_DEPLOYMENT_KILL=1 $(PY) -m pytest tests/deployment -k worker_killed

# The peak-memory bound of a data step alone (docs/data-steps.md, "Memory"); make test-all runs it too.
memory: $(INSTALLED)
	$(PY) -m pytest tests/data_steps/test_data_step_memory.py

# Where the demo and the local Airflow keep Airflow's state and the SQLite catalog (override for a scratch copy).
AIRFLOW_LOCAL_HOME ?= $(CURDIR)/airflow_home
LOCAL_DATA ?= $(CURDIR)/local_data
AIRFLOW_PORT ?= 8080
# Airflow's two log servers (the scheduler's LocalExecutor serving task logs, and the triggerer's) listen on
# 0.0.0.0 on ports of their own, 8793 and 8794 by default whatever the API's port: derived from AIRFLOW_PORT
# (+1000, +2000) so that instances on different ports do not collide; either can be set instead.
AIRFLOW_WORKER_LOG_PORT ?= $(shell expr $(AIRFLOW_PORT) + 1000)
AIRFLOW_TRIGGER_LOG_PORT ?= $(shell expr $(AIRFLOW_PORT) + 2000)
CATALOG_CONNECTION := {"conn_type": "iceberg_ops", "extra": {"kind": "sqlite", "db_path": "$(LOCAL_DATA)/iceberg_catalog.db", "warehouse_dir": "$(LOCAL_DATA)/iceberg_warehouse"}}
DEMO_CLI := $(VENV)/bin/iceberg-ops --config dags_examples/iceberg-ops.yaml --db-path $(LOCAL_DATA)/iceberg_catalog.db --warehouse $(LOCAL_DATA)/iceberg_warehouse

demo airflow: export AIRFLOW_HOME := $(AIRFLOW_LOCAL_HOME)
demo airflow: export AIRFLOW__CORE__DAGS_FOLDER := $(CURDIR)/dags_examples
demo airflow: export AIRFLOW__CORE__LOAD_EXAMPLES := False
demo airflow: export AIRFLOW_CONN_ICEBERG_OPS_DEFAULT := $(CATALOG_CONNECTION)
# Third-party deprecation notices (Airflow's own dependencies) are not the demo's business.
demo airflow: export PYTHONWARNINGS := ignore::DeprecationWarning,ignore:Could not import graphviz:UserWarning,ignore::Warning:fastapi.testclient

# The main job: the example DAG migrates the `demo` namespace, then loads into it, and the backfill DAG
# copies two weeks of events, on a real Airflow (metadata database in airflow_home/) against the
# embedded SQLite catalog in local_data/. Prints each run's outcome; Airflow's full logs go to files.
demo: $(INSTALLED)
	@mkdir -p $(AIRFLOW_LOCAL_HOME) $(LOCAL_DATA)
	@$(VENV)/bin/airflow db migrate > $(AIRFLOW_LOCAL_HOME)/db-migrate.log 2>&1 || (cat $(AIRFLOW_LOCAL_HOME)/db-migrate.log; exit 1)
	@for dag in migrate_then_load backfill_with_mover; do \
	  log=$(AIRFLOW_LOCAL_HOME)/demo-$$dag.log; \
	  echo "running $$dag ..."; \
	  $(VENV)/bin/airflow dags test $$dag > $$log 2>&1; \
	  finished=$$(grep -o "DagRun Finished: dag_id=$$dag,.*" $$log | tail -1); \
	  state=$$(echo "$$finished" | sed -n 's/.*, state=\([a-z_]*\),.*/\1/p'); \
	  seconds=$$(echo "$$finished" | sed -n 's/.*run_duration=\([0-9]*\.[0-9]\).*/\1/p'); \
	  tasks=$$(grep -c "\[DAG TEST\] end task" $$log); \
	  if [ "$$state" != success ]; then \
	    echo "$$dag: $${state:-did not finish}; the end of its log ($$log):"; tail -40 $$log; exit 1; \
	  fi; \
	  echo "$$dag: success, $$tasks task runs in $${seconds}s (full log: $$log)"; \
	done
	@echo ""
	@$(DEMO_CLI) status
	@echo ""
	@$(DEMO_CLI) history
	@echo ""
	@echo "Done: the DAG migrate_then_load applied dags_examples/migrations/ to namespace 'demo', then upserted a batch of orders;"
	@echo "      the DAG backfill_with_mover copied two weeks of demo.events into demo.events_v2, one verified move per week."
	@echo "  catalog   $(LOCAL_DATA)/iceberg_catalog.db (SQLite); data files under $(LOCAL_DATA)/iceberg_warehouse/"
	@echo "  Airflow   $(AIRFLOW_LOCAL_HOME)/ (metadata database, task logs, the demo's logs)"
	@echo "Try next:"
	@echo "  .venv/bin/iceberg-ops --config dags_examples/iceberg-ops.yaml check          # exit 0: up to date"
	@echo "  .venv/bin/iceberg-ops --config dags_examples/iceberg-ops.yaml plan -1        # what rolling back 0002 would do"
	@echo "  .venv/bin/iceberg-ops --config dags_examples/iceberg-ops.yaml downgrade -1 --yes   # roll it back (drops the channel column)"
	@echo "  make airflow                                                                  # the example DAGs in Airflow's UI"
	@echo "  make demo                                                                     # again: migrates what is pending, upserts"

# The example DAGs under a real Airflow on this machine (`airflow standalone`: scheduler, dag-processor,
# triggerer and api-server, on 127.0.0.1), with the SQLite catalog connection of `make demo`. Prints
# the UI's address and login once it answers; Ctrl-C stops every process. Airflow's output goes to
# airflow_home/standalone.log. Standalone runs in a session of its own with Ctrl-C's default action
# restored (a background job would ignore it), and stops its components when the recipe passes Ctrl-C on;
# whatever of its process group still runs 90 seconds later is terminated, then killed. The API listens on
# AIRFLOW_PORT, the log servers on AIRFLOW_WORKER_LOG_PORT and AIRFLOW_TRIGGER_LOG_PORT (refused up front when
# one is taken). New DAGs start unpaused, so a triggered run runs; the @daily examples (table_maintenance,
# policy_maintenance) start paused all the same, since their params must be set first, and so does
# self_optimizing, whose watcher would otherwise start maintaining the demo namespace on its own.
# The Iceberg pages read the example migrations, so they show what is pending.
airflow: export PATH := $(CURDIR)/$(VENV)/bin:$(PATH)
airflow: export AIRFLOW__API__HOST := 127.0.0.1
airflow: export AIRFLOW__API__PORT := $(AIRFLOW_PORT)
airflow: export AIRFLOW__API__BASE_URL := http://127.0.0.1:$(AIRFLOW_PORT)
airflow: export AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_USERS := admin:admin
airflow: export AIRFLOW__CORE__DAGS_ARE_PAUSED_AT_CREATION := False
airflow: export AIRFLOW__ICEBERG_OPS__UI_MIGRATIONS_DIR := $(CURDIR)/dags_examples/migrations
airflow: export AIRFLOW__LOGGING__WORKER_LOG_SERVER_PORT := $(AIRFLOW_WORKER_LOG_PORT)
airflow: export AIRFLOW__LOGGING__TRIGGER_LOG_SERVER_PORT := $(AIRFLOW_TRIGGER_LOG_PORT)
airflow: $(INSTALLED)
	@mkdir -p $(AIRFLOW_LOCAL_HOME) $(LOCAL_DATA)
	@$(PY) -c 'import socket, sys; \
	  taken = [f"{port} ({name})" for port, name in zip(sys.argv[1::2], sys.argv[2::2]) \
	           if socket.socket().connect_ex(("127.0.0.1", int(port))) == 0]; \
	  taken and sys.exit("port " + ", ".join(taken) + " is in use (another make airflow?): pick another AIRFLOW_PORT, or set that variable")' \
	  $(AIRFLOW_PORT) AIRFLOW_PORT $(AIRFLOW_WORKER_LOG_PORT) AIRFLOW_WORKER_LOG_PORT $(AIRFLOW_TRIGGER_LOG_PORT) AIRFLOW_TRIGGER_LOG_PORT
	@log=$(AIRFLOW_LOCAL_HOME)/standalone.log; \
	echo "starting Airflow (output in $$log) ..."; \
	$(PY) -c 'import os, signal, sys; os.setsid(); signal.signal(signal.SIGINT, signal.SIG_DFL); os.execv(*sys.argv[1:2], sys.argv[1:])' \
	  $(VENV)/bin/airflow standalone > $$log 2>&1 & pid=$$!; \
	stop() { kill -INT $$pid 2>/dev/null; \
	  for second in $$(seq 90); do kill -0 $$pid 2>/dev/null || break; sleep 1; done; \
	  kill -TERM -$$pid 2>/dev/null && sleep 5; kill -KILL -$$pid 2>/dev/null; wait $$pid; }; \
	trap 'stop; echo "Airflow stopped."; exit 0' INT TERM; \
	up=; for attempt in $$(seq 300); do \
	  if $(PY) -c 'import sys, urllib.request; urllib.request.urlopen(sys.argv[1], timeout=2)' \
	       http://127.0.0.1:$(AIRFLOW_PORT)/api/v2/monitor/health 2>/dev/null; then up=1; break; fi; \
	  kill -0 $$pid 2>/dev/null || break; \
	  sleep 1; \
	done; \
	if [ -z "$$up" ]; then \
	  echo "Airflow did not come up; the end of $$log:"; tail -40 $$log; stop; exit 1; \
	fi; \
	password=$$($(PY) -c 'import json, sys; print(json.load(open(sys.argv[1]))["admin"])' $(AIRFLOW_LOCAL_HOME)/simple_auth_manager_passwords.json.generated); \
	echo ""; \
	echo "Airflow is up: http://127.0.0.1:$(AIRFLOW_PORT)  (user admin, password $$password)"; \
	echo "  DAGs      dags_examples/ (migrate_then_load, backfill_with_mover, table_maintenance, policy_maintenance, ...)"; \
	echo "  catalog   connection iceberg_ops_default: SQLite in $(LOCAL_DATA)/"; \
	echo "  logs      $$log (log servers on ports $(AIRFLOW_WORKER_LOG_PORT) and $(AIRFLOW_TRIGGER_LOG_PORT))"; \
	echo "Ctrl-C stops it."; \
	wait $$pid

clean:
	rm -rf $(VENV) local_data airflow_home .pytest_cache .hypothesis
