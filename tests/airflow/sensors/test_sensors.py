"""The sensors in a real Airflow (dag.test(): deferred with the trigger run in line, rescheduled, poking),
and the triggers re-created from what they serialize, run to their event."""

from __future__ import annotations

import asyncio
import importlib
import json
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pyarrow as pa
import pytest
from airflow.sdk.exceptions import AirflowFailException, TaskDeferred
from pyiceberg.partitioning import PartitionField, PartitionSpec
from pyiceberg.schema import Schema
from pyiceberg.transforms import DayTransform
from pyiceberg.types import LongType, NestedField, TimestamptzType

from iceberg_ops_provider.runner import MigrationRunner
from iceberg_ops_provider.sensors import IcebergMigrationSensor, IcebergPartitionSensor
from iceberg_ops_provider.triggers import IcebergMigrationTrigger, IcebergPartitionTrigger
from tests.airflow.conftest import catalog_at, xcom
from tests.support.migrations import ORDERS, write_migration

pytestmark = pytest.mark.slow

DAY = "2026-01-02"
ARROW = pa.schema([("id", pa.int64()), ("ts", pa.timestamp("us", tz="UTC"))])


@pytest.fixture(autouse=True)
def _deferrable_by_default(monkeypatch):
    """Sensors built here without deferrable= defer, as under `[operators] default_deferrable = True`."""
    monkeypatch.setenv("AIRFLOW__OPERATORS__DEFAULT_DEFERRABLE", "True")


def _setup(root: Path, *, rows_on_day: int = 0) -> tuple[object, Path]:
    """Migrations 0001-0002 for ``sales`` (not applied) and ``shop.events`` partitioned by day(ts)."""
    migrations = root / "migrations"
    write_migration(migrations, "0001_create_orders.py", ORDERS)
    write_migration(migrations, "0002_add_email.py", 'ctx.add_column("orders", "email", "string")')
    catalog = catalog_at(root)
    catalog.create_namespace("sales")
    catalog.create_namespace("shop")
    schema = Schema(
        NestedField(1, "id", LongType(), required=False), NestedField(2, "ts", TimestamptzType(), required=False)
    )
    table = catalog.create_table(
        "shop.events", schema, partition_spec=PartitionSpec(PartitionField(2, 1000, DayTransform(), "day"))
    )
    table.append(pa.table({"id": [0], "ts": [datetime(2026, 1, 1, tzinfo=UTC)]}, ARROW))  # another day
    if rows_on_day:
        table.append(
            pa.table({"id": range(rows_on_day), "ts": [datetime(2026, 1, 2, 8, tzinfo=UTC)] * rows_on_day}, ARROW)
        )
    return catalog, migrations


def _notes(root: Path, name: str) -> list[dict]:
    path = root / name
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def _states(dag_run) -> dict[str, str]:
    return {ti.task_id: str(ti.state) for ti in dag_run.get_task_instances()}


def _first_start(root: Path, task_id: str) -> float:
    return min(note["at"] for note in _notes(root, "starts.jsonl") if note["task_id"] == task_id)


def _arrival(root: Path) -> float:
    (arrival,) = _notes(root, "arrivals.jsonl")
    return arrival["at"]


# -- dag.test() -----------------------------------------------------------------------------------


def test_deferred_sensors_see_existing_data_and_a_migration_that_lands_while_they_wait(run_dag, iceberg_connection):
    root = iceberg_connection
    catalog, migrations = _setup(root, rows_on_day=4)

    dag_run = run_dag(
        "iceberg_ops_sensors_deferrable", migrations_dir=str(migrations), arrive="migration", arrive_after=1
    )

    assert _states(dag_run) == {"arrive": "success", "wait_migration": "success", "wait_partition": "success"}
    assert xcom(dag_run, "wait_migration") == {"namespace": "sales", "version": "0002", "failed": []}
    assert _first_start(root, "wait_migration") < _arrival(root)  # it was waiting when the migration landed
    seen = xcom(dag_run, "wait_partition")
    snapshot = catalog.load_table("shop.events").current_snapshot().snapshot_id
    assert seen == {
        "table": "shop.events",
        "snapshot_id": snapshot,
        "rows": 4,
        "possible_rows": 4,
        "files": 1,
        "files_with_deletes": 0,
    }
    assert MigrationRunner(catalog, "sales", migrations).current() == "0002"


def test_rescheduled_sensors_see_an_applied_migration_and_data_that_lands_while_they_wait(run_dag, iceberg_connection):
    root = iceberg_connection
    catalog, migrations = _setup(root)
    MigrationRunner(catalog, "sales", migrations).upgrade()

    dag_run = run_dag(
        "iceberg_ops_sensors_reschedule",
        migrations_dir=str(migrations),
        arrive="partition",
        arrive_after=0,
        arrive_after_starts=2,  # once a try found nothing and the sensor was rescheduled
    )

    assert _states(dag_run) == {"arrive": "success", "wait_migration": "success", "wait_partition": "success"}
    assert xcom(dag_run, "wait_migration")["version"] == "0002"
    seen = xcom(dag_run, "wait_partition")
    assert (seen["rows"], seen["files"]) == (3, 1)
    assert seen["snapshot_id"] == catalog.load_table("shop.events").current_snapshot().snapshot_id
    tries = [note for note in _notes(root, "starts.jsonl") if note["task_id"] == "wait_partition"]
    assert len(tries) >= 2  # rescheduled at least once: each poke is a short try
    assert _first_start(root, "wait_partition") < _arrival(root)
    assert not _notes(root, "failures.jsonl")


def _timeout_failures(root: Path) -> dict[str, dict]:
    failures = {note["task_id"]: note for note in _notes(root, "failures.jsonl")}
    assert set(failures) == {"wait_migration", "wait_partition", "wait_bad_key"}
    return failures


def _assert_clear_timeouts(failures: dict[str, dict], snapshot: int) -> None:
    migration, partition, bad_key = failures["wait_migration"], failures["wait_partition"], failures["wait_bad_key"]
    assert migration["type"] == "AirflowSensorTimeout"
    assert migration["message"].startswith("Timed out after ")
    assert migration["message"].endswith(
        " s waiting for namespace 'sales' to reach migration version 0002; last seen: namespace 'sales' at base "
        "(no migration history of it in '_iceberg_ops')."
    )
    assert partition["type"] == "AirflowSensorTimeout"
    assert partition["message"].endswith(
        f" s waiting for at least 1 row(s) in partition day='{DAY}' of shop.events; last seen: 0 row(s) in 0 data "
        f"file(s) of shop.events at snapshot {snapshot}."
    )
    assert bad_key["type"] == "AirflowFailException"  # permanent: no waiting, no retry
    assert bad_key["message"] == (
        f"Stopped waiting for at least 1 row(s) in partition dya='{DAY}' of shop.events: ValueError: 'dya' is not a "
        "partition field of shop.events: its partition fields are day (day(ts))."
    )


def test_deferred_sensors_time_out_with_what_they_awaited_and_saw(run_dag, iceberg_connection):
    root = iceberg_connection
    catalog, migrations = _setup(root)

    dag_run = run_dag("iceberg_ops_sensors_deferrable_timeout", migrations_dir=str(migrations))

    assert _states(dag_run) == {
        "arrive": "success",
        "wait_migration": "failed",
        "wait_partition": "failed",
        "wait_bad_key": "failed",
    }
    _assert_clear_timeouts(_timeout_failures(root), catalog.load_table("shop.events").current_snapshot().snapshot_id)
    assert sorted(catalog.list_namespaces()) == [("sales",), ("shop",)]  # waiting created no history table


def test_poking_sensors_time_out_with_what_they_awaited_and_saw(run_dag, iceberg_connection):
    root = iceberg_connection
    catalog, migrations = _setup(root)

    dag_run = run_dag("iceberg_ops_sensors_poke_timeout", migrations_dir=str(migrations))

    assert _states(dag_run)["wait_migration"] == _states(dag_run)["wait_partition"] == "failed"
    _assert_clear_timeouts(_timeout_failures(root), catalog.load_table("shop.events").current_snapshot().snapshot_id)


# -- construction ---------------------------------------------------------------------------------


def test_deferrable_follows_airflows_default_deferrable(monkeypatch):
    monkeypatch.delenv("AIRFLOW__OPERATORS__DEFAULT_DEFERRABLE", raising=False)
    assert IcebergMigrationSensor(task_id="m", namespace="sales", version="0003").deferrable is False
    monkeypatch.setenv("AIRFLOW__OPERATORS__DEFAULT_DEFERRABLE", "True")
    assert IcebergMigrationSensor(task_id="m", namespace="sales", version="0003").deferrable is True
    assert IcebergPartitionSensor(task_id="p", table="a.b", where="x > 1").deferrable is True
    assert IcebergPartitionSensor(task_id="p", table="a.b", where="x > 1", deferrable=False).deferrable is False
    with pytest.raises(ValueError, match="poke_interval must be above zero seconds when deferrable"):
        IcebergPartitionSensor(task_id="p", table="a.b", where="x > 1", poke_interval=0)
    monkeypatch.setenv("AIRFLOW__OPERATORS__DEFAULT_DEFERRABLE", "False")
    assert IcebergPartitionSensor(task_id="p", table="a.b", where="x > 1", deferrable=True).deferrable is True
    assert IcebergPartitionSensor(task_id="p", table="a.b", where="x > 1", poke_interval=0).deferrable is False


def test_defaults_and_bad_arguments_at_construction(monkeypatch):
    monkeypatch.delenv("AIRFLOW__OPERATORS__DEFAULT_DEFERRABLE", raising=False)
    sensor = IcebergPartitionSensor(task_id="p", table="shop.events", partition={"day": "{{ ds }}"})
    assert (sensor.deferrable, sensor.mode, sensor.iceberg_conn_id) == (False, "reschedule", "iceberg_ops_default")
    assert set(sensor.template_fields) == {"table", "partition", "where", "after_snapshot", "iceberg_conn_id"}
    assert IcebergPartitionSensor(task_id="q", table="a.b", where="x > 1", mode="poke").mode == "poke"
    migration = IcebergMigrationSensor(task_id="m", namespace="sales", version="0003")
    assert (migration.deferrable, migration.mode) == (False, "reschedule")
    assert set(migration.template_fields) == {
        "namespace",
        "migrations_dir",
        "version",
        "meta_namespace",
        "iceberg_conn_id",
    }

    with pytest.raises(ValueError, match="version='head' needs migrations_dir"):
        IcebergMigrationSensor(task_id="m2", namespace="sales")
    with pytest.raises(ValueError, match="'head' or a migration version"):
        IcebergMigrationSensor(task_id="m3", namespace="sales", version="latest")
    with pytest.raises(ValueError, match="needs partition="):
        IcebergPartitionSensor(task_id="p2", table="shop.events")
    with pytest.raises(ValueError, match="min_rows must be an integer of at least 1"):
        IcebergPartitionSensor(task_id="p3", table="shop.events", where="id > 0", min_rows=0)
    for interval in (0, 0.0, timedelta(0)):  # the trigger could never poll: refused when the DAG is parsed
        with pytest.raises(ValueError, match="poke_interval must be above zero seconds when deferrable"):
            IcebergPartitionSensor(
                task_id="p4", table="shop.events", where="id > 0", poke_interval=interval, deferrable=True
            )
    assert IcebergPartitionSensor(task_id="p5", table="a.b", where="x > 1", deferrable=False, poke_interval=0)


def test_rendered_arguments_are_checked_before_the_first_check():
    sensor = IcebergPartitionSensor(task_id="p", table="shop.events", partition="{'day': '2026-01-02'}")
    sensor.prepare()  # a whole-dict template rendered as text is read back
    assert sensor.waiting_for() == "at least 1 row(s) in partition day='2026-01-02' of shop.events"
    for table, partition, where, after in [
        ("events", {"day": "x"}, None, None),
        ("shop.events", "day=2026-01-02", None, None),
        ("shop.events", None, "  ", None),
        ("shop.events", {"day": "x"}, None, "yesterday"),
    ]:
        bad = IcebergPartitionSensor(task_id="b", table=table, partition=partition, where=where, after_snapshot=after)
        with pytest.raises(ValueError):
            bad.prepare()


# -- triggers -------------------------------------------------------------------------------------


def _recreated(trigger):
    """The trigger as a triggerer re-creates it: classpath import, keyword arguments."""
    classpath, kwargs = trigger.serialize()
    json.dumps(kwargs)  # plain JSON: nothing only this process could read back
    module, name = classpath.rsplit(".", 1)
    again = getattr(importlib.import_module(module), name)(**kwargs)
    assert again.serialize() == (classpath, kwargs)
    return again


def _event(trigger) -> dict:
    async def first():
        return await anext(trigger.run())

    return asyncio.run(first()).payload


def _deadline(seconds: float) -> datetime:
    return datetime.now(UTC) + timedelta(seconds=seconds)


def test_partition_trigger_recreated_from_serialize_finds_the_rows(iceberg_connection):
    catalog, _ = _setup(iceberg_connection, rows_on_day=5)
    trigger = _recreated(
        IcebergPartitionTrigger(
            table="shop.events", partition={"day": DAY}, min_rows=5, deadline=_deadline(30), poll_interval=0.2
        )
    )
    event = _event(trigger)
    snapshot = catalog.load_table("shop.events").current_snapshot().snapshot_id
    assert event["status"] == "success"
    assert event["seen"] == {
        "table": "shop.events",
        "snapshot_id": snapshot,
        "rows": 5,
        "possible_rows": 5,
        "files": 1,
        "files_with_deletes": 0,
    }
    assert event["message"] == (
        f"Done waiting for at least 5 row(s) in partition day='{DAY}' of shop.events: 5 row(s) in 1 data file(s) "
        f"of shop.events at snapshot {snapshot}."
    )


def test_partition_trigger_waits_for_min_rows(iceberg_connection):
    _setup(iceberg_connection, rows_on_day=5)
    trigger = IcebergPartitionTrigger(
        table="shop.events", partition={"day": DAY}, min_rows=6, deadline=_deadline(0.6), poll_interval=0.2
    )
    event = _event(_recreated(trigger))
    assert event["status"] == "timeout" and event["seen"]["rows"] == 5
    assert (
        f"waiting for at least 6 row(s) in partition day='{DAY}' of shop.events; last seen: 5 row(s)"
        in event["message"]
    )


def test_migration_trigger_recreated_from_serialize_waits_for_the_version(iceberg_connection):
    catalog, migrations = _setup(iceberg_connection)
    MigrationRunner(catalog, "sales", migrations).upgrade("0001")
    reached = _recreated(
        IcebergMigrationTrigger(namespace="sales", version="0001", deadline=_deadline(30), poll_interval=0.2)
    )
    assert _event(reached) == {
        "status": "success",
        "message": "Done waiting for namespace 'sales' to reach migration version 0001: namespace 'sales' at 0001.",
        "seen": {"namespace": "sales", "version": "0001", "failed": []},
    }
    waiting = _recreated(
        IcebergMigrationTrigger(namespace="sales", version="2", deadline=_deadline(1), poll_interval=0.2)
    )
    event = _event(waiting)
    assert event["status"] == "timeout" and event["seen"]["version"] == "0001"
    assert event["message"].endswith(
        "waiting for namespace 'sales' to reach migration version 2; last seen: namespace 'sales' at 0001."
    )
    with pytest.raises(ValueError, match="resolve 'head'"):
        IcebergMigrationTrigger(namespace="sales", version="head", deadline=_deadline(1))


def test_a_restarted_trigger_keeps_its_deadline_and_when_the_wait_began(iceberg_connection):
    _setup(iceberg_connection)
    began = datetime.now(UTC) - timedelta(seconds=90)
    trigger = IcebergPartitionTrigger(
        table="shop.events", partition={"day": DAY}, deadline=began + timedelta(seconds=60), started_at=began
    )
    _, kwargs = trigger.serialize()
    assert kwargs["deadline"] == (began + timedelta(seconds=60)).isoformat()
    restarted = _recreated(trigger)  # the triggerer came back after the deadline: one last check, then the timeout
    event = _event(restarted)
    assert event["status"] == "timeout"
    assert event["message"].startswith("Timed out after 9")  # measured from when the wait began (about 90 s)
    assert "; last seen: 0 row(s) in 0 data file(s) of shop.events" in event["message"]


def test_permanent_errors_end_the_wait_at_once(iceberg_connection):
    _setup(iceberg_connection)
    started = datetime.now(UTC)
    for trigger, expected in [
        (
            IcebergPartitionTrigger(table="shop.events", partition={"hour": DAY}, deadline=_deadline(60)),
            "'hour' is not a partition field of shop.events: its partition fields are day (day(ts))",
        ),
        (
            IcebergPartitionTrigger(table="shop.events", where="id >", deadline=_deadline(60)),
            "is not a PyIceberg row filter",
        ),
        (
            IcebergMigrationTrigger(namespace="sales", version="1", iceberg_conn_id="nowhere", deadline=_deadline(60)),
            "The conn_id `nowhere` isn't defined",
        ),
    ]:
        event = _event(_recreated(trigger))
        assert event["status"] == "failed", event
        assert event["message"].startswith("Stopped waiting for ") and expected in event["message"], event
    assert (datetime.now(UTC) - started).total_seconds() < 20  # none waited for its deadline


def test_transient_errors_keep_the_trigger_polling_until_its_deadline(monkeypatch, unused_port):
    unreachable = {
        "conn_type": "iceberg_ops",
        "host": f"http://127.0.0.1:{unused_port}",
        "extra": {"kind": "rest", "timeout": 1},
    }
    monkeypatch.setenv("AIRFLOW_CONN_UNREACHABLE", json.dumps(unreachable))
    trigger = IcebergMigrationTrigger(
        namespace="sales", version="1", iceberg_conn_id="unreachable", deadline=_deadline(1.5), poll_interval=0.3
    )
    started = datetime.now(UTC)
    event = _event(_recreated(trigger))
    assert (datetime.now(UTC) - started).total_seconds() >= 1.4  # it kept trying until the deadline
    assert event["status"] == "timeout" and event["seen"] is None
    assert "last seen: nothing (no check succeeded); last error: CatalogUnavailableError: " in event["message"]
    assert f"127.0.0.1:{unused_port}" in event["message"]


@pytest.fixture
def unused_port() -> int:
    import socket

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


# -- rendered arguments ---------------------------------------------------------------------------


def test_a_table_name_with_surrounding_spaces_names_the_table(iceberg_connection):
    _setup(iceberg_connection, rows_on_day=2)
    sensor = IcebergPartitionSensor(task_id="p", table=" shop.events ", partition={"day": DAY})
    assert sensor.execute({})["rows"] == 2
    for bad in ("shop. events", "shop..events", "events"):
        with pytest.raises(AirflowFailException, match=r"table must be 'namespace\.table'"):
            IcebergPartitionSensor(task_id="b", table=bad, partition={"day": DAY}).execute({})


def test_an_after_snapshot_that_rendered_none_is_refused_and_an_empty_one_counts_all(iceberg_connection):
    _setup(iceberg_connection, rows_on_day=2)
    sensor = IcebergPartitionSensor(
        task_id="p", table="shop.events", partition={"day": DAY}, after_snapshot="{{ ti.xcom_pull('load') }}"
    )
    for rendered in ("None", None):  # what the template gives when the upstream pushed nothing
        sensor.after_snapshot = rendered
        with pytest.raises(AirflowFailException, match=r"after_snapshot rendered as .*holds no snapshot id"):
            sensor.execute({})
    sensor.after_snapshot = ""  # "{{ ti.xcom_pull('load') or '' }}": all data, on purpose
    assert sensor.execute({})["rows"] == 2
    unset = IcebergPartitionSensor(task_id="q", table="shop.events", partition={"day": DAY})
    assert unset.execute({})["rows"] == 2  # not given at all: all data


def test_the_migration_version_is_templated_and_checked_once_rendered(iceberg_connection):
    catalog, migrations = _setup(iceberg_connection)
    MigrationRunner(catalog, "sales", migrations).upgrade("0001")
    sensor = IcebergMigrationSensor(task_id="m", namespace="sales", version="{{ params.version }}")
    sensor.version = "0001"  # as rendered
    assert sensor.execute({}) == {"namespace": "sales", "version": "0001", "failed": []}
    sensor.version = "latest"
    with pytest.raises(AirflowFailException, match="'head' or a migration version"):
        sensor.execute({})


def test_head_of_a_folder_without_migrations_fails_instead_of_passing(iceberg_connection, tmp_path):
    _setup(iceberg_connection)
    (tmp_path / "empty").mkdir()
    for folder in (tmp_path / "empty", tmp_path):  # an empty folder; the folder above the migrations
        sensor = IcebergMigrationSensor(task_id="m", namespace="sales", migrations_dir=str(folder))
        with pytest.raises(AirflowFailException, match="holds no migration file"):
            sensor.execute({})


def test_a_missing_table_fails_the_first_check_only(iceberg_connection):
    catalog, _ = _setup(iceberg_connection, rows_on_day=1)
    missing = IcebergPartitionSensor(task_id="p", table="shop.nope", partition={"day": DAY}, deferrable=False)
    missing.prepare()
    with pytest.raises(AirflowFailException, match=r"NoSuchTableError: Table does not exist: shop\.nope"):
        missing.poke({})

    waiting = IcebergPartitionSensor(task_id="q", table="shop.events", partition={"day": DAY}, min_rows=5)
    waiting.prepare()
    assert not waiting.poke({})  # a first check that saw the table
    catalog.drop_table("shop.events")  # a migration drops and re-creates it
    assert not waiting.poke({})  # the wait goes on
    assert "Table does not exist: shop.events" in waiting._timeout_message()


def test_possible_rows_count_only_when_asked(iceberg_connection):
    _setup(iceberg_connection, rows_on_day=3)  # ids 0-2 on the day, one file: statistics cannot settle id = 1
    certain = IcebergPartitionSensor(task_id="p", table="shop.events", partition={"day": DAY}, where="id = 1")
    with pytest.raises(TaskDeferred) as deferred:
        certain.execute({})
    assert deferred.value.trigger.serialize()[1]["count_possible_rows"] is False
    possible = IcebergPartitionSensor(
        task_id="q", table="shop.events", partition={"day": DAY}, where="id = 1", count_possible_rows=True
    )
    seen = possible.execute({})
    assert possible.waiting_for().startswith("at least 1 possible row(s) in partition")
    assert (seen["rows"], seen["possible_rows"]) == (0, 3)


def test_the_sensor_hands_the_trigger_the_mark_of_after_snapshot_which_outlives_its_expiry(iceberg_connection):
    catalog, _ = _setup(iceberg_connection, rows_on_day=1)
    before = catalog.load_table("shop.events").current_snapshot()
    sensor = IcebergPartitionSensor(
        task_id="p", table="shop.events", partition={"day": DAY}, after_snapshot=str(before.snapshot_id)
    )
    with pytest.raises(TaskDeferred) as deferred:
        sensor.execute({})
    _, kwargs = deferred.value.trigger.serialize()
    assert (kwargs["after_snapshot"], kwargs["after_sequence_number"], kwargs["after_timestamp_ms"]) == (
        before.snapshot_id,
        before.sequence_number,
        before.timestamp_ms,
    )
    table = catalog.load_table("shop.events")
    table.append(pa.table({"id": [7, 8], "ts": [datetime(2026, 1, 2, 9, tzinfo=UTC)] * 2}, ARROW))
    table.maintenance.expire_snapshots().by_id(before.snapshot_id).commit()  # expired while the trigger waits
    event = _event(_recreated(deferred.value.trigger))
    assert event["status"] == "success", event
    assert (event["seen"]["rows"], event["seen"]["files"]) == (2, 1)


def test_bytes_partition_values_survive_airflow_storing_the_trigger():
    from airflow.models.trigger import Trigger

    trigger = IcebergPartitionTrigger(
        table="shop.t", partition={"key": b"\x00ab", "day": DAY}, deadline=_deadline(60), poll_interval=1
    )
    classpath, kwargs = trigger.serialize()
    stored = Trigger._decrypt_kwargs(Trigger.encrypt_kwargs(kwargs))  # as the triggerer stores and reads it
    module, name = classpath.rsplit(".", 1)
    again = getattr(importlib.import_module(module), name)(**stored)
    assert again.partition == {"key": b"\x00ab", "day": DAY}
    assert again.serialize() == (classpath, kwargs)


def test_the_partition_sensor_reports_the_table_it_read_as_lineage(iceberg_connection):
    catalog, _ = _setup(iceberg_connection, rows_on_day=2)
    snapshot = catalog.load_table("shop.events").current_snapshot().snapshot_id
    sensor = IcebergPartitionSensor(task_id="p", table="shop.events", partition={"day": DAY})
    assert sensor.get_openlineage_facets_on_complete(None).inputs == []  # nothing before it ran
    sensor.execute({})
    lineage = sensor.get_openlineage_facets_on_complete(None)
    (read,) = lineage.inputs
    assert read.facets["symlinks"].identifiers[0].name == "shop.events" and lineage.outputs == []
    assert read.facets["version"].datasetVersion == str(snapshot)

    resumed = IcebergPartitionSensor(task_id="q", table="shop.events", partition={"day": DAY})
    resumed.prepare()
    seen = resumed.execute_complete(
        {},
        {"status": "success", "message": "done", "seen": {"table": "shop.events", "snapshot_id": snapshot, "rows": 2}},
    )
    assert seen["rows"] == 2
    (read,) = resumed.get_openlineage_facets_on_complete(None).inputs
    assert read.facets["version"].datasetVersion == str(snapshot)
