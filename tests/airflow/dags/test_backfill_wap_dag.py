"""The example write-audit-publish backfill DAG under a real Airflow: move to a branch, audit, publish."""

from __future__ import annotations

from datetime import date

import pyarrow as pa

from tests.airflow.conftest import catalog_at, xcom

RUN = {"source": "shop.events", "target": "shop.events_v2", "start": "2026-11-02", "end": "2026-11-09"}
BRANCH = "backfill-2026-11-02-2026-11-09"


def test_the_example_publishes_the_audited_range_once_and_a_run_again_changes_nothing(run_dag, iceberg_connection):
    first = run_dag("backfill_write_audit_publish", **RUN)
    assert str(first.state) == "success"
    report = xcom(first, "audit")
    assert report["ok"] is True and report["rows"] == 700  # 7 days of the demo's 100 rows a day
    assert "kinds_known" in {check["name"] for check in report["checks"]}
    assert xcom(first, "publish")["how"] == "fast_forward"
    target = catalog_at(iceberg_connection).load_table("shop.events_v2")
    assert target.scan().to_arrow().num_rows == 700 and BRANCH not in target.refs()

    again = run_dag("backfill_write_audit_publish", **RUN)  # the move is published: nothing to do
    assert str(again.state) == "success"
    assert xcom(again, "move")["units_committed"] == 0
    assert str(again.get_task_instance("audit").state) == "skipped"
    assert str(again.get_task_instance("publish").state) == "skipped"
    assert catalog_at(iceberg_connection).load_table("shop.events_v2").scan().to_arrow().num_rows == 700


def test_a_range_failing_its_audit_leaves_main_of_the_target_untouched(run_dag, iceberg_connection):
    catalog = catalog_at(iceberg_connection)
    catalog.create_namespace("shop")
    schema = pa.schema([("id", pa.int64()), ("day", pa.date32()), ("kind", pa.string())])
    days = [date(2026, 11, 2)] * 3
    catalog.create_table("shop.events", schema).append(
        pa.table({"id": [1, 2, 2], "day": days, "kind": ["click", "buy", "view"]}, schema=schema)
    )
    run = run_dag("backfill_write_audit_publish", **RUN)
    assert str(run.state) == "failed"
    report = run.get_task_instance("audit").xcom_pull(task_ids="audit", key="report")
    failed = {check["name"]: check["failed_rows"] for check in report["checks"] if check["failed_rows"]}
    assert failed == {"unique(id)": 1, "kinds_known": 1}
    target = catalog_at(iceberg_connection).load_table("shop.events_v2")
    assert target.scan().to_arrow().num_rows == 0 and BRANCH in target.refs()
