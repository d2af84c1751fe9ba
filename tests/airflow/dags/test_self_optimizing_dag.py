"""The self-optimizing example DAG: wired to a TableHealthTrigger watcher, and doing nothing when nothing is due."""

from __future__ import annotations

import time
from datetime import UTC, datetime

import pyarrow as pa
import pytest

from iceberg_ops_provider.maintenance.watch import watch_tables
from iceberg_ops_provider.triggers import TableHealthTrigger
from tests.airflow.conftest import catalog_at

DAG = "self_optimizing"
SCHEMA = pa.schema([pa.field("id", pa.int64())])
STEPS = ("compact", "rewrite_manifests", "expire_snapshots")


@pytest.fixture
def dag(airflow_db):
    from airflow.dag_processing.dagbag import DagBag

    bag = DagBag(dag_folder=str(airflow_db))
    assert not bag.import_errors, bag.import_errors
    return bag.get_dag(DAG)


def _event(asset, payload: dict):
    """An asset event as a triggered run reads it: the trigger's payload under ``payload`` in its extra."""
    from airflow.sdk.execution_time.comms import AssetEventDagRunReferenceResult

    return AssetEventDagRunReferenceResult(
        asset={"name": asset.name, "uri": asset.uri, "extra": {}},
        extra={"from_trigger": True, "payload": payload},
        source_task_id=None,
        source_dag_id=None,
        source_run_id=None,
        source_map_index=None,
        source_aliases=[],
        timestamp=datetime.now(UTC),
    )


def test_it_is_scheduled_on_a_watched_asset_and_caps_the_tables_maintained_at_once(dag):
    (asset,) = dag.timetable.asset_condition.objects
    (watcher,) = asset.watchers
    assert isinstance(watcher.trigger, TableHealthTrigger)
    _, kwargs = watcher.trigger.serialize()
    assert kwargs["namespace"] == "demo" and kwargs["poll_interval"] == 300.0  # the environment's defaults
    assert dag.max_active_runs == 1  # a table is never maintained by two runs at once
    for step in STEPS:
        task = dag.get_task(step)
        assert task.partial_kwargs["max_active_tis_per_dagrun"] == 4, step
        assert dag.get_task(f"needs_{step}").task_id in task.upstream_task_ids


def test_the_tables_of_the_triggering_events_are_mapped_to_the_steps_they_need(dag, iceberg_connection):
    catalog = catalog_at(iceberg_connection)
    catalog.create_namespace("sales")
    clicks = catalog.create_table("sales.clicks", SCHEMA)
    views = catalog.create_table("sales.views", SCHEMA)
    catalog.create_table("sales.steady", SCHEMA).append(pa.table({"id": [1]}, schema=SCHEMA))
    for n in range(6):
        clicks.append(pa.table({"id": [n]}, schema=SCHEMA))
    names = ["sales.clicks", "sales.steady", "sales.views"]
    first = watch_tables(catalog, names)  # the trigger's looks, as its events carry them
    for n in range(6):
        views.append(pa.table({"id": [n]}, schema=SCHEMA))
        clicks.append(pa.table({"id": [n]}, schema=SCHEMA))
    second = watch_tables(catalog, names, first.state)
    (asset,) = dag.timetable.asset_condition.objects
    events = {asset: [_event(asset, {"namespace": "sales", **look.to_json()}) for look in (first, second)]}

    due = dag.get_task("due_tables").python_callable(triggering_asset_events=events)

    assert {entry["table"] for entry in due} == {"sales.clicks", "sales.views"}  # each once, steady never
    clicks_entry = next(entry for entry in due if entry["table"] == "sales.clicks")
    assert clicks_entry["files_removed"] == 11  # its latest announcement: twelve files, not six
    assert [entry["score"] for entry in due] == sorted((entry["score"] for entry in due), reverse=True)
    needing = dag.get_task("needs_compact").python_callable
    calls = needing("compact", due)
    assert sorted(call["table"] for call in calls) == ["sales.clicks", "sales.views"]
    assert all(call["min_input_files"] == 5 and call["strategy"] == "binpack" for call in calls)
    assert needing("expire_snapshots", due) == []


@pytest.mark.slow
def test_a_run_without_events_does_nothing_and_finishes_in_seconds(run_dag, iceberg_connection):
    started = time.monotonic()
    dag_run = run_dag(DAG)
    took = time.monotonic() - started

    assert str(dag_run.state) == "success"
    states = {ti.task_id: str(ti.state) for ti in dag_run.get_task_instances()}
    assert states["due_tables"] == "success"
    assert {states[step] for step in STEPS} == {"skipped"}, states
    assert took < 30, took  # dag.test() itself costs most of it
