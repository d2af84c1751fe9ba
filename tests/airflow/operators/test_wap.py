"""IcebergDataMoveOperator(branch=...), IcebergAuditOperator and IcebergPublishOperator under a real Airflow."""

from __future__ import annotations

import pyarrow as pa
import pytest

from tests.airflow.conftest import catalog_at, xcom

SCHEMA = pa.schema([pa.field("id", pa.int64()), pa.field("customer", pa.string()), pa.field("amount", pa.int64())])


def _orders(root, amounts: list[int]):
    catalog = catalog_at(root)
    catalog.create_namespace_if_not_exists("staging")
    catalog.create_namespace_if_not_exists("sales")
    rows = {"id": list(range(len(amounts))), "customer": ["c"] * len(amounts), "amount": amounts}
    catalog.create_table("staging.orders", SCHEMA).append(pa.table(rows, schema=SCHEMA))
    catalog.create_table("sales.orders", SCHEMA).append(
        pa.table({"id": [100], "customer": ["x"], "amount": [1]}, schema=SCHEMA)
    )
    return catalog


def _main_ids(catalog) -> list[int]:
    return sorted(catalog.load_table("sales.orders").scan().to_arrow().column("id").to_pylist())


def test_a_dag_moves_to_a_branch_audits_and_publishes_once(run_dag, iceberg_connection, task_log):
    catalog = _orders(iceberg_connection, [5, 6, 7])
    run = run_dag("iceberg_ops_wap")
    assert str(run.state) == "success"
    assert xcom(run, "move")["move_id"] == "orders-backfill"
    report = xcom(run, "audit")
    assert report["ok"] is True and report["rows"] == 3
    assert {check["name"] for check in report["checks"]} >= {"customer set", "not_null(id)", "unique(id)"}
    assert xcom(run, "publish")["how"] == "fast_forward"
    assert xcom(run, "publish_again")["how"] == "already_published"  # a second publish commits nothing
    assert _main_ids(catalog) == [0, 1, 2, 100]
    assert "backfill" not in catalog.load_table("sales.orders").refs()
    assert "Audit of move orders-backfill on branch backfill of sales.orders: passed" in task_log()


def test_a_failing_audit_fails_the_task_with_the_report_in_xcom_and_the_log(run_dag, iceberg_connection, task_log):
    catalog = _orders(iceberg_connection, [5, -6, 7])
    run = run_dag("iceberg_ops_wap")
    assert str(run.state) == "failed"
    audit = run.get_task_instance("audit")
    assert str(audit.state) == "failed" and audit.try_number == 1
    report = audit.xcom_pull(task_ids="audit", key="report")
    failed = [check for check in report["checks"] if check["failed_rows"]]
    assert report["ok"] is False and [check["name"] for check in failed] == ["no_rows_where(amount < 0)"]
    assert failed[0]["sample"] == [{"id": 1, "customer": "c", "amount": -6}]
    assert str(run.get_task_instance("publish").state) == "upstream_failed"
    log = task_log()
    assert "FAILED (1 of 5 checks)" in log and "{'id': 1, 'customer': 'c', 'amount': -6}" in log
    assert _main_ids(catalog) == [100]  # main untouched, the branch kept
    assert "backfill" in catalog.load_table("sales.orders").refs()


def test_the_operators_fail_at_once_with_words_for_the_task(iceberg_connection):
    from airflow.sdk.exceptions import AirflowFailException

    from iceberg_ops_provider.operators.data_move import IcebergDataMoveOperator
    from iceberg_ops_provider.operators.wap import IcebergAuditOperator, IcebergPublishOperator

    _orders(iceberg_connection, [1, 2])
    move = {"source": "staging.orders", "target": "sales.orders"}
    with pytest.raises(AirflowFailException, match="branch='main' cannot be main"):
        IcebergDataMoveOperator(task_id="m", **move, move_id="m", branch="main").execute({})
    # A branch param left unset renders empty: refused, not a move straight to main without its audit.
    with pytest.raises(AirflowFailException, match=r"branch=' ' is empty .*leave branch out \(None\)"):
        IcebergDataMoveOperator(task_id="m", **move, move_id="m", branch=" ").execute({})
    assert _main_ids(catalog_at(iceberg_connection)) == [100]
    IcebergDataMoveOperator(task_id="m", **move, move_id="m", branch="b").execute({})
    with pytest.raises(AirflowFailException, match=r"PublishRefusedError: .*no audit passed.*audit it first"):
        IcebergPublishOperator(task_id="p", **move, move_id="m", branch="b").execute({})
    with pytest.raises(AirflowFailException, match="move_id is empty"):
        IcebergAuditOperator(task_id="a", **move, move_id="", branch="b").execute({})
    with pytest.raises(AirflowFailException, match=r"min_rows='many' is not a number of rows"):
        IcebergAuditOperator(task_id="a", **move, move_id="m", branch="b", min_rows="many").execute({})
    with pytest.raises(AirflowFailException, match=r"not_null='\[id' is not a list of column names: render it as JSON"):
        IcebergAuditOperator(task_id="a", **move, move_id="m", branch="b", not_null="[id").execute({})
    # A list param rendered by plain Jinja reads as Python's repr of it.
    listed = IcebergAuditOperator(task_id="a", **move, move_id="m", branch="b", unique="[['id', 'customer']]")
    assert [check["name"] for check in listed.execute({})["checks"]] == ["unique(id, customer)"]
    with pytest.raises(ValueError, match="scope='all' is not an audit scope"):
        IcebergAuditOperator(task_id="a", **move, move_id="m", branch="b", scope="all")
    audit = IcebergAuditOperator(task_id="a", **move, move_id="m", branch="b", min_rows="2")
    report = audit.execute({})
    assert report["ok"] and audit.lineage_outputs == ()
    assert [(t.table, t.snapshot_id) for t in audit.lineage_inputs] == [("sales.orders", report["snapshot_id"])]
    publish = IcebergPublishOperator(task_id="p", **move, move_id="m", branch="b")
    published = publish.execute({})
    assert published["how"] == "fast_forward" and publish.lineage_inputs == ()
    assert [(t.table, t.snapshot_id) for t in publish.lineage_outputs] == [("sales.orders", published["main_after"])]


def test_a_discard_task_drops_the_branch_once_and_leaves_main_untouched(iceberg_connection):
    from iceberg_ops_provider.operators.data_move import IcebergDataMoveOperator
    from iceberg_ops_provider.operators.wap import IcebergDiscardOperator

    catalog = _orders(iceberg_connection, [1, -2])
    move = {"source": "staging.orders", "target": "sales.orders", "move_id": "m", "branch": "b"}
    IcebergDataMoveOperator(task_id="m", **move).execute({})
    head = catalog.load_table("sales.orders").refs()["b"].snapshot_id
    discarded = IcebergDiscardOperator(task_id="d", **move).execute({})
    assert discarded["dropped"] is True and discarded["snapshot_id"] == head
    table = catalog.load_table("sales.orders")
    assert "b" not in table.refs() and not [key for key in table.properties if key.startswith("iceberg-ops.branch.")]
    assert _main_ids(catalog) == [100]
    again = IcebergDiscardOperator(task_id="d", **move).execute({})  # a retry: nothing left to do
    assert again["dropped"] is False and _main_ids(catalog) == [100]
