"""Compaction fanned out through the operators: a plan task's XCom is the compact tasks' arguments, each
compact task runs its units exactly once (a retry, or a second task given the same unit, skips what is
done), and the maintenance DAG maps one compact task per unit of a partitioned table."""

from __future__ import annotations

from collections import Counter

import pyarrow as pa
import pytest
from pyiceberg.partitioning import PartitionField, PartitionSpec
from pyiceberg.schema import Schema
from pyiceberg.transforms import IdentityTransform
from pyiceberg.types import LongType, NestedField, StringType

from tests.airflow.conftest import catalog_at

SCHEMA = Schema(
    NestedField(1, "id", LongType(), required=False), NestedField(2, "region", StringType(), required=False)
)
REGIONS = ("eu", "us", "ap")


def _regional(root, name: str = "shop.visits", files_per_region: int = 6):
    """A table partitioned by region with ``files_per_region`` one-row files in each of three regions."""
    catalog = catalog_at(root)
    catalog.create_namespace_if_not_exists("shop")
    spec = PartitionSpec(PartitionField(2, 1000, IdentityTransform(), "region"))
    table = catalog.create_table(name, SCHEMA, partition_spec=spec)
    arrow = SCHEMA.as_arrow()
    for n in range(files_per_region):
        table.append(pa.table({"id": [n * 10 + i for i in range(3)], "region": list(REGIONS)}, schema=arrow))
    return catalog


def _rows(table) -> Counter:
    return Counter(zip(*table.scan().to_arrow().select(["id", "region"]).to_pydict().values(), strict=True))


def test_the_plan_task_returns_one_compact_task_per_unit_and_each_runs_once(iceberg_connection):
    from iceberg_ops_provider.operators.maintenance import IcebergCompactOperator, IcebergPlanCompactionOperator

    catalog = _regional(iceberg_connection)
    before = _rows(catalog.load_table("shop.visits"))
    tasks = IcebergPlanCompactionOperator(task_id="plan", table="shop.visits").execute({})
    assert [len(task["units"]) for task in tasks] == [1, 1, 1]
    assert {task["units"][0]["partition"] for task in tasks} == {f"region={r}" for r in REGIONS}
    assert catalog.load_table("shop.visits").inspect.files().num_rows == 18  # planning wrote nothing

    results = [IcebergCompactOperator(task_id=f"c{i}", **task).execute({}) for i, task in enumerate(tasks)]
    assert [(r["committed_groups_count"], r["rewritten_data_files_count"]) for r in results] == [(1, 6)] * 3
    table = catalog.load_table("shop.visits")
    assert table.inspect.files().num_rows == 3 and _rows(table) == before

    again = IcebergCompactOperator(task_id="retry", **tasks[1]).execute({})  # a retry after the commit landed
    assert (again["committed_groups_count"], again["skipped_groups_count"]) == (0, 1)
    assert catalog.load_table("shop.visits").metadata_location == table.metadata_location


def test_many_units_are_batched_so_at_most_max_tasks_are_mapped(iceberg_connection):
    from iceberg_ops_provider.operators.maintenance import IcebergPlanCompactionOperator

    _regional(iceberg_connection)
    tasks = IcebergPlanCompactionOperator(task_id="plan", table="shop.visits", max_tasks=2).execute({})
    assert [len(task["units"]) for task in tasks] == [2, 1]
    tasks = IcebergPlanCompactionOperator(task_id="plan", table="shop.visits", units_per_task=5).execute({})
    assert [len(task["units"]) for task in tasks] == [3]


def test_bad_arguments_name_the_field_and_fail_without_writing(iceberg_connection):
    from airflow.sdk.exceptions import AirflowFailException

    from iceberg_ops_provider.operators.maintenance import IcebergCompactOperator, IcebergPlanCompactionOperator

    catalog = _regional(iceberg_connection)
    catalog.create_table("shop.other", SCHEMA)
    (task, *_) = IcebergPlanCompactionOperator(task_id="plan", table="shop.visits").execute({})
    location = catalog.load_table("shop.visits").metadata_location
    with pytest.raises(ValueError, match="units_per_task=0"):
        IcebergPlanCompactionOperator(task_id="plan", table="shop.visits", units_per_task=0)
    cases = [
        ({**task, "dry_run": True}, "dry_run=True with units"),
        ({**task, "strategy": "sort"}, "strategy given with units"),
        ({**task, "units": "not json"}, "units is text that is not JSON"),
        ({**task, "units": 7}, "units must be a list"),
        ({**task, "units": [{"table": "shop.visits"}]}, "A compaction unit lacks"),
        ({**task, "table": "shop.other"}, "units of shop.visits were given to the compaction of shop.other"),
    ]
    for kwargs, message in cases:
        with pytest.raises(AirflowFailException, match=message):
            IcebergCompactOperator(task_id="c", **kwargs).execute({})
    assert catalog.load_table("shop.visits").metadata_location == location


def test_units_rendered_from_a_template_as_json_text_run(iceberg_connection):
    import json

    from iceberg_ops_provider.operators.maintenance import IcebergCompactOperator, IcebergPlanCompactionOperator

    catalog = _regional(iceberg_connection)
    (task, *_) = IcebergPlanCompactionOperator(task_id="plan", table="shop.visits").execute({})
    result = IcebergCompactOperator(task_id="c", table="shop.visits", units=json.dumps(task["units"])).execute({})
    assert result["committed_groups_count"] == 1
    assert catalog.load_table("shop.visits").inspect.files().num_rows == 13


def test_the_maintenance_dag_maps_one_compact_task_per_unit(run_dag, iceberg_connection):
    catalog = _regional(iceberg_connection)
    before = _rows(catalog.load_table("shop.visits"))

    dag_run = run_dag("table_maintenance", namespace="shop", dry_run=False)

    assert str(dag_run.state) == "success"
    compacted = sorted(
        (ti for ti in dag_run.get_task_instances() if ti.task_id == "compact"), key=lambda ti: ti.map_index
    )
    assert [str(ti.state) for ti in compacted] == ["success"] * 3
    results = [ti.xcom_pull(task_ids="compact", map_indexes=ti.map_index) for ti in compacted]
    assert sorted(r["groups"][0]["partition"] for r in results) == [f"region={r}" for r in sorted(REGIONS)]
    table = catalog.load_table("shop.visits")
    assert table.inspect.files().num_rows == 3 and _rows(table) == before
