"""What the task log says: sizes as the command line writes them (``3.5 KiB``, not ``0.0 MiB``), a
move's verification once, and the example DAG's demo task what it created. The operators run for
real on a SQLite catalog. A task log holds the operator's own lines (structlog, captured with
``structlog.testing.capture_logs``) and the engine's (stdlib loggers under ``iceberg_ops_provider``,
captured by a handler of their own: Airflow configures its logging on first use, which would drop
caplog's); the demo task's ``dag.test()`` run prints to the process's output."""

from __future__ import annotations

import re

import pyarrow as pa
import pytest

from iceberg_ops_provider.operators.data_move import IcebergDataMoveOperator, IcebergMoveVerifyOperator
from iceberg_ops_provider.operators.maintenance import IcebergCompactOperator
from tests.airflow.conftest import catalog_at, xcom


def _events(root, appends: int = 6):
    catalog = catalog_at(root)
    catalog.create_namespace_if_not_exists("sales")
    table = catalog.create_table("sales.events", pa.schema([pa.field("id", pa.int64())]))
    for n in range(appends):
        table.append(pa.table({"id": pa.array([n], pa.int64())}))
    return catalog


def test_compaction_logs_kilobytes_as_the_command_line_shows_them(iceberg_connection, task_log):
    _events(iceberg_connection)

    IcebergCompactOperator(task_id="compact", table="sales.events").execute({})

    log = task_log()
    assert "0.0 MiB" not in log and "0.0 -> 0.0" not in log
    committed = r"committed snapshot \d+: 6 -> 1 file\(s\), [\d.]+ KiB -> \d+ B, written at [\d.]+ [KM]iB/s"
    assert re.search(committed, log), log
    assert re.search(r"[\d.]+ KiB to rewrite \(target 512\.0 MiB, binpack\)", log), log
    # The operator's summary line: byte counts as sizes, the other counts as numbers.
    assert re.search(r"compaction of sales\.events: .*rewritten_bytes_count=[\d.]+ KiB, added_bytes_count=\d+ B", log)
    assert "rewritten_data_files_count=6" in log


@pytest.mark.parametrize("through", ["verify operator", "move operator"])
def test_a_verification_is_logged_once(iceberg_connection, task_log, through):
    _events(iceberg_connection)
    move = {"task_id": "move", "source": "sales.events", "target": "sales.copy", "create_target": True}
    if through == "move operator":
        IcebergDataMoveOperator(**move, move_id="m1", verify="count").execute({})
    else:
        IcebergDataMoveOperator(**move, move_id="m1").execute({})
        IcebergMoveVerifyOperator(task_id="verify", source="sales.events", target="sales.copy", move_id="m1").execute(
            {}
        )

    log = task_log()
    verdicts = [line for line in log.splitlines() if re.search(r"(?i)verif\w* \(\w+\) of move m1", line)]
    assert len(verdicts) == 1, verdicts
    assert "verify (" in verdicts[0] and ": ok (6 source rows, 6 target rows)" in verdicts[0]


def test_the_example_demo_task_logs_and_returns_what_it_created(airflow_db, iceberg_connection, capfd):
    from airflow.dag_processing.dagbag import DagBag

    dag = DagBag(dag_folder=str(airflow_db)).get_dag("backfill_with_mover")
    demo = dag.partial_subset(task_ids="demo_source", include_downstream=False, include_upstream=False)

    first = demo.test(run_conf={"source": "shop.events"})

    created = xcom(first, "demo_source")
    snapshot = catalog_at(iceberg_connection).load_table("shop.events").current_snapshot().snapshot_id
    assert created == {"table": "shop.events", "created": True, "rows": 2100, "snapshot_id": snapshot}
    log = capfd.readouterr().out
    assert (
        f"created demo table shop.events: 2,100 rows (100 a day, 2026-11-02 to 2026-11-22), snapshot {snapshot}" in log
    )
    assert "Returned value was: None" not in log

    again = demo.test(run_conf={"source": "shop.events"})

    assert xcom(again, "demo_source") == {**created, "created": False}
    assert f"shop.events exists (2,100 rows, snapshot {snapshot}): left as it is" in capfd.readouterr().out
