"""Backfill a table from another, one date range at a time: each range a resumable, verified move.

The run config's ``start`` and ``end`` days pick ranges of ``days`` days (``7``: Monday-to-Sunday
weeks); each range is one move (``where`` on ``date_column``) whose ``move_id`` names its dates. A
plan task per range lists the move's units, one mapped move task per unit runs them on Airflow's
workers, and a verify task per range compares checksums once its units are in.

Every task is safe to retry and the DAG safe to run again: committed units are never written twice,
and a range moved before moves only the rows appended to the source since (``mode="incremental"``).
Keep ``days`` once dates are moved: ranges of another length are other moves and would copy those
dates again.

``demo_source`` fills a small demo table when the source does not exist (``make demo``'s connection
points at the embedded SQLite catalog in ``local_data/``); remove it when moving your own table.
Trigger with e.g. ``{"source": "sales.events", "target": "sales.events_v2", "start": "2026-01-01",
"end": "2026-03-31"}``.
"""

from __future__ import annotations

from datetime import UTC, date, datetime, timedelta

from airflow.sdk import dag, task

from iceberg_ops_provider.operators.data_move import (
    IcebergDataMoveOperator,
    IcebergMovePlanOperator,
    IcebergMoveVerifyOperator,
)

# What every task of a range gets: the same tables and, per range, the same `where` (a unit only runs under its plan).
# "incremental": a range moved before moves only the rows appended to the source since (late data), never twice.
MOVE = {"source": "{{ params.source }}", "target": "{{ params.target }}", "create_target": True, "mode": "incremental"}
RETRIES = {"retries": 2, "retry_delay": timedelta(seconds=30)}


@dag(
    schedule=None,
    start_date=datetime(2026, 1, 1, tzinfo=UTC),
    catchup=False,
    params={
        "source": "demo.events",
        "target": "demo.events_v2",
        "date_column": "day",
        "start": "2026-11-02",
        "end": "2026-11-15",
        "days": 7,
    },
    tags=["iceberg-ops", "example", "data-mover"],
)
def backfill_with_mover():
    @task
    def demo_source(source: str) -> dict:
        """DEMO DATA ONLY: create and fill a small source table when it does not exist (yours is left alone).

        Logs and returns what it found or created: the table, its rows and its current snapshot.
        """
        import pyarrow as pa

        from iceberg_ops_provider.hooks.catalog import IcebergCatalogHook

        catalog = IcebergCatalogHook().get_conn()
        if catalog.table_exists(source):
            snapshot = catalog.load_table(source).current_snapshot()
            rows = int(snapshot.summary["total-records"]) if snapshot and snapshot.summary else 0
            found = {"table": source, "created": False, "rows": rows, "snapshot_id": snapshot and snapshot.snapshot_id}
            print(f"{source} exists ({rows:,} rows, snapshot {found['snapshot_id']}): left as it is")
            return found
        catalog.create_namespace_if_not_exists(source.rsplit(".", 1)[0])
        schema = pa.schema([("id", pa.int64()), ("day", pa.date32()), ("kind", pa.string())])
        table = catalog.create_table(source, schema)
        for n in range(21):  # three weeks from Monday 2026-11-02, 100 rows a day, one file per day
            day = date(2026, 11, 2) + timedelta(days=n)
            rows = {"id": range(n * 100, n * 100 + 100), "day": [day] * 100, "kind": ["click", "view"] * 50}
            table.append(pa.table(rows, schema=schema))
        snapshot_id = table.current_snapshot().snapshot_id
        print(f"created demo table {source}: 2,100 rows (100 a day, 2026-11-02 to 2026-11-22), snapshot {snapshot_id}")
        return {"table": source, "created": True, "rows": 2100, "snapshot_id": snapshot_id}

    @task
    def date_ranges(column: str, start: str, end: str, days: int) -> list[dict]:
        """The ranges holding ``start`` to ``end``: their filters and move ids.

        Whole ranges of ``days`` days counted from a Monday, so a date always falls in the same range
        (the same move) whatever start and end a run is given.
        """
        step, anchor = timedelta(days=int(days)), date(2000, 1, 3)
        low = anchor + (date.fromisoformat(start) - anchor) // step * step
        ranges = []
        while low <= date.fromisoformat(end):
            high = low + step
            where = f"{column} >= '{low}' and {column} < '{high}'"
            ranges.append({"where": where, "move_id": f"backfill:{column}:{low}:{high}"})
            low = high
        return ranges

    @task
    def units_to_run(ranges: list[dict], plans: list[list[list[dict]]]) -> list[dict]:
        """The move tasks to map: each batch of pending units with its range's filter."""
        return [{"where": r["where"], "units": units} for i, r in enumerate(ranges) for units in plans[i]]

    ranges = date_ranges("{{ params.date_column }}", "{{ params.start }}", "{{ params.end }}", "{{ params.days }}")
    plan = IcebergMovePlanOperator.partial(task_id="plan", **MOVE).expand_kwargs(ranges)
    move = IcebergDataMoveOperator.partial(task_id="move", **MOVE, **RETRIES).expand_kwargs(
        units_to_run(ranges, plan.output)
    )
    # Runs when no move failed; a range with nothing pending skips its move tasks, not its verification.
    verify = IcebergMoveVerifyOperator.partial(task_id="verify", **MOVE, trigger_rule="none_failed").expand_kwargs(
        ranges
    )
    demo_source("{{ params.source }}") >> ranges
    move >> verify


backfill_with_mover()
