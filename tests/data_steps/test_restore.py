"""Restore points: the tag taken before a migration's first data step on a table."""

from __future__ import annotations

import pyarrow as pa
from pyiceberg.exceptions import CommitFailedException
from pyiceberg.table.update import SetSnapshotRefUpdate

from iceberg_ops_provider.data_steps.restore import restore_to, tag_restore_point
from tests.data_steps.support import make_table, rows_of


def test_a_tag_that_loses_to_an_append_tags_the_head_the_append_left(lake):
    # The SQL catalog refuses a commit when another lands between its read of the table and its write:
    # here an append lands, then the tag's first commit is refused as the catalog would refuse it.
    catalog = lake.catalog()
    table = make_table(catalog, files_per_region=1, rows=10)
    before = table.metadata.current_snapshot_id
    commit = catalog.commit_table
    refused = []

    def append_first(target, requirements, updates):
        if not refused and any(isinstance(update, SetSnapshotRefUpdate) for update in updates):
            lake.catalog().load_table("sales.orders").append(rows_of(100, 5, "eu"))
            refused.append(True)
            raise CommitFailedException("Table has been updated by another process: sales.orders")
        return commit(target, requirements, updates)

    catalog.commit_table = append_first

    tagged = tag_restore_point(table, "iceberg-ops/sales/0001")

    table = catalog.load_table("sales.orders")
    assert refused and tagged != before
    assert tagged == table.metadata.current_snapshot_id == table.metadata.refs["iceberg-ops/sales/0001"].snapshot_id
    assert table.scan(snapshot_id=tagged).to_arrow().num_rows == 25


def test_a_tag_that_exists_is_kept(lake):
    table = make_table(lake.catalog(), files_per_region=1, rows=10)
    first = tag_restore_point(table, "iceberg-ops/sales/0001")
    table.append(pa.Table.from_batches(rows_of(100, 5, "eu").to_batches()))
    assert tag_restore_point(table, "iceberg-ops/sales/0001") == first != table.metadata.current_snapshot_id


def test_a_restore_keeps_mains_retention_settings_and_removes_the_tag(lake):
    table = make_table(lake.catalog(), files_per_region=1, rows=10)
    tagged = tag_restore_point(table, "iceberg-ops/sales/0001")
    table.append(rows_of(100, 5, "eu"))  # a commit to undo (any commit counts as the step's with the prefix "")
    head = table.metadata.current_snapshot_id
    table.manage_snapshots().create_branch(
        head, "main", min_snapshots_to_keep=3, max_snapshot_age_ms=86_400_000
    ).commit()

    restored = restore_to(table, "iceberg-ops/sales/0001", "")

    table.refresh()
    main = table.metadata.refs["main"]
    assert restored.to_snapshot_id == tagged == main.snapshot_id
    assert (main.min_snapshots_to_keep, main.max_snapshot_age_ms) == (3, 86_400_000)
    assert "iceberg-ops/sales/0001" not in table.metadata.refs
