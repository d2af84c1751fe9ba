"""IcebergTagOperator under a real Airflow (dag.test with an SQLite metadata database)."""

from __future__ import annotations

import pyarrow as pa
import pytest

from tests.airflow.conftest import catalog_at, xcom


def _events(root):
    catalog = catalog_at(root)
    catalog.create_namespace_if_not_exists("sales")
    table = catalog.create_table("sales.events", pa.schema([pa.field("id", pa.int64())]))
    table.append(pa.table({"id": pa.array([1, 2], pa.int64())}))
    return catalog


def test_a_dag_tags_the_table_a_retry_finds_the_tag_and_another_snapshot_needs_replace(run_dag, iceberg_connection):
    catalog = _events(iceberg_connection)
    head = catalog.load_table("sales.events").current_snapshot().snapshot_id

    first = run_dag("iceberg_ops_tag")
    assert str(first.state) == "success"
    pushed = xcom(first, "tag")
    tag = pushed["tag"]
    assert tag.startswith("before-load-20") and pushed["snapshot_id"] == head and pushed["created"] is True
    assert xcom(first, "load") == head  # what a downstream task reads
    ref = catalog.load_table("sales.events").refs()[tag]
    assert ref.snapshot_id == head and ref.max_ref_age_ms == 7 * 86400 * 1000

    again = run_dag("iceberg_ops_tag")  # the same tag on the same snapshot: a retried run succeeds
    assert str(again.state) == "success" and xcom(again, "tag")["created"] is False

    catalog.load_table("sales.events").append(pa.table({"id": pa.array([3], pa.int64())}))
    moved_on = run_dag("iceberg_ops_tag")
    assert str(moved_on.state) == "failed"
    assert moved_on.get_task_instance("tag").try_number == 1  # no retry for what a retry cannot fix
    assert catalog.load_table("sales.events").refs()[tag].snapshot_id == head

    replaced = run_dag("iceberg_ops_tag", replace=True)
    assert str(replaced.state) == "success"
    new_head = catalog.load_table("sales.events").current_snapshot().snapshot_id
    assert xcom(replaced, "tag")["replaced"] == head and catalog.load_table("sales.events").refs()[tag].snapshot_id == (
        new_head
    )


def test_the_task_fails_at_once_with_words_for_the_task(iceberg_connection):
    from airflow.sdk.exceptions import AirflowFailException

    from iceberg_ops_provider.operators.tags import IcebergTagOperator

    catalog = _events(iceberg_connection)
    first = catalog.load_table("sales.events").current_snapshot().snapshot_id
    IcebergTagOperator(task_id="t", table="sales.events", tag="t").execute({})
    catalog.load_table("sales.events").append(pa.table({"id": pa.array([3], pa.int64())}))
    with pytest.raises(AirflowFailException, match=rf"on snapshot {first}; it was not moved.*Pass replace=True"):
        IcebergTagOperator(task_id="t", table="sales.events", tag="t").execute({})
    with pytest.raises(AirflowFailException, match=r"already has a branch 'main'.*Choose another name") as branch:
        IcebergTagOperator(task_id="t", table="sales.events", tag="main").execute({})
    assert "replace=True" not in str(branch.value) and "Drop it" not in str(branch.value)
    with pytest.raises(AirflowFailException, match="already has a branch 'main'"):
        IcebergTagOperator(task_id="t", table="sales.events", tag="main", replace=True).execute({})
    with pytest.raises(AirflowFailException, match=r"has no snapshot 5.*leave out snapshot_id"):
        IcebergTagOperator(task_id="t", table="sales.events", tag="u", snapshot_id="5").execute({})
    with pytest.raises(AirflowFailException, match=r"max_age='soon' is not an age"):
        IcebergTagOperator(task_id="t", table="sales.events", tag="u", max_age="soon").execute({})
    with pytest.raises(AirflowFailException, match=r"max_age='99999999999999999999d' is longer than"):
        IcebergTagOperator(task_id="t", table="sales.events", tag="u", max_age="99999999999999999999d").execute({})
    with pytest.raises(AirflowFailException, match=r"Table 'sales\.nope' does not exist"):
        IcebergTagOperator(task_id="t", table="sales.nope", tag="u").execute({})
    assert sorted(catalog.load_table("sales.events").refs()) == ["main", "t"]
    # An unset param renders empty or "None": no age limit, as if not given.
    unset = IcebergTagOperator(task_id="t", table="sales.events", tag="v", max_age="None").execute({})
    assert unset["created"] and unset["ref"]["max_age_ms"] is None
