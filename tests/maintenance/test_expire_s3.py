"""expire_snapshots on real object stores: the objects it deletes are exactly the unreachable ones."""

from __future__ import annotations

from datetime import UTC, datetime

import pyarrow as pa
import pytest
from pyiceberg.expressions import LessThan

from iceberg_ops_provider.maintenance import expire_snapshots

pytestmark = pytest.mark.backends


def test_expiry_deletes_the_unreachable_objects_and_keeps_every_retained_snapshot_readable(s3_catalog):
    catalog = s3_catalog.catalog
    catalog.create_namespace("sales")
    table = catalog.create_table("sales.events", pa.schema([pa.field("id", pa.int64())]))
    for batch in range(4):
        table.append(pa.table({"id": pa.array(range(batch * 5, batch * 5 + 5), pa.int64())}))
    table.delete(LessThan("id", 5))
    tagged = table.snapshots()[1].snapshot_id
    table.manage_snapshots().create_tag(tagged, "audit").commit()
    tagged_rows = sorted(table.scan(snapshot_id=tagged).to_arrow().column("id").to_pylist())
    before = s3_catalog.keys("warehouse/sales/events/")

    planned = expire_snapshots(table, older_than=datetime.now(UTC), dry_run=True)
    assert s3_catalog.keys("warehouse/sales/events/") == before
    result = expire_snapshots(table, older_than=datetime.now(UTC))

    assert result.expired_snapshot_ids == planned.expired_snapshot_ids and len(result.expired_snapshot_ids) == 3
    deleted = before - s3_catalog.keys("warehouse/sales/events/")
    assert len(deleted) == result.deleted_files_count and result.failed_deletes == []
    # The tag keeps snapshot 2's files (ids 0..9); the first file (ids 0..4) is still needed by it.
    assert result.deleted_data_files_count == 0
    assert sorted(table.scan(snapshot_id=tagged).to_arrow().column("id").to_pylist()) == tagged_rows
    assert sorted(table.scan().to_arrow().column("id").to_pylist()) == list(range(5, 20))

    table.manage_snapshots().remove_tag("audit").commit()
    freed = expire_snapshots(table, older_than=datetime.now(UTC))
    assert freed.deleted_data_files_count == 1  # ids 0..4, needed by the tag only
    assert sorted(table.scan().to_arrow().column("id").to_pylist()) == list(range(5, 20))
