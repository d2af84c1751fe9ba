"""Migrate a table in two steps with a load between them: the second migration adds a column and backfills it.

On a namespace without the payments table, ``migrate_base`` brings it to ``0001`` (the table) and ``seed``
loads payments; later runs skip both. ``migrate`` then applies ``0002``, which adds ``fee_cents`` and
fills it for every row as a tracked data step: its progress (units, rows, rate) is in the task's log, and
a retried task continues the backfill where it stopped. Trigger with ``{"namespace": "other"}`` to run
it on another namespace.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

from airflow.sdk import dag, task

from iceberg_ops_provider.operators.migrate import IcebergMigrateOperator

MIGRATIONS = Path(__file__).parent / "migrations_backfill"


@dag(
    schedule=None,
    start_date=datetime(2026, 1, 1, tzinfo=UTC),
    catchup=False,
    params={"namespace": "payments_demo"},
    tags=["iceberg-ops", "example"],
)
def migrate_and_backfill():
    namespace = "{{ params.namespace }}"
    base = IcebergMigrateOperator(
        task_id="migrate_base", namespace=namespace, migrations_dir=str(MIGRATIONS), target="0001"
    )
    migrate = IcebergMigrateOperator(
        task_id="migrate",
        namespace=namespace,
        migrations_dir=str(MIGRATIONS),
        retries=2,
        retry_delay=timedelta(seconds=30),
        trigger_rule="none_failed",  # also after a run that skipped the first two tasks
    )

    @task.short_circuit(ignore_downstream_trigger_rules=False)
    def new_namespace(namespace: str) -> bool:
        from iceberg_ops_provider.hooks.catalog import IcebergCatalogHook

        return not IcebergCatalogHook().get_conn().table_exists(f"{namespace}.payments")

    @task
    def seed(namespace: str) -> int:
        import pyarrow as pa

        from iceberg_ops_provider.hooks.catalog import IcebergCatalogHook

        table = IcebergCatalogHook().get_conn().load_table(f"{namespace}.payments")
        if table.current_snapshot() is not None:
            return 0  # a retried task: seeded already
        rows = 3000
        countries = ["DE", "FR", "US", "BR", "JP"]
        batch = pa.table(
            {
                "id": pa.array(range(rows), pa.int64()),
                "country": [countries[i % len(countries)] for i in range(rows)],
                "amount_cents": [None if i % 97 == 0 else 100 + i * 7 for i in range(rows)],
            },
            schema=table.schema().as_arrow(),
        )
        table.append(batch)
        return rows

    new_namespace(namespace) >> base >> seed(namespace) >> migrate


migrate_and_backfill()
