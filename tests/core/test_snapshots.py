"""Snapshots, time travel and rollback on a real table."""

from __future__ import annotations

import time
from datetime import UTC, datetime, timedelta

import pyarrow as pa
import pytest

from iceberg_ops_provider.core.snapshots import iter_batches, list_snapshots, read_table, rollback_to, snapshot_as_of
from iceberg_ops_provider.core.types import FIELD_ID_KEY
from iceberg_ops_provider.errors import IcebergOpsError, SnapshotNotFoundError

SCHEMA = pa.schema([pa.field("n", pa.int64(), nullable=False), pa.field("tag", pa.string())])


@pytest.fixture
def history(catalog, namespace):
    """A table with three appends, a few milliseconds apart."""
    table = catalog.create_table(f"{namespace}.events", SCHEMA)
    for batch in ([1, 2], [3], [4, 5, 6]):
        table.append(pa.table({"n": batch, "tag": [f"t{n}" for n in batch]}, schema=SCHEMA))
        time.sleep(0.01)
    return table


def test_list_snapshots_oldest_first_with_the_current_marked(history):
    snapshots = list_snapshots(history)
    assert len(snapshots) == 3
    assert [s.operation for s in snapshots] == ["append"] * 3
    assert [s.is_current for s in snapshots] == [False, False, True]
    assert snapshots[1].parent_id == snapshots[0].snapshot_id
    assert snapshots[2].summary["added-records"] == "3"
    assert snapshots[0].committed_at.tzinfo is UTC


def test_read_as_of_a_snapshot_id_and_a_timestamp(history):
    first, second, _third = list_snapshots(history)
    assert sorted(read_table(history, snapshot_id=first.snapshot_id).column("n").to_pylist()) == [1, 2]
    assert sorted(read_table(history, as_of=second.committed_at).column("n").to_pylist()) == [1, 2, 3]
    assert read_table(history).num_rows == 6
    just_before_second = second.committed_at - timedelta(microseconds=1)
    assert snapshot_as_of(history, just_before_second).snapshot_id == first.snapshot_id
    assert snapshot_as_of(history, int(second.committed_at.timestamp() * 1000)).snapshot_id == second.snapshot_id


def test_iter_batches_streams_per_file_with_filter_projection_and_no_field_ids(history):
    batches = list(iter_batches(history, row_filter="n >= 3", selected_fields=["n"]))
    assert len(batches) >= 2  # one or more per data file
    values = sorted(v for b in batches for v in b.column("n").to_pylist())
    assert values == [3, 4, 5, 6]
    for batch in batches:
        assert batch.schema.names == ["n"]
        assert not (batch.schema.field("n").metadata or {}).get(FIELD_ID_KEY)


def test_time_travel_errors(history):
    first = list_snapshots(history)[0]
    with pytest.raises(SnapshotNotFoundError, match=r"had no snapshot at .*its first snapshot is from"):
        read_table(history, as_of=first.committed_at - timedelta(days=1))
    with pytest.raises(SnapshotNotFoundError, match="has no snapshot 42"):
        iter_batches(history, snapshot_id=42)  # raised before iterating
    with pytest.raises(IcebergOpsError, match="either snapshot_id or as_of"):
        read_table(history, snapshot_id=first.snapshot_id, as_of=first.committed_at)
    with pytest.raises(IcebergOpsError, match="no time zone"):
        snapshot_as_of(history, datetime(2026, 1, 1))


def test_rollback_to_an_ancestor_and_undo_it(history):
    first, _second, third = list_snapshots(history)
    rolled = rollback_to(history, first.snapshot_id)
    assert rolled.snapshot_id == first.snapshot_id and rolled.is_current
    assert history.scan().to_arrow().num_rows == 2
    # Later snapshots are still there, but no longer ancestors of the current one.
    assert len(list_snapshots(history)) == 3
    with pytest.raises(SnapshotNotFoundError, match="not an ancestor"):
        rollback_to(history, third.snapshot_id)
    # Undo by setting the later snapshot current again through PyIceberg.
    history.manage_snapshots().set_current_snapshot(third.snapshot_id).commit()
    assert history.scan().to_arrow().num_rows == 6
    assert rollback_to(history, as_of=first.committed_at).snapshot_id == first.snapshot_id
    with pytest.raises(IcebergOpsError, match="Pass the snapshot_id"):
        rollback_to(history)
