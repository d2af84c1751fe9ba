"""expire_snapshots: which snapshots go, which files are deleted, and that nothing retained breaks."""

from __future__ import annotations

import os
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pyarrow as pa
import pytest
from pyiceberg.expressions import EqualTo, LessThan
from pyiceberg.table.statistics import BlobMetadata, PartitionStatisticsFile, StatisticsFile
from pyiceberg.table.update import SetPartitionStatisticsUpdate, SetStatisticsUpdate

from iceberg_ops_provider.maintenance import expire as expire_module
from iceberg_ops_provider.maintenance import expire_snapshots

SCHEMA = pa.schema([pa.field("id", pa.int64()), pa.field("name", pa.string())])


def _rows(start: int, count: int) -> pa.Table:
    return pa.table({"id": pa.array(range(start, start + count), pa.int64()), "name": [f"n{i}" for i in range(count)]})


def _files(root: Path) -> set[str]:
    return {os.path.join(d, f) for d, _, files in os.walk(root) for f in files}


def _table_with_history(catalog, name: str = "sales.events"):
    """Five appends, then a delete: six snapshots, the first five holding files the last no longer lists."""
    catalog.create_namespace_if_not_exists("sales")
    table = catalog.create_table(name, SCHEMA)
    for batch in range(5):
        table.append(_rows(batch * 10, 10))
    table.delete(EqualTo("id", 3))
    return table


def _ids(table) -> list[int]:
    return sorted(table.scan().to_arrow().column("id").to_pylist())


def test_expiry_deletes_exactly_the_files_no_retained_snapshot_reaches(catalog, tmp_path: Path):
    table = _table_with_history(catalog)
    root = tmp_path / "warehouse" / "sales" / "events"
    before_files, expected_ids = _files(root), _ids(table)
    first = table.snapshots()[0]

    result = expire_snapshots(table, older_than=datetime.now(UTC), retain_last=1)

    assert [s.snapshot_id for s in table.snapshots()] == [table.current_snapshot().snapshot_id]
    assert len(result.expired_snapshot_ids) == 5 and first.snapshot_id in result.expired_snapshot_ids
    deleted = before_files - _files(root)
    assert len([p for p in deleted if p.endswith(".parquet")]) == result.deleted_data_files_count == 1  # ids 0..9
    assert result.deleted_manifest_lists_count == 5
    assert len([p for p in deleted if os.path.basename(p).startswith("snap-")]) == 5
    assert result.failed_deletes == [] and not result.dry_run
    assert _ids(table) == expected_ids  # the current snapshot reads the same rows
    # Every file the remaining snapshot lists is still there.
    assert all(
        os.path.exists(path.removeprefix("file://")) for path in table.inspect.files().column("file_path").to_pylist()
    )
    assert result.to_json()["deleted_files_count"] == result.deleted_files_count == len(deleted)


def test_a_dry_run_reports_what_the_real_run_then_does_and_changes_nothing(catalog, tmp_path: Path):
    table = _table_with_history(catalog)
    root = tmp_path / "warehouse" / "sales" / "events"
    files, snapshots = _files(root), [s.snapshot_id for s in table.snapshots()]
    cutoff = datetime.now(UTC)

    planned = expire_snapshots(table, older_than=cutoff, retain_last=2, dry_run=True)

    assert _files(root) == files and [s.snapshot_id for s in table.snapshots()] == snapshots
    done = expire_snapshots(table, older_than=cutoff, retain_last=2)
    assert planned.dry_run and not done.dry_run
    assert {k: v for k, v in planned.to_json().items() if k != "dry_run"} == {
        k: v for k, v in done.to_json().items() if k != "dry_run"
    }
    assert len(table.snapshots()) == 2


def test_tags_branches_and_time_travel_within_what_is_kept(catalog):
    table = _table_with_history(catalog)
    snapshots = table.snapshots()
    table.manage_snapshots().create_tag(snapshots[1].snapshot_id, "audit").commit()
    table.manage_snapshots().create_branch(snapshots[2].snapshot_id, "dev").commit()
    tagged_rows = sorted(table.scan(snapshot_id=snapshots[1].snapshot_id).to_arrow().column("id").to_pylist())
    kept_for_travel = snapshots[4].snapshot_id  # the parent of the current snapshot
    travel_rows = sorted(table.scan(snapshot_id=kept_for_travel).to_arrow().column("id").to_pylist())

    result = expire_snapshots(table, older_than=datetime.now(UTC), retain_last=2)

    remaining = {s.snapshot_id for s in table.snapshots()}
    assert {snapshots[1].snapshot_id, snapshots[2].snapshot_id, kept_for_travel} <= remaining
    assert snapshots[0].snapshot_id in result.expired_snapshot_ids
    assert sorted(table.scan(snapshot_id=snapshots[1].snapshot_id).to_arrow().column("id").to_pylist()) == tagged_rows
    assert sorted(table.scan(snapshot_id=kept_for_travel).to_arrow().column("id").to_pylist()) == travel_rows
    assert sorted(table.scan().use_ref("dev").to_arrow().column("id").to_pylist()) == list(range(30))
    assert result.deleted_data_files_count == 0  # every data file is still listed by a kept snapshot


def test_table_properties_are_the_defaults_and_refs_past_their_age_are_removed(catalog):
    table = _table_with_history(catalog)
    # Nothing is older than the default max age (5 days): a plain call expires nothing.
    assert expire_snapshots(table).expired_snapshot_ids == []
    with table.transaction() as transaction:
        transaction.set_properties({"history.expire.min-snapshots-to-keep": "3"})
    table.manage_snapshots().create_tag(table.snapshots()[0].snapshot_id, "old", max_ref_age_ms=1).commit()
    time.sleep(0.01)
    result = expire_snapshots(table, older_than=datetime.now(UTC))
    assert result.removed_refs == ["old"] and "old" not in table.refs()
    assert len(table.snapshots()) == 3  # min-snapshots-to-keep wins over retain_last=1
    with table.transaction() as transaction:
        transaction.set_properties({"history.expire.max-snapshot-age-ms": "soon"})
    with pytest.raises(ValueError, match=r"history.expire.max-snapshot-age-ms='soon' is not an integer"):
        expire_snapshots(table)
    with pytest.raises(ValueError, match="retain_last must be at least 1"):
        expire_snapshots(table, retain_last=0)


def test_a_naive_older_than_is_utc(catalog):
    table = _table_with_history(catalog)
    naive_future = datetime.now(UTC).replace(tzinfo=None) + timedelta(minutes=5)
    assert len(expire_snapshots(table, older_than=naive_future).expired_snapshot_ids) == 5


def test_a_commit_that_lands_between_plan_and_commit_makes_it_plan_again(catalog, monkeypatch):
    table = _table_with_history(catalog)
    other = catalog.load_table("sales.events")  # another writer, through its own handle
    real_commit = expire_module._commit
    raced = []

    def commit_after_a_rival_append(table_, plan):
        # The only stand-in here is the timing: the rival's append is a real commit to the catalog.
        if not raced:
            raced.append(True)
            other.append(_rows(100, 5))
        return real_commit(table_, plan)

    monkeypatch.setattr(expire_module, "_commit", commit_after_a_rival_append)
    result = expire_snapshots(table, older_than=datetime.now(UTC))
    assert raced and 104 in _ids(table)  # the rival's rows survive, and are in the kept snapshot
    assert len(table.snapshots()) == 1 and len(result.expired_snapshot_ids) == 6


def test_metadata_only_expiry_keeps_files(catalog, tmp_path: Path):
    table = _table_with_history(catalog)
    root = tmp_path / "warehouse" / "sales" / "events" / "data"
    files = _files(root)
    result = expire_snapshots(table, older_than=datetime.now(UTC), delete_files=False)
    assert len(result.expired_snapshot_ids) == 5 and result.deleted_files_count == 0
    assert _files(root) == files


def test_a_tag_created_on_an_old_snapshot_while_expiry_runs_is_put_back_with_its_files(catalog, monkeypatch):
    table = _table_with_history(catalog)
    old = table.snapshots()[0].snapshot_id
    old_rows = sorted(table.scan(snapshot_id=old).to_arrow().column("id").to_pylist())
    other = catalog.load_table("sales.events")
    real_commit = expire_module._commit

    def commit_after_a_rival_tag(table_, plan):
        # The stand-in is the timing only: the rival's tag is a real commit to the catalog.
        other.manage_snapshots().create_tag(old, "audit-2024").commit()
        return real_commit(table_, plan)

    monkeypatch.setattr(expire_module, "_commit", commit_after_a_rival_tag)
    result = expire_snapshots(table, older_than=datetime.now(UTC))
    table = catalog.load_table("sales.events")
    assert "audit-2024" in table.refs() and table.refs()["audit-2024"].snapshot_id == old
    assert old not in result.expired_snapshot_ids
    assert sorted(table.scan(snapshot_id=old).to_arrow().column("id").to_pylist()) == old_rows  # files kept


def test_older_than_takes_an_age_or_an_iso_timestamp_and_refuses_anything_else(catalog):
    table = _table_with_history(catalog)
    assert len(expire_snapshots(table, older_than="0s", dry_run=True).expired_snapshot_ids) == 5
    assert expire_snapshots(table, older_than="7d", dry_run=True).expired_snapshot_ids == []
    assert expire_snapshots(table, older_than="2000-01-01T00:00:00", dry_run=True).expired_snapshot_ids == []
    with pytest.raises(ValueError, match="older_than='soon' is not a time"):
        expire_snapshots(table, older_than="soon")


def test_a_branch_made_and_written_on_an_old_snapshot_while_expiry_runs_keeps_its_files(catalog, monkeypatch):
    table = _table_with_history(catalog)
    old = table.snapshots()[0].snapshot_id
    other = catalog.load_table("sales.events")
    real_commit = expire_module._commit

    def commit_after_a_rival_branch(table_, plan):
        # Timing is the only stand-in: the rival's branch and append are real commits.
        other.manage_snapshots().create_branch(old, "b").commit()
        other.append(_rows(500, 2), branch="b")
        return real_commit(table_, plan)

    monkeypatch.setattr(expire_module, "_commit", commit_after_a_rival_branch)
    expire_snapshots(table, older_than=datetime.now(UTC))
    table = catalog.load_table("sales.events")
    assert sorted(table.scan().use_ref("b").to_arrow().column("id").to_pylist()) == [*range(10), 500, 501]


def test_a_file_added_again_after_it_was_removed_is_not_deleted(catalog, tmp_path: Path):
    import pyarrow.parquet as pq

    catalog.create_namespace("sales")
    table = catalog.create_table("sales.events", SCHEMA)
    external = tmp_path / "external.parquet"
    pq.write_table(_rows(0, 10), external)
    table.add_files([str(external)])
    table.delete(EqualTo("name", "n1"))  # rewrites the file's rows into a new file, removing it ...
    table.overwrite(_rows(100, 1))  # ... everything goes ...
    table.add_files([str(external)])  # ... and the same file comes back, later in sequence

    expire_snapshots(table, older_than=datetime.now(UTC))
    assert external.exists()
    assert sorted(catalog.load_table("sales.events").scan().to_arrow().column("id").to_pylist()) == [
        *range(10),
        100,
    ]


# --- expire_snapshots on real object stores: the objects it deletes are exactly the unreachable ones.


@pytest.mark.backends
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


# --- expire_snapshots and the statistics files of expired snapshots: table (Puffin) and partition statistics.

IDS_SCHEMA = pa.schema([pa.field("id", pa.int64())])


def _register_statistics(table, folder: Path) -> dict[int, tuple[Path, Path]]:
    """A Puffin and a partition statistics file for every snapshot, registered in the table's metadata."""
    files: dict[int, tuple[Path, Path]] = {}
    updates = []
    for snapshot in table.snapshots():
        puffin = folder / f"{snapshot.snapshot_id}-stats.stats"
        partition = folder / f"partition-stats-{snapshot.snapshot_id}.parquet"
        puffin.write_bytes(b"PFA1 not read by expiry")
        partition.write_bytes(b"PAR1 not read by expiry")
        files[snapshot.snapshot_id] = (puffin, partition)
        blob = BlobMetadata(
            type="apache-datasketches-theta-v1",
            snapshot_id=snapshot.snapshot_id,
            sequence_number=snapshot.sequence_number,
            fields=[1],
            properties={"ndv": "10"},
        )
        updates.append(
            SetStatisticsUpdate(
                statistics=StatisticsFile(
                    snapshot_id=snapshot.snapshot_id,
                    statistics_path=puffin.as_uri(),
                    file_size_in_bytes=puffin.stat().st_size,
                    file_footer_size_in_bytes=4,
                    blob_metadata=[blob],
                )
            )
        )
        updates.append(
            SetPartitionStatisticsUpdate(
                partition_statistics=PartitionStatisticsFile(
                    snapshot_id=snapshot.snapshot_id,
                    statistics_path=partition.as_uri(),
                    file_size_in_bytes=partition.stat().st_size,
                )
            )
        )
    with table.transaction() as transaction:
        transaction._apply(tuple(updates), ())
    table.refresh()
    return files


def test_expiry_removes_and_deletes_both_kinds_of_statistics_of_expired_snapshots(catalog, tmp_path: Path):
    catalog.create_namespace("sales")
    table = catalog.create_table("sales.events", IDS_SCHEMA)
    for batch in range(3):
        table.append(pa.table({"id": pa.array(range(batch * 10, batch * 10 + 10), pa.int64())}))
    files = _register_statistics(table, Path(table.location().removeprefix("file://")) / "metadata")
    current = table.current_snapshot().snapshot_id
    assert len(table.metadata.statistics) == len(table.metadata.partition_statistics) == 3

    cutoff = datetime.now(UTC) + timedelta(seconds=1)
    planned = expire_snapshots(table, older_than=cutoff, retain_last=1, dry_run=True)
    assert len(planned.expired_snapshot_ids) == 2
    # Two expired snapshots, each with a table statistics and a partition statistics file (Spark's count).
    assert planned.deleted_statistics_files_count == 4, planned.to_json()

    done = expire_snapshots(table, older_than=cutoff, retain_last=1)
    assert done.deleted_statistics_files_count == 4 and not done.failed_deletes, done.to_json()
    table = catalog.load_table("sales.events")
    assert [stats.snapshot_id for stats in table.metadata.statistics] == [current]
    assert [stats.snapshot_id for stats in table.metadata.partition_statistics] == [current]
    for snapshot_id, (puffin, partition) in files.items():
        kept = snapshot_id == current
        assert puffin.exists() == kept and partition.exists() == kept, snapshot_id
