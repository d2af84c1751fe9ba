"""A tour of the iceberg-ops core on the embedded SQLite catalog in ./local_data (run by `make demo`).

Creates a day-partitioned table, loads rows, evolves its schema within the rules Iceberg allows,
shows a forbidden change being refused, upserts, and reads the table as it was before. Safe to run
again: it starts from a fresh table each time.
"""

from __future__ import annotations

import contextlib
import decimal
from datetime import UTC, datetime, timedelta

import pyarrow as pa
from pyiceberg.exceptions import NoSuchTableError
from pyiceberg.partitioning import PartitionField, PartitionSpec
from pyiceberg.transforms import DayTransform

from iceberg_ops_provider.core.catalog import CatalogFactory
from iceberg_ops_provider.core.contract import conform_to_table
from iceberg_ops_provider.core.evolution import evolve_schema
from iceberg_ops_provider.core.snapshots import list_snapshots, read_table
from iceberg_ops_provider.core.types import arrow_to_iceberg_schema
from iceberg_ops_provider.core.upsert import upsert
from iceberg_ops_provider.errors import ForbiddenPromotionError

TABLE = "demo.orders"
ORDERS = pa.schema(
    [
        pa.field("id", pa.int64(), nullable=False),
        pa.field("customer", pa.string()),
        pa.field("amount", pa.decimal128(12, 2)),
        pa.field("ts", pa.timestamp("us", tz="UTC")),
    ]
)


def main() -> None:
    catalog = CatalogFactory.build("sqlite")  # ./local_data/iceberg_catalog.db + ./local_data/iceberg_warehouse
    catalog.create_namespace_if_not_exists("demo")
    with contextlib.suppress(NoSuchTableError):
        catalog.drop_table(TABLE)
    schema = arrow_to_iceberg_schema(ORDERS)
    spec = PartitionSpec(PartitionField(schema.find_field("ts").field_id, 1000, DayTransform(), "ts_day"))
    table = catalog.create_table(TABLE, schema, partition_spec=spec)
    with table.update_schema() as update:
        update.set_identifier_fields("id")
    print(f"created {TABLE} at {table.location()}")

    start = datetime(2026, 11, 1, tzinfo=UTC)
    rows = pa.table(
        {
            "id": pa.array(range(1, 7), pa.int32()),
            "customer": ["ada", "bo", "cy", "di", "ed", "flo"],
            "amount": [decimal.Decimal(f"{n}.50") for n in range(1, 7)],
            "ts": [start + timedelta(days=n % 3) for n in range(6)],
        }
    )
    table.append(conform_to_table(rows, table))
    print(f"loaded {rows.num_rows} rows into {len(table.inspect.files())} data files (one per day)")

    plan = evolve_schema(
        table, pa.schema([*ORDERS, pa.field("channel", pa.string())]).set(2, pa.field("amount", pa.decimal128(18, 2)))
    )
    print("evolved schema:", ", ".join(str(change) for change in plan.apply))
    try:
        evolve_schema(table, pa.schema([pa.field("amount", pa.decimal128(18, 4))]))
    except ForbiddenPromotionError as refused:
        print("refused as expected:", refused)

    before_upsert = table.current_snapshot().snapshot_id
    changes = pa.table(
        {
            "id": [2, 7],
            "customer": ["bo", "gus"],
            "amount": [decimal.Decimal("20.00"), decimal.Decimal("7.00")],
            "ts": [start, start + timedelta(days=1)],
            "channel": ["web", "shop"],
        }
    )
    result = upsert(table, changes)
    print(f"upsert: {result.rows_updated} updated, {result.rows_inserted} inserted")

    print(
        f"rows now: {table.scan().to_arrow().num_rows}; before the upsert: "
        f"{read_table(table, snapshot_id=before_upsert).num_rows}"
    )
    for snapshot in list_snapshots(table):
        marker = "*" if snapshot.is_current else " "
        print(
            f" {marker} {snapshot.snapshot_id} {snapshot.operation:<9} {snapshot.committed_at:%H:%M:%S} "
            f"records={snapshot.summary.get('total-records')}"
        )


if __name__ == "__main__":
    main()
