"""A tour of iceberg-ops on the embedded SQLite catalog in ./local_data (run by `make demo`).

Migrates the ``demo`` namespace with the files in ``dags_examples/migrations`` (creating a
day-partitioned orders table, then evolving it), loads a batch of orders with an upsert, shows a
change Iceberg forbids being refused, reads the table as it was before the load, and prints the
namespace's migration status and history. Running it again finds nothing pending and loads the same
batch idempotently.
"""

from __future__ import annotations

import decimal
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pyarrow as pa

from iceberg_ops_provider.catalogs import CatalogFactory
from iceberg_ops_provider.core.evolution import check_promotion
from iceberg_ops_provider.core.snapshots import list_snapshots, read_table
from iceberg_ops_provider.core.type_strings import parse_type
from iceberg_ops_provider.core.upsert import upsert
from iceberg_ops_provider.errors import ForbiddenPromotionError
from iceberg_ops_provider.runner import MigrationRunner

MIGRATIONS = Path(__file__).parent / "migrations"
NAMESPACE = "demo"


def _batch() -> pa.Table:
    start = datetime(2026, 11, 1, tzinfo=UTC)
    return pa.table(
        {
            "id": pa.array(range(1, 7), pa.int64()),
            "customer": ["ada", "bo", "cy", "di", "ed", "flo"],
            "channel": ["web", "shop", "web", "phone", "web", "shop"],
            "amount": [decimal.Decimal(f"{n}.50") for n in range(1, 7)],
            "ts": [start + timedelta(days=n % 3) for n in range(6)],
        }
    )


def main() -> None:
    catalog = CatalogFactory.build("sqlite")  # ./local_data/iceberg_catalog.db + ./local_data/iceberg_warehouse
    runner = MigrationRunner(catalog, NAMESPACE, MIGRATIONS, on_event=lambda line: print("  " + line))

    print(f"== migrate namespace {NAMESPACE!r}")
    for step in runner.plan():
        print(f"  plan: {step.direction} {step.version} {step.description}")
    runner.upgrade()

    table = catalog.load_table(f"{NAMESPACE}.orders")
    print(f"== load {table.name()[-1]} (upsert on its identifier field 'id')")
    before = table.current_snapshot()
    result = upsert(table, _batch())
    print(f"  {result.rows_inserted} inserted, {result.rows_updated} updated; {len(table.inspect.files())} data files")

    print("== what Iceberg refuses")
    try:
        check_promotion("amount", parse_type("decimal(18,2)"), parse_type("decimal(18,4)"))
    except ForbiddenPromotionError as refused:
        print(f"  {refused}")

    print("== time travel")
    rows_before = read_table(table, snapshot_id=before.snapshot_id).num_rows if before else 0
    print(f"  rows now: {table.scan().to_arrow().num_rows}; before this load: {rows_before}")
    for snapshot in list_snapshots(table)[-3:]:
        marker = "*" if snapshot.is_current else " "
        print(
            f"  {marker} {snapshot.snapshot_id} {snapshot.operation:<9} records={snapshot.summary.get('total-records')}"
        )

    status = runner.status()
    print(f"== status of {NAMESPACE!r}: current {status.current}, {len(status.pending)} pending")
    for row in runner.history():
        print(f"  {row.version} {row.status:<8} {row.applied_at:%Y-%m-%d %H:%M:%S} {row.description}")


if __name__ == "__main__":
    main()
