"""The example maintenance DAG under a real Airflow: health decides, mapped tasks do only what is needed."""

from __future__ import annotations

from collections import Counter

import pyarrow as pa
from pyiceberg.transforms import IdentityTransform

from tests.airflow.conftest import catalog_at, xcom


def _mapped(dag_run, task_id: str) -> list:
    """What each mapped instance of ``task_id`` returned, by map index."""
    instances = sorted(
        (ti for ti in dag_run.get_task_instances() if ti.task_id == task_id and ti.map_index >= 0),
        key=lambda ti: ti.map_index,
    )
    return [ti.xcom_pull(task_ids=task_id, map_indexes=ti.map_index) for ti in instances]


def _states(dag_run, task_id: str) -> set[str]:
    return {str(ti.state) for ti in dag_run.get_task_instances() if ti.task_id == task_id}


def _rows(table) -> Counter:
    return Counter(table.scan().to_arrow().column("id").to_pylist())


def test_the_maintenance_dag_compacts_only_the_table_that_needs_it(run_dag, iceberg_connection):
    catalog = catalog_at(iceberg_connection)
    catalog.create_namespace("shop")
    schema = pa.schema([pa.field("id", pa.int64()), pa.field("note", pa.string())])
    clicks = catalog.create_table("shop.clicks", schema)
    with clicks.update_sort_order() as order:  # the report then recommends a sorting compaction
        order.desc("id", IdentityTransform())
    for n in range(12):  # twelve tiny files: a compaction candidate
        clicks.append(pa.table({"id": pa.array(range(n * 10, n * 10 + 10), pa.int64()), "note": ["x"] * 10}))
    quiet = catalog.create_table("shop.quiet", schema)
    quiet.append(pa.table({"id": pa.array([1, 2, 3], pa.int64()), "note": ["a", "b", "c"]}))
    before = {name: _rows(catalog.load_table(name)) for name in ("shop.clicks", "shop.quiet")}
    quiet_metadata = catalog.load_table("shop.quiet").metadata_location

    dag_run = run_dag("table_maintenance", namespace="shop", dry_run=False)

    assert str(dag_run.state) == "success"
    reports = _mapped(dag_run, "health")
    assert [sorted(report["needs"]) for report in reports] == [["compact"], []]  # clicks, quiet (sorted names)
    (call,) = xcom(dag_run, "needs_compaction")  # the report's parameters, passed on as they are
    assert call["table"] == "shop.clicks" and call["strategy"] == "sort" and call["min_input_files"] == 5
    compacted = _mapped(dag_run, "compact")
    assert compacted[0]["rewritten_data_files_count"] == 12 and compacted[0]["added_data_files_count"] == 1
    for task_id in ("rewrite_manifests", "expire_snapshots"):
        assert _states(dag_run, task_id) == {"skipped"}, (task_id, _states(dag_run, task_id))
    # Orphan removal runs on every table (metadata cannot tell), with its three-day guard.
    assert [r["deleted_orphan_files_count"] for r in _mapped(dag_run, "remove_orphan_files")] == [0, 0]
    after = {name: _rows(catalog.load_table(name)) for name in ("shop.clicks", "shop.quiet")}
    assert after == before  # the same rows, in fewer files
    compacted_ids = catalog.load_table("shop.clicks").scan().to_arrow().column("id").to_pylist()
    assert compacted_ids == sorted(compacted_ids, reverse=True)  # one file, sorted as the table says
    assert len(catalog.load_table("shop.clicks").inspect.files()) == 1
    assert catalog.load_table("shop.quiet").metadata_location == quiet_metadata  # nothing done to it


def test_a_dry_run_of_the_maintenance_dag_changes_nothing(run_dag, iceberg_connection):
    catalog = catalog_at(iceberg_connection)
    catalog.create_namespace("shop")
    clicks = catalog.create_table("shop.clicks", pa.schema([pa.field("id", pa.int64())]))
    for n in range(6):
        clicks.append(pa.table({"id": pa.array([n], pa.int64())}))
    location = catalog.load_table("shop.clicks").metadata_location

    dag_run = run_dag("table_maintenance", namespace="shop", dry_run=True)

    assert str(dag_run.state) == "success"
    ((task,),) = _mapped(dag_run, "plan_compaction")  # the plan: one task of one unit, shown, not run
    assert task["table"] == "shop.clicks" and len(task["units"][0]["data_files"]) == 6
    assert _states(dag_run, "compact") == {"skipped"}
    assert catalog.load_table("shop.clicks").metadata_location == location


def test_the_tables_param_limits_a_run_to_the_tables_it_names(run_dag, iceberg_connection):
    catalog = catalog_at(iceberg_connection)
    catalog.create_namespace("shop")
    for name in ("shop.clicks", "shop.views"):
        table = catalog.create_table(name, pa.schema([pa.field("id", pa.int64())]))
        for n in range(6):  # six tiny files each: both are compaction candidates
            table.append(pa.table({"id": pa.array([n], pa.int64())}))
    views = catalog.load_table("shop.views").metadata_location

    dag_run = run_dag("table_maintenance", namespace="shop", tables=["shop.clicks"])

    assert str(dag_run.state) == "success"
    assert xcom(dag_run, "list_tables") == ["shop.clicks"]
    assert len(catalog.load_table("shop.clicks").inspect.files()) == 1
    assert catalog.load_table("shop.views").metadata_location == views  # not named: not touched

    wrong = run_dag("table_maintenance", namespace="shop", tables=["views"])  # not namespace.table
    assert str(wrong.state) == "failed"
    assert {str(ti.state) for ti in wrong.get_task_instances() if ti.task_id == "list_tables"} == {"failed"}
    assert catalog.load_table("shop.views").metadata_location == views
