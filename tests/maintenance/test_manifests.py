"""rewrite_manifests: few manifests after many appends, data and history untouched, races survived."""

from __future__ import annotations

import logging
import os
import uuid
from datetime import UTC, datetime

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from pyiceberg.expressions import EqualTo
from pyiceberg.manifest import (
    DataFile,
    DataFileContent,
    FileFormat,
    ManifestContent,
    ManifestEntry,
    ManifestEntryStatus,
    write_manifest_list,
)
from pyiceberg.partitioning import PartitionField, PartitionSpec
from pyiceberg.schema import Schema
from pyiceberg.table.refs import MAIN_BRANCH, SnapshotRefType
from pyiceberg.table.snapshots import Operation, Snapshot, Summary
from pyiceberg.table.update import AddSnapshotUpdate, AssertRefSnapshotId, SetSnapshotRefUpdate
from pyiceberg.transforms import IdentityTransform
from pyiceberg.typedef import Record
from pyiceberg.types import LongType, NestedField, StringType

from iceberg_ops_provider.errors import MaintenanceConflictError
from iceberg_ops_provider.maintenance import expire_snapshots
from iceberg_ops_provider.maintenance import manifests as manifests_module
from iceberg_ops_provider.maintenance.manifests import rewrite_manifests
from iceberg_ops_provider.maintenance.rewrite_commit import DeleteManifestWriterV2

SCHEMA = pa.schema([pa.field("id", pa.int64()), pa.field("region", pa.string())])

# Appends (one manifest each) that the first test rewrites into one manifest: several times the
# rewrite's read-ahead of 8 manifests. ICEBERG_OPS_REWRITE_APPENDS=200 runs it at the scale it once had.
MANY_APPENDS = int(os.environ.get("ICEBERG_OPS_REWRITE_APPENDS", "50"))


def _rows(start: int, count: int = 1, region: str = "eu") -> pa.Table:
    return pa.table({"id": pa.array(range(start, start + count), pa.int64()), "region": [region] * count})


def _appended(catalog, appends: int, name: str = "sales.events", **properties: str):
    catalog.create_namespace_if_not_exists("sales")
    table = catalog.create_table(name, SCHEMA, properties=properties)
    for i in range(appends):
        table.append(_rows(i * 10, 10))
    return table


def _ids(table, **scan) -> list[int]:
    return sorted(table.scan(**scan).to_arrow().column("id").to_pylist())


def _manifest_count(table) -> int:
    return len(table.current_snapshot().manifests(table.io))


def _entries(table) -> list[tuple]:
    """What any engine sees of the current snapshot's entries: file, origin snapshot, sequence numbers."""
    entries = table.inspect.entries().to_pylist()
    return sorted(
        (e["data_file"]["file_path"], e["snapshot_id"], e["sequence_number"], e["file_sequence_number"])
        for e in entries
    )


def _planned(table, **scan) -> list[str]:
    return sorted(task.file.file_path for task in table.scan(**scan).plan_files())


def _avro_files(table) -> set[str]:
    folder = table.location().removeprefix("file://") + "/metadata"
    return {name for name in os.listdir(folder) if name.endswith(".avro")}


def test_many_appends_become_one_manifest_and_every_reader_sees_the_same_table(catalog):
    appends = MANY_APPENDS
    catalog.create_namespace("sales")
    table = catalog.create_table("sales.events", SCHEMA)
    travel: dict[int, list[int]] = {}
    for i in range(appends):
        table.append(_rows(i * 10, 10))
        if i in (0, appends // 2 - 1):
            snapshot_id = table.current_snapshot().snapshot_id
            table.manage_snapshots().create_tag(snapshot_id, f"after-{i + 1}").commit()
            travel[snapshot_id] = _ids(table, snapshot_id=snapshot_id)
        if i % 25 == 24:
            # Appending jobs expire as they go (PyIceberg's metadata-only expiry keeps tags and the head):
            # the head still lists one manifest per append, and the test stays fast.
            table.maintenance.expire_snapshots().older_than(datetime.now(UTC)).commit()
    assert _manifest_count(table) == appends
    before_entries, before_files, before_ids = _entries(table), _planned(table), _ids(table)
    parent = table.current_snapshot()

    result = rewrite_manifests(table)

    assert result.rewritten_manifests_count == appends
    assert result.added_manifests_count == _manifest_count(table) == 1
    assert result.processed_entries_count == appends and result.kept_manifests_count == 0
    assert _planned(table) == before_files and _ids(table) == before_ids
    # The same files with the same origin snapshot and sequence numbers, now all EXISTING.
    assert _entries(table) == before_entries
    assert set(table.inspect.entries().column("status").to_pylist()) == {int(ManifestEntryStatus.EXISTING)}
    (manifest,) = table.inspect.manifests().to_pylist()
    assert manifest["existing_data_files_count"] == appends and manifest["added_data_files_count"] == 0
    assert manifest["added_snapshot_id"] == result.snapshot_id
    snapshot = table.current_snapshot()
    assert snapshot.snapshot_id == result.snapshot_id and snapshot.parent_snapshot_id == parent.snapshot_id
    assert snapshot.summary.operation == Operation.REPLACE
    summary = snapshot.summary.additional_properties
    assert summary["manifests-replaced"] == str(appends) and summary["manifests-created"] == "1"
    for total in ("total-records", "total-data-files", "total-files-size"):
        assert summary[total] == parent.summary.additional_properties[total]
    # Time travel reads older snapshots through their own manifest lists.
    assert {sid: _ids(table, snapshot_id=sid) for sid in travel} == travel
    # A fresh handle (another process, another engine) reads the new state from the catalog.
    assert _ids(catalog.load_table("sales.events")) == before_ids
    # Nothing left to do: a second run changes nothing.
    again = rewrite_manifests(table)
    assert again.rewritten_manifests_count == 0 and again.snapshot_id is None
    assert table.current_snapshot().snapshot_id == result.snapshot_id


def test_the_target_size_rolls_manifests_and_comes_from_the_table_property(catalog):
    table = _appended(catalog, 40, **{"commit.manifest.target-size-bytes": "6000"})
    files = _planned(table)

    result = rewrite_manifests(table)

    sizes = table.inspect.manifests().column("length").to_pylist()
    assert result.target_manifest_size_bytes == 6000
    assert 2 <= len(sizes) == result.added_manifests_count < 40
    assert all(size >= 6000 for size in sorted(sizes)[1:])  # rolled at the target; the last one holds the rest
    assert _planned(table) == files
    # Manifests at the target stay as they are: only the small remainder could merge, and it is alone.
    assert rewrite_manifests(table).rewritten_manifests_count == 0
    explicit = rewrite_manifests(table, target_manifest_size_bytes=64 * 1024 * 1024)
    assert explicit.added_manifests_count == _manifest_count(table) == 1 and _planned(table) == files


def test_a_dry_run_reports_exactly_what_the_real_run_does_and_changes_nothing(catalog):
    table = _appended(catalog, 30, **{"commit.manifest.target-size-bytes": "6000"})
    metadata_location, avro = table.metadata_location, _avro_files(table)

    planned = rewrite_manifests(table, dry_run=True)

    assert table.metadata_location == metadata_location and _avro_files(table) == avro
    assert catalog.load_table("sales.events").metadata_location == metadata_location
    done = rewrite_manifests(table)
    assert planned.dry_run and not done.dry_run and planned.snapshot_id is None and done.snapshot_id
    ignore = {"dry_run", "snapshot_id"}
    assert {k: v for k, v in planned.to_json().items() if k not in ignore} == {
        k: v for k, v in done.to_json().items() if k not in ignore
    }
    assert planned.added_manifests_count > 1  # sized exactly, not estimated


def test_an_append_between_plan_and_commit_is_kept(catalog, monkeypatch, caplog):
    table = _appended(catalog, 20)
    other = catalog.load_table("sales.events")  # another writer, through its own handle
    real_commit = manifests_module._commit
    raced: list[int] = []

    def commit_after_a_rival_append(*args, **kwargs):
        # The only stand-in here is the timing: the rival's append is a real commit to the catalog.
        if not raced:
            other.append(_rows(1000, 3))
            raced.append(other.current_snapshot().snapshot_id)
        return real_commit(*args, **kwargs)

    monkeypatch.setattr(manifests_module, "_commit", commit_after_a_rival_append)
    caplog.set_level(logging.INFO, logger=manifests_module.__name__)
    result = rewrite_manifests(table)

    # The manifests written are reused on top of the rival's snapshot, not written again.
    assert "committing the rewrite on top of it" in caplog.text and "planning again" not in caplog.text

    assert raced and table.current_snapshot().parent_snapshot_id == raced[0]
    assert _ids(table) == sorted([*range(200), 1000, 1001, 1002])
    assert result.added_manifests_count == 1 and result.kept_manifests_count == 1  # the rival's manifest
    assert _manifest_count(table) == 2


def test_a_commit_that_rewrites_chosen_manifests_makes_it_plan_again_and_clean_up(catalog, monkeypatch, caplog):
    table = _appended(catalog, 12)
    other = catalog.load_table("sales.events")
    real_commit = manifests_module._commit
    before = _avro_files(table)
    raced: list[bool] = []

    def commit_after_a_rival_delete(*args, **kwargs):
        if not raced:
            raced.append(True)
            other.delete(EqualTo("id", 5))  # rewrites the manifest that lists ids 0..9
        return real_commit(*args, **kwargs)

    monkeypatch.setattr(manifests_module, "_commit", commit_after_a_rival_delete)
    caplog.set_level(logging.INFO, logger=manifests_module.__name__)
    result = rewrite_manifests(table)

    assert "replaced manifests being rewritten; planning again" in caplog.text

    assert raced and result.snapshot_id == table.current_snapshot().snapshot_id
    assert _ids(table) == [i for i in range(120) if i != 5]
    # The first attempt's manifests were deleted: what is left is the rival's commit and the second attempt.
    referenced = {
        os.path.basename(p)
        for s in table.snapshots()
        for p in [s.manifest_list, *(m.manifest_path for m in s.manifests(table.io))]
    }
    assert _avro_files(table) - before <= referenced


def test_conflicts_on_every_attempt_raise_and_leave_nothing_behind(catalog, monkeypatch):
    table = _appended(catalog, 8)
    other = catalog.load_table("sales.events")
    real_commit = manifests_module._commit
    before, rows = _avro_files(table), _ids(table)
    doomed = iter(range(0, 80, 10))

    def commit_after_a_rival_delete(*args, **kwargs):
        other.delete(EqualTo("id", next(doomed)))  # each rewrites a manifest the attempt chose
        return real_commit(*args, **kwargs)

    monkeypatch.setattr(manifests_module, "_commit", commit_after_a_rival_delete)
    with pytest.raises(MaintenanceConflictError, match="conflicted with concurrent commits 4 times"):
        rewrite_manifests(table)

    table.refresh()
    assert all(s.summary.operation != Operation.REPLACE for s in table.snapshots())
    assert len(_ids(table)) == len(rows) - 4
    referenced = {
        os.path.basename(p)
        for s in table.snapshots()
        for p in [s.manifest_list, *(m.manifest_path for m in s.manifests(table.io))]
    }
    assert _avro_files(table) - before <= referenced  # no manifest of a failed attempt is left


def test_a_manifest_that_cannot_be_read_fails_the_rewrite_cleanly(catalog):
    table = _appended(catalog, 6)
    manifests = table.current_snapshot().manifests(table.io)
    os.remove(manifests[-1].manifest_path.removeprefix("file://"))  # storage lost one: a real read error
    metadata_location, avro = table.metadata_location, _avro_files(table)

    with pytest.raises(FileNotFoundError):
        rewrite_manifests(table)

    assert table.metadata_location == metadata_location and _avro_files(table) == avro


def test_v1_tables(catalog):
    table = _appended(catalog, 15, name="sales.legacy", **{"format-version": "1"})
    assert table.metadata.format_version == 1
    before_entries, rows = _entries(table), _ids(table)
    first = table.snapshots()[0].snapshot_id

    result = rewrite_manifests(table)

    assert result.added_manifests_count == _manifest_count(table) == 1
    assert _ids(table) == rows and _ids(table, snapshot_id=first) == list(range(10))
    assert [e[:2] for e in _entries(table)] == [e[:2] for e in before_entries]  # v1 keeps no sequence numbers
    assert table.current_snapshot().summary.operation == Operation.REPLACE


def test_a_partitioned_table_with_two_specs_gets_one_manifest_set_per_spec(catalog):
    catalog.create_namespace("sales")
    schema = Schema(
        NestedField(1, "id", LongType(), required=False),
        NestedField(2, "region", StringType(), required=False),
    )
    spec = PartitionSpec(PartitionField(source_id=2, field_id=1000, transform=IdentityTransform(), name="region"))
    table = catalog.create_table("sales.regional", schema, partition_spec=spec)
    for i, region in enumerate(["eu", "us", "ap", "eu", "us", "ap"]):
        table.append(_rows(i * 10, 10, region))
    with table.update_spec() as update:
        update.add_identity("id")
    for i in range(6, 12):
        table.append(_rows(i * 10, 2, ["eu", "us"][i % 2]))
    files, eu = _planned(table), _planned(table, row_filter="region == 'eu'")
    before_entries, rows = _entries(table), _ids(table)

    result = rewrite_manifests(table)

    manifests = table.inspect.manifests().to_pylist()
    assert result.rewritten_manifests_count == 12
    assert sorted(m["partition_spec_id"] for m in manifests) == [0, 1]
    assert _planned(table) == files and _ids(table) == rows and _entries(table) == before_entries
    # Partition summaries of the merged manifests still let a filtered scan plan the same files.
    assert _planned(table, row_filter="region == 'eu'") == eu
    by_spec = {m["partition_spec_id"]: m for m in manifests}
    assert by_spec[0]["existing_data_files_count"] == 6 and by_spec[1]["existing_data_files_count"] == 12


def _commit_position_deletes(table, data_path: str, positions: list[int]) -> None:
    """Commit a position delete file, the way Spark or Flink merge-on-read writes one (PyIceberg cannot)."""
    metadata = table.metadata
    path = f"{table.location()}/data/deletes-{uuid.uuid4().hex}.parquet"
    field_id = {"file_path": b"2147483546", "pos": b"2147483545"}
    deletes = pa.table(
        {"file_path": [data_path] * len(positions), "pos": pa.array(positions, pa.int64())},
        schema=pa.schema(
            [
                pa.field("file_path", pa.string(), False, {b"PARQUET:field_id": field_id["file_path"]}),
                pa.field("pos", pa.int64(), False, {b"PARQUET:field_id": field_id["pos"]}),
            ]
        ),
    )
    with table.io.new_output(path).create() as stream:
        pq.write_table(deletes, stream)
    delete_file = DataFile.from_args(
        content=DataFileContent.POSITION_DELETES,
        file_path=path,
        file_format=FileFormat.PARQUET,
        partition=Record(),
        record_count=len(positions),
        file_size_in_bytes=len(table.io.new_input(path)),
        column_sizes={},
        value_counts={},
        null_value_counts={},
        nan_value_counts={},
        lower_bounds={},
        upper_bounds={},
    )
    delete_file.spec_id = 0
    snapshot_id, sequence = metadata.new_snapshot_id(), metadata.next_sequence_number()
    manifest_path = f"{table.location()}/metadata/{uuid.uuid4()}-m0.avro"
    writer = DeleteManifestWriterV2(
        metadata.spec(), metadata.schema(), table.io.new_output(manifest_path), snapshot_id, "gzip"
    )
    with writer:
        writer.add(
            ManifestEntry.from_args(status=ManifestEntryStatus.ADDED, snapshot_id=snapshot_id, data_file=delete_file)
        )
    head = table.current_snapshot()
    list_path = f"{table.location()}/metadata/snap-{snapshot_id}-0-{uuid.uuid4()}.avro"
    with write_manifest_list(2, table.io.new_output(list_path), snapshot_id, head.snapshot_id, sequence, "gzip") as out:
        out.add_manifests([writer.to_manifest_file(), *head.manifests(table.io)])
    summary = Summary(Operation.DELETE, **{"added-delete-files": "1", "added-position-deletes": str(len(positions))})
    snapshot = Snapshot(
        snapshot_id=snapshot_id,
        parent_snapshot_id=head.snapshot_id,
        sequence_number=sequence,
        manifest_list=list_path,
        summary=summary,
        schema_id=metadata.current_schema_id,
    )
    table._do_commit(
        updates=(
            AddSnapshotUpdate(snapshot=snapshot),
            SetSnapshotRefUpdate(ref_name=MAIN_BRANCH, type=SnapshotRefType.BRANCH, snapshot_id=snapshot_id),
        ),
        requirements=(AssertRefSnapshotId(ref=MAIN_BRANCH, snapshot_id=head.snapshot_id),),
    )


def test_delete_manifests_are_merged_apart_from_data_and_keep_applying(catalog):
    table = _appended(catalog, 5)
    data = sorted(table.inspect.files().column("file_path").to_pylist())
    _commit_position_deletes(table, data[0], [0, 1])
    _commit_position_deletes(table, data[1], [9])
    _commit_position_deletes(table, data[2], [4, 5, 6])
    table.append(_rows(500, 10))  # newer data: the older delete files must not apply to it
    rows = _ids(table)
    assert len(rows) == 60 - 6
    before_entries = _entries(table)

    result = rewrite_manifests(table)

    contents = sorted(m["content"] for m in table.inspect.manifests().to_pylist())
    assert contents == [int(ManifestContent.DATA), int(ManifestContent.DELETES)]
    assert result.rewritten_manifests_count == 9 and result.added_manifests_count == 2
    assert _entries(table) == before_entries  # delete files keep their sequence numbers
    assert _ids(table) == rows  # and so keep deleting exactly the same rows


def test_nothing_to_do_and_bad_targets(catalog):
    catalog.create_namespace("sales")
    empty = catalog.create_table("sales.empty", SCHEMA)
    result = rewrite_manifests(empty)
    assert result.rewritten_manifests_count == 0 and result.snapshot_id is None and empty.current_snapshot() is None
    single = _appended(catalog, 1, name="sales.single")
    assert rewrite_manifests(single).kept_manifests_count == 1 and len(single.snapshots()) == 1
    with pytest.raises(ValueError, match="target_manifest_size_bytes must be positive"):
        rewrite_manifests(single, target_manifest_size_bytes=0)
    with single.transaction() as transaction:
        transaction.set_properties({"commit.manifest.target-size-bytes": "big"})
    with pytest.raises(ValueError, match=r"commit.manifest.target-size-bytes='big' is not a positive integer"):
        rewrite_manifests(single)


def test_old_snapshots_read_through_the_rewrite_after_expiry_of_the_originals(catalog):
    table = _appended(catalog, 10)
    rows = _ids(table)
    rewrite_manifests(table)
    expired = expire_snapshots(table, older_than=datetime.now(UTC), retain_last=1)
    assert len(expired.expired_snapshot_ids) == 10
    # The only manifest left is the rewritten one; the data files it lists are all still on disk.
    assert _ids(catalog.load_table("sales.events")) == rows
    assert all(os.path.exists(p.removeprefix("file://")) for p in table.inspect.files().column("file_path").to_pylist())


def test_main_keeps_its_retention_settings(catalog):
    table = _appended(catalog, 4)
    head = table.current_snapshot().snapshot_id
    with table.transaction() as transaction:
        transaction._apply(
            (
                SetSnapshotRefUpdate(
                    ref_name=MAIN_BRANCH,
                    type=SnapshotRefType.BRANCH,
                    snapshot_id=head,
                    min_snapshots_to_keep=7,
                    max_snapshot_age_ms=3_600_000,
                ),
            ),
            (),
        )

    rewrite_manifests(table)

    main = catalog.load_table("sales.events").refs()[MAIN_BRANCH]
    assert main.snapshot_id != head and main.min_snapshots_to_keep == 7 and main.max_snapshot_age_ms == 3_600_000
