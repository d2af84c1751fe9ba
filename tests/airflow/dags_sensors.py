"""DAGs the sensor tests run with dag.test(): each sensor deferred, rescheduled and poking, as data arrives or not.

Every DAG has an ``arrive`` task that, when ``params.arrive_after`` is zero or more, starts a thread
that commits what the sensors wait for (``params.arrive``: ``migration`` upgrades the namespace,
``partition`` appends rows for ``params.day``) once the sensor awaiting it has started
``params.arrive_after_starts`` tries (its start notes are the handshake), plus ``arrive_after``
seconds, so the data lands while that sensor waits. Callbacks write each sensor's try starts and
failures (with the exception's message) to files under ``$ICEBERG_OPS_TEST_ROOT`` for the tests to read.
"""

from __future__ import annotations

import json
import os
import threading
import time
from datetime import UTC, datetime
from pathlib import Path

from airflow.sdk import dag, task

from iceberg_ops_provider.sensors import IcebergMigrationSensor, IcebergPartitionSensor

DEFAULTS = {"start_date": datetime(2026, 1, 1, tzinfo=UTC), "schedule": None, "catchup": False}
PARAMS = {
    "namespace": "sales",
    "migrations_dir": "",
    "table": "shop.events",
    "day": "2026-01-02",
    "arrive": "none",
    "arrive_after": -1,
    "arrive_after_starts": 1,
}


def _note(name: str, record: dict) -> None:
    with open(Path(os.environ["ICEBERG_OPS_TEST_ROOT"]) / name, "a") as notes:
        notes.write(json.dumps(record) + "\n")


def started(context) -> None:
    _note("starts.jsonl", {"task_id": context["ti"].task_id, "at": time.time()})


def failed(context) -> None:
    error = context.get("exception")
    _note("failures.jsonl", {"task_id": context["ti"].task_id, "type": type(error).__name__, "message": str(error)})


def _starts(task_id: str) -> int:
    path = Path(os.environ["ICEBERG_OPS_TEST_ROOT"]) / "starts.jsonl"
    lines = path.read_text().splitlines() if path.exists() else []
    return sum(json.loads(line)["task_id"] == task_id for line in lines)


def _arrive_later(
    what: str, delay: float, starts: int, namespace: str, migrations_dir: str, table: str, day: str
) -> None:
    import pyarrow as pa

    from iceberg_ops_provider.hooks.catalog import IcebergCatalogHook
    from iceberg_ops_provider.runner import MigrationRunner

    catalog = IcebergCatalogHook().get_conn()  # in the task: the thread only commits

    def commit() -> None:
        awaiting = "wait_migration" if what == "migration" else "wait_partition"
        deadline = time.monotonic() + 60
        while _starts(awaiting) < starts:  # the handshake: the sensor is waiting
            if time.monotonic() > deadline:
                return
            time.sleep(0.05)
        time.sleep(delay)
        if what == "migration":
            MigrationRunner(catalog, namespace, migrations_dir).upgrade()
        else:
            moment = datetime.fromisoformat(day).replace(hour=12, tzinfo=UTC)
            schema = pa.schema([("id", pa.int64()), ("ts", pa.timestamp("us", tz="UTC"))])
            catalog.load_table(table).append(pa.table({"id": [1, 2, 3], "ts": [moment] * 3}, schema=schema))
        _note("arrivals.jsonl", {"what": what, "at": time.time()})

    threading.Thread(target=commit, name=f"arrive-{what}", daemon=True).start()


def sensors_dag(dag_id: str, *, timeout: float, bad_key: bool = False, **sensor_args):
    """A DAG of ``arrive`` then both sensors (and, with ``bad_key``, a partition sensor with a wrong key)."""

    @dag(dag_id=dag_id, params=PARAMS, **DEFAULTS)
    def sensors():
        @task
        def arrive(
            what: str, delay: float, starts: int, namespace: str, migrations_dir: str, table: str, day: str
        ) -> None:
            if float(delay) >= 0:
                _arrive_later(what, float(delay), int(starts), namespace, migrations_dir, table, day)

        common = {"timeout": timeout, "on_execute_callback": started, "on_failure_callback": failed, **sensor_args}
        arrived = arrive(
            "{{ params.arrive }}",
            "{{ params.arrive_after }}",
            "{{ params.arrive_after_starts }}",
            "{{ params.namespace }}",
            "{{ params.migrations_dir }}",
            "{{ params.table }}",
            "{{ params.day }}",
        )
        arrived >> IcebergMigrationSensor(
            task_id="wait_migration",
            namespace="{{ params.namespace }}",
            migrations_dir="{{ params.migrations_dir }}",
            **common,
        )
        arrived >> IcebergPartitionSensor(
            task_id="wait_partition", table="{{ params.table }}", partition={"day": "{{ params.day }}"}, **common
        )
        if bad_key:
            arrived >> IcebergPartitionSensor(
                task_id="wait_bad_key", table="{{ params.table }}", partition={"dya": "{{ params.day }}"}, **common
            )

    return sensors()


sensors_dag("iceberg_ops_sensors_deferrable", timeout=60, poke_interval=0.5, deferrable=True)
sensors_dag("iceberg_ops_sensors_reschedule", timeout=60, poke_interval=1, deferrable=False)
sensors_dag("iceberg_ops_sensors_deferrable_timeout", timeout=2, poke_interval=0.5, deferrable=True, bad_key=True)
sensors_dag(
    "iceberg_ops_sensors_poke_timeout", timeout=2, poke_interval=0.5, deferrable=False, mode="poke", bad_key=True
)
