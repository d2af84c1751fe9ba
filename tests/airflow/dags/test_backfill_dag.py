"""The example backfill DAG under a real Airflow: ranges planned, units fanned out, each range verified."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from collections import Counter
from datetime import date, timedelta
from pathlib import Path

import pyarrow as pa
import pytest

from iceberg_ops_provider.catalogs import CatalogFactory
from tests.airflow.conftest import EXAMPLES, catalog_at, xcom

BIN = Path(sys.executable).parent


def _rows(table, row_filter: str = "True") -> Counter:
    """The rows of ``table`` matching ``row_filter``, as a multiset."""
    return Counter(tuple(row.values()) for row in table.scan(row_filter=row_filter).to_arrow().to_pylist())


def _results(dag_run, task_id: str) -> list:
    """What each mapped instance of ``task_id`` returned, by map index."""
    instances = sorted(
        (ti for ti in dag_run.get_task_instances() if ti.task_id == task_id), key=lambda ti: ti.map_index
    )
    return [ti.xcom_pull(task_ids=task_id, map_indexes=ti.map_index) for ti in instances]


RUN = {"source": "shop.events", "target": "shop.events_v2", "start": "2026-11-04", "end": "2026-11-10", "days": 7}


def test_the_backfill_dag_moves_exactly_the_rows_of_its_ranges(run_dag, iceberg_connection):
    dag_run = run_dag("backfill_with_mover", **RUN)

    assert str(dag_run.state) == "success"
    ranges = xcom(dag_run, "date_ranges")  # the weeks (from Monday) holding the 4th to the 10th
    assert ranges == [
        {"where": "day >= '2026-11-02' and day < '2026-11-09'", "move_id": "backfill:day:2026-11-02:2026-11-09"},
        {"where": "day >= '2026-11-09' and day < '2026-11-16'", "move_id": "backfill:day:2026-11-09:2026-11-16"},
    ]
    plans = _results(dag_run, "plan")
    assert [[len(units) for units in batches] for batches in plans] == [[1], [1]]  # 7 small files: one unit a week
    moved = _results(dag_run, "move")
    assert [(r["move_id"], r["units_committed"], r["rows"], r["complete"]) for r in moved] == [
        (ranges[0]["move_id"], 1, 700, True),
        (ranges[1]["move_id"], 1, 700, True),
    ]
    reports = _results(dag_run, "verify")
    assert [(r["ok"], r["method"], r["source_rows"], r["target_rows"]) for r in reports] == [
        (True, "checksum", 700, 700),
        (True, "checksum", 700, 700),
    ]
    catalog = catalog_at(iceberg_connection)
    source, target = catalog.load_table("shop.events"), catalog.load_table("shop.events_v2")
    assert source.scan().count() == 2100  # three weeks of demo data, of which the first two were asked for
    assert _rows(target) == _rows(source, "day >= '2026-11-02' and day <= '2026-11-15'")
    assert {row[1] for row in _rows(target)} == {date(2026, 11, 2) + timedelta(days=n) for n in range(14)}


@pytest.mark.long  # seconds of real subprocesses or catalogs; make test-all runs it
def test_the_backfill_dag_run_again_moves_late_rows_and_new_ranges_once(run_dag, iceberg_connection):
    assert str(run_dag("backfill_with_mover", **RUN).state) == "success"
    catalog = catalog_at(iceberg_connection)
    source = catalog.load_table("shop.events")
    for n, day in enumerate([date(2026, 11, 3), date(2026, 11, 20)]):  # late rows: a week moved before, a new week
        late = {"id": [90000 + n], "day": [day], "kind": ["late"]}
        source.append(pa.table(late, schema=source.schema().as_arrow()))

    again = run_dag("backfill_with_mover", **{**RUN, "end": "2026-11-22"})

    assert str(again.state) == "success"
    moved = _results(again, "move")
    # Week one: only its late row; week two: nothing new (no move task); week three: its 7 days and the late row.
    assert sorted((result["move_id"], result["rows"]) for result in moved) == [
        ("backfill:day:2026-11-02:2026-11-09", 1),
        ("backfill:day:2026-11-16:2026-11-23", 701),
    ]
    assert all(report["ok"] for report in _results(again, "verify"))
    target = catalog.load_table("shop.events_v2")
    assert _rows(target) == _rows(catalog.load_table("shop.events"))  # all three weeks, each row once


EXECUTOR_RUN = """
import json, sys
from airflow.dag_processing.dagbag import DagBag
dag = DagBag(dag_folder=sys.argv[1]).get_dag("backfill_with_mover")
dag_run = dag.test(use_executor=True, run_conf=json.loads(sys.argv[2]))
tasks = [[ti.task_id, ti.map_index, str(ti.state), ti.pid] for ti in dag_run.get_task_instances()]
print("RESULT " + json.dumps({"state": str(dag_run.state), "tasks": tasks}))
"""


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.mark.long
def test_the_backfill_dag_under_the_local_executor_runs_each_task_in_a_worker_process(tmp_path):
    """A real multi-process executor: LocalExecutor (two worker slots) and the API server its workers report to."""
    port = _free_port()
    env = {key: value for key, value in os.environ.items() if not key.startswith("AIRFLOW")}
    connection = {
        "kind": "sqlite",
        "db_path": str(tmp_path / "catalog.db"),
        "warehouse_dir": str(tmp_path / "warehouse"),
    }
    env.update(
        {
            "AIRFLOW_HOME": str(tmp_path / "home"),
            "AIRFLOW__CORE__DAGS_FOLDER": str(EXAMPLES),
            "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
            "AIRFLOW__CORE__EXECUTOR": "LocalExecutor",
            "AIRFLOW__CORE__PARALLELISM": "2",
            "AIRFLOW__CORE__EXECUTION_API_SERVER_URL": f"http://127.0.0.1:{port}/execution/",
            "AIRFLOW__API_AUTH__JWT_SECRET": "backfill-executor-test",
            "AIRFLOW_CONN_ICEBERG_OPS_DEFAULT": json.dumps({"conn_type": "iceberg_ops", "extra": connection}),
        }
    )
    (tmp_path / "home").mkdir()
    migrate = subprocess.run(
        [str(BIN / "airflow"), "db", "migrate"], env=env, capture_output=True, text=True, timeout=300
    )
    assert migrate.returncode == 0, migrate.stderr[-3000:]
    with open(tmp_path / "api-server.log", "w") as api_log:
        api = subprocess.Popen(
            [str(BIN / "airflow"), "api-server", "--port", str(port), "--workers", "1"],
            env=env,
            stdout=api_log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    try:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            with socket.socket() as sock:
                if sock.connect_ex(("127.0.0.1", port)) == 0:
                    break
            time.sleep(0.5)
        conf = {**RUN, "start": "2026-11-02", "end": "2026-11-22", "days": 3}  # 8 ranges: 2026-10-31 to 2026-11-23
        run = subprocess.run(
            [sys.executable, "-c", EXECUTOR_RUN, str(EXAMPLES), json.dumps(conf)],
            env=env,
            capture_output=True,
            text=True,
            timeout=600,
        )
    finally:
        os.killpg(api.pid, signal.SIGTERM)
        api.wait(timeout=60)
    line = next((line for line in run.stdout.splitlines() if line.startswith("RESULT ")), None)
    assert line is not None, run.stderr[-5000:]
    result = json.loads(line.removeprefix("RESULT "))
    assert result["state"] == "success", result
    moves = [task for task in result["tasks"] if task[0] == "move"]
    assert len(moves) == 8 and {task[2] for task in moves} == {"success"}
    assert len({task[3] for task in result["tasks"]}) == len(result["tasks"])  # every task in its own process
    catalog = CatalogFactory.build("sqlite", **{key: Path(value) for key, value in connection.items() if key != "kind"})
    source, target = catalog.load_table("shop.events"), catalog.load_table("shop.events_v2")
    assert _rows(target) == _rows(source)  # three weeks, each row once
    logs = list((tmp_path / "home" / "logs").rglob("task_id=move/map_index=0/attempt=1.log"))
    assert logs and "unit 1/1 of move backfill:day:" in logs[0].read_text()  # the engine's lines are in the task log
