"""Migrate a namespace, then load a batch into a migrated table, then report the table's snapshot.

Works unchanged against any catalog the ``iceberg_ops_default`` connection points at; ``make demo``
points it at the embedded SQLite catalog in ``local_data/``. Trigger with
``{"namespace": "other"}`` as run config to migrate and load another namespace.

The load task updates the asset of the orders table: its event carries the table loaded, the
snapshot the load left and the rows it inserted and updated, and the DAG ``loaded_orders_report``
(``loaded_orders_report.py``) is scheduled on it: unpause it before the load runs, since Airflow
starts no run for asset events that arrive while the consumer is paused. The asset names the default namespace's table;
the event's ``table`` says which table a run really loaded.
"""

from __future__ import annotations

import decimal
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pyarrow as pa
from airflow.sdk import dag, get_current_context, task

from iceberg_ops_provider.assets import iceberg_asset
from iceberg_ops_provider.operators.migrate import IcebergMigrateOperator

MIGRATIONS = Path(__file__).parent / "migrations"
# "lake" is what these example DAGs call the catalog of the iceberg_ops_default connection.
ORDERS = iceberg_asset("lake", "demo.orders")


@dag(
    schedule=None,
    start_date=datetime(2026, 1, 1, tzinfo=UTC),
    catchup=False,
    params={"namespace": "demo"},
    tags=["iceberg-ops", "example"],
)
def migrate_then_load():
    migrate = IcebergMigrateOperator(
        task_id="migrate",
        namespace="{{ params.namespace }}",
        migrations_dir=str(MIGRATIONS),
        retries=2,
        retry_delay=timedelta(seconds=30),
    )

    @task(outlets=[ORDERS])
    def load(namespace: str) -> dict:
        from iceberg_ops_provider.core.upsert import upsert
        from iceberg_ops_provider.hooks.catalog import IcebergCatalogHook

        table = IcebergCatalogHook().get_conn().load_table(f"{namespace}.orders")
        start = datetime(2026, 11, 1, tzinfo=UTC)
        batch = pa.table(
            {
                "id": pa.array(range(1, 7), pa.int64()),
                "customer": ["ada", "bo", "cy", "di", "ed", "flo"],
                "channel": ["web", "shop", "web", "phone", "web", "shop"],
                "amount": [decimal.Decimal(f"{n}.50") for n in range(1, 7)],
                "ts": [start + timedelta(days=n % 3) for n in range(6)],
            }
        )
        result = upsert(table, batch, snapshot_properties={"loaded-by": "migrate_then_load"})
        snapshot = table.refresh().current_snapshot()
        get_current_context()["outlet_events"][ORDERS].extra = {
            "table": f"{namespace}.orders",
            "snapshot_id": snapshot.snapshot_id if snapshot else None,
            "rows": result.rows_inserted + result.rows_updated,
            "inserted": result.rows_inserted,
            "updated": result.rows_updated,
        }
        return {"inserted": result.rows_inserted, "updated": result.rows_updated}

    @task
    def report(namespace: str, loaded: dict) -> dict:
        from iceberg_ops_provider.hooks.catalog import IcebergCatalogHook

        table = IcebergCatalogHook().get_conn().load_table(f"{namespace}.orders")
        snapshot = table.current_snapshot()
        summary = {
            "table": f"{namespace}.orders",
            "snapshot_id": snapshot.snapshot_id if snapshot else None,
            "total_records": int(snapshot.summary.get("total-records", 0)) if snapshot and snapshot.summary else 0,
            **loaded,
        }
        print(f"{summary['table']}: snapshot {summary['snapshot_id']}, {summary['total_records']} rows")
        return summary

    namespace = "{{ params.namespace }}"
    loaded = load(namespace)
    migrate >> loaded
    report(namespace, loaded)


migrate_then_load()
