"""Runs whenever ``migrate_then_load`` loads orders: reads the load's asset event, then the table as loaded.

Scheduled on the orders table's asset (``iceberg_asset("lake", "demo.orders")``, built exactly as the
producer builds it). The event's extra names the table the load wrote and the snapshot it left; the
report reads the table at that snapshot (later writes do not change what it reports), and a health
check of the table follows, so a load that leaves many small files is noticed.

A run triggered by the asset reads the events that triggered it; a run started by hand reads the
latest event of the asset.
"""

from __future__ import annotations

from datetime import UTC, datetime

from airflow.sdk import dag, task

from iceberg_ops_provider.assets import iceberg_asset
from iceberg_ops_provider.operators.maintenance import IcebergTableHealthOperator

ORDERS = iceberg_asset("lake", "demo.orders")


@dag(
    schedule=[ORDERS],
    start_date=datetime(2026, 1, 1, tzinfo=UTC),
    catchup=False,
    tags=["iceberg-ops", "example", "assets"],
)
def loaded_orders_report():
    @task(inlets=[ORDERS])
    def read_load(triggering_asset_events=None, inlet_events=None) -> dict:
        """The latest load's extra, and the table read at the snapshot that load left."""
        from iceberg_ops_provider.hooks.catalog import IcebergCatalogHook

        events = list(triggering_asset_events[ORDERS]) if triggering_asset_events else []
        if not events:  # started by hand: the latest event of the asset
            events = list(inlet_events[ORDERS])[-1:]
        if not events:
            raise ValueError("The orders asset has no event yet: run migrate_then_load first.")
        extra = dict(events[-1].extra)
        table = IcebergCatalogHook().get_conn().load_table(extra["table"])
        loaded = table.scan(snapshot_id=extra["snapshot_id"]).to_arrow()
        report = {**extra, "rows_at_snapshot": loaded.num_rows}
        print(f"{extra['table']} at snapshot {extra['snapshot_id']}: {loaded.num_rows} rows after the load")
        return report

    loaded = read_load()
    health = IcebergTableHealthOperator(task_id="health", table="{{ ti.xcom_pull(task_ids='read_load')['table'] }}")
    loaded >> health


loaded_orders_report()
