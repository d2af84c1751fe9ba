"""Backfill a date range through write-audit-publish: move to a branch, audit it, then publish it onto ``main``.

Readers of the target see nothing of the backfill until it passed its audit, then all of it in one
commit. The move commits its units to the branch ``backfill-<start>-<end>`` (resumable: a retry
skips the committed units); the audit checks the rows the move added (ids and days set, ids unique,
no negative ids, at least one row, and a Python check of its own: every ``kind`` known) and fails
the task, without retrying, when a check fails: the report is in its log and in XCom under
``report``, ``main`` is untouched and the branch kept for a look. ``iceberg-ops --conn-id
iceberg_ops_default move discard SOURCE TARGET --move-id backfill:<start>:<end> --branch
backfill-<start>-<end>`` drops it; fix the source and clear the run's tasks to move, audit and
publish the range again. The publish fast-forwards ``main`` to the audited snapshot, or appends the
move's files when others appended to ``main`` meanwhile; run again, it commits nothing (the run's
move task fails instead once the source has changed since: the range is not copied twice).

``demo_source`` fills a small demo table when the source does not exist (``make demo``'s connection
points at the embedded SQLite catalog in ``local_data/``); remove it when moving your own table.
Trigger with e.g. ``{"source": "sales.orders_raw", "target": "sales.orders", "start": "2026-11-02",
"end": "2026-11-09"}`` (``end`` excluded).
"""

from __future__ import annotations

from datetime import UTC, date, datetime, timedelta
from typing import TYPE_CHECKING

from airflow.sdk import dag, task

from iceberg_ops_provider.operators.data_move import IcebergDataMoveOperator
from iceberg_ops_provider.operators.wap import IcebergAuditOperator, IcebergPublishOperator

if TYPE_CHECKING:
    import pyarrow as pa

# What every task gets: the same tables and the same `where`, so the audit and the publish find the move.
MOVE = {
    "source": "{{ params.source }}",
    "target": "{{ params.target }}",
    "where": "{{ params.date_column }} >= '{{ params.start }}' and {{ params.date_column }} < '{{ params.end }}'",
    "branch": "backfill-{{ params.start }}-{{ params.end }}",
}
RETRIES = {"retries": 2, "retry_delay": timedelta(seconds=30)}


def kinds_known(batch: pa.RecordBatch) -> int:
    """A check of this DAG's own: the rows whose ``kind`` is not one the reports know."""
    import pyarrow as pa
    import pyarrow.compute as pc

    known = pc.is_in(batch.column("kind"), value_set=pa.array(["click", "view"]))  # a null kind is not known
    return len(batch) - (pc.sum(known).as_py() or 0)


@dag(
    schedule=None,
    start_date=datetime(2026, 1, 1, tzinfo=UTC),
    catchup=False,
    params={
        "source": "demo.events",
        "target": "demo.events_published",
        "date_column": "day",
        "start": "2026-11-02",
        "end": "2026-11-09",
    },
    tags=["iceberg-ops", "example", "data-mover"],
)
def backfill_write_audit_publish():
    @task
    def demo_source(source: str) -> None:
        """DEMO DATA ONLY: create and fill a small source table when it does not exist (yours is left alone)."""
        import pyarrow as pa

        from iceberg_ops_provider.hooks.catalog import IcebergCatalogHook

        catalog = IcebergCatalogHook().get_conn()
        schema = pa.schema([("id", pa.int64()), ("day", pa.date32()), ("kind", pa.string())])
        if catalog.table_exists(source):
            print(f"{source} exists: left as it is")
            return
        catalog.create_namespace_if_not_exists(source.rsplit(".", 1)[0])
        table = catalog.create_table(source, schema)
        for n in range(21):  # three weeks from Monday 2026-11-02, 100 rows a day
            day = date(2026, 11, 2) + timedelta(days=n)
            rows = {"id": range(n * 100, n * 100 + 100), "day": [day] * 100, "kind": ["click", "view"] * 50}
            table.append(pa.table(rows, schema=schema))
        print(f"created demo table {source}: 2,100 rows, 100 a day from 2026-11-02")

    # A move id per range, not the task instance's default: a run again finds the move published.
    move = IcebergDataMoveOperator(
        task_id="move", move_id="backfill:{{ params.start }}:{{ params.end }}", create_target=True, **MOVE, **RETRIES
    )
    audit = IcebergAuditOperator(
        task_id="audit",
        move_id=move.output["move_id"],
        not_null=["id", "day"],
        unique=["id"],
        no_rows_where="id < 0",
        min_rows=1,
        checks=[kinds_known],
        **MOVE,
        **RETRIES,
    )
    publish = IcebergPublishOperator(task_id="publish", move_id=move.output["move_id"], **MOVE, **RETRIES)
    demo_source("{{ params.source }}") >> move
    audit >> publish


backfill_write_audit_publish()
