"""A real Airflow for the tests: SQLite metadata database, DAG files in a temporary dags folder.

Airflow reads its configuration when first imported, so the environment is set here, at import,
before any test module imports ``airflow``.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.support.lake import Lake

AIRFLOW_ROOT = Path(tempfile.mkdtemp(prefix="iceberg_ops_airflow_"))
DAGS = AIRFLOW_ROOT / "dags"
EXAMPLES = Path(__file__).parent.parent.parent / "dags_examples"
os.environ.update(
    {
        "AIRFLOW_HOME": str(AIRFLOW_ROOT / "home"),
        "AIRFLOW__CORE__DAGS_FOLDER": str(DAGS),
        "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
        "AIRFLOW__CORE__UNIT_TEST_MODE": "True",
        # No OpenLineage listener in this suite (it forks per task event); test_lineage_e2e.py turns it on.
        "AIRFLOW__OPENLINEAGE__DISABLED": "true",
    }
)


@pytest.fixture(scope="session")
def airflow_db() -> Path:
    """A migrated metadata database and a dags folder holding the example DAG and the test DAGs."""
    shutil.copytree(EXAMPLES, DAGS)
    for test_dags in Path(__file__).parent.glob("dags_*.py"):
        shutil.copy(test_dags, DAGS / test_dags.name)
    (AIRFLOW_ROOT / "home").mkdir(exist_ok=True)
    migrate = subprocess.run(
        [str(Path(sys.executable).parent / "airflow"), "db", "migrate"], capture_output=True, text=True, timeout=300
    )
    assert migrate.returncode == 0, migrate.stderr[-3000:]
    return DAGS


@pytest.fixture
def task_log() -> Iterator[Callable[[], str]]:
    """The lines the task log gets while the test runs (the operator's and the engine's), as one text.

    The operator's own lines are structlog's; the engine's come from stdlib loggers under ``iceberg_ops_provider``,
    caught by a handler of their own (Airflow configures its logging on first use, which would drop caplog's).
    """
    import structlog.testing

    lines: list[str] = []

    class Collect(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            lines.append(record.getMessage())

    engine = logging.getLogger("iceberg_ops_provider")
    handler, level = Collect(logging.INFO), engine.level
    engine.addHandler(handler)
    engine.setLevel(logging.INFO)
    try:
        with structlog.testing.capture_logs() as events:
            yield lambda: "\n".join([*lines, *(str(event["event"]) for event in events)])
    finally:
        engine.removeHandler(handler)
        engine.setLevel(level)


@pytest.fixture
def iceberg_connection(tmp_path: Path, monkeypatch) -> Path:
    """Point ``iceberg_ops_default`` at the test's lake; returns the lake's folder."""
    lake = Lake(tmp_path)
    connection = {
        "conn_type": "iceberg_ops",
        "extra": {"kind": "sqlite", "db_path": str(lake.db_path), "warehouse_dir": str(lake.warehouse)},
    }
    monkeypatch.setenv("AIRFLOW_CONN_ICEBERG_OPS_DEFAULT", json.dumps(connection))
    monkeypatch.setenv("ICEBERG_OPS_TEST_ROOT", str(lake.root))
    return lake.root


@pytest.fixture
def run_dag(airflow_db) -> Iterator[Callable[..., object]]:
    """Run a DAG of the dags folder with ``dag.test()`` and return its DagRun."""
    from airflow.dag_processing.dagbag import DagBag

    bag = DagBag(dag_folder=str(airflow_db))
    assert not bag.import_errors, bag.import_errors

    def run(dag_id: str, **conf: object) -> object:
        return bag.get_dag(dag_id).test(run_conf=conf or None)

    yield run


def xcom(dag_run: object, task_id: str) -> object:
    """The return value a task pushed."""
    ti = dag_run.get_task_instance(task_id)  # type: ignore[attr-defined]
    return ti.xcom_pull(task_ids=task_id)


def catalog_at(root: Path):
    """The SQLite catalog a test connection points at."""

    return Lake(root).catalog()
