"""table_health_report: what it measures on real tables, what it recommends, and that it changes nothing."""

from __future__ import annotations

import json
import os
import threading
import time
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path

import boto3
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from pyiceberg.manifest import (
    DataFile,
    DataFileContent,
    FileFormat,
    ManifestEntry,
    ManifestEntryStatus,
    write_manifest_list,
)
from pyiceberg.partitioning import PartitionField, PartitionSpec
from pyiceberg.schema import Schema
from pyiceberg.table import StaticTable
from pyiceberg.table.refs import SnapshotRefType
from pyiceberg.table.snapshots import Operation, Snapshot, Summary
from pyiceberg.table.sorting import SortField, SortOrder
from pyiceberg.table.update import AddSnapshotUpdate, AssertRefSnapshotId, SetSnapshotRefUpdate
from pyiceberg.transforms import IdentityTransform
from pyiceberg.typedef import Record
from pyiceberg.types import LongType, NestedField, StringType

from iceberg_ops_provider.catalogs import CatalogFactory
from iceberg_ops_provider.errors import MaintenancePolicyError
from iceberg_ops_provider.maintenance.binpack import expected_output_files
from iceberg_ops_provider.maintenance.expire import expire_snapshots
from iceberg_ops_provider.maintenance.health import (
    ACTIONS,
    HealthThresholds,
    TableHealthReport,
    table_health_report,
)
from iceberg_ops_provider.maintenance.health_stats import window_map
from iceberg_ops_provider.maintenance.rewrite_commit import DeleteManifestWriterV2
from tests.support.servers import boto_kwargs

SCHEMA = Schema(
    NestedField(1, "id", LongType(), required=False),
    NestedField(2, "region", StringType(), required=False),
    NestedField(3, "note", StringType(), required=False),
)
BY_REGION = PartitionSpec(PartitionField(source_id=2, field_id=1000, transform=IdentityTransform(), name="region"))


def _rows(start: int, count: int, region: str = "eu", payload: int = 0) -> pa.Table:
    """``count`` rows; ``payload`` random hex characters per row make a file large (they do not compress)."""
    notes = [os.urandom(payload // 2).hex() if payload else None for _ in range(count)]
    return pa.table(
        {
            "id": pa.array(range(start, start + count), pa.int64()),
            "region": [region] * count,
            "note": pa.array(notes, pa.string()),
        }
    )


def _files(root: Path) -> dict[str, float]:
    return {os.path.join(d, f): os.stat(os.path.join(d, f)).st_mtime for d, _, fs in os.walk(root) for f in fs}


def _json_round_trip(report: TableHealthReport) -> dict:
    document = report.to_json()
    assert json.loads(json.dumps(document)) == document  # what XCom stores
    return document


@pytest.fixture(scope="module")
def busy(tmp_path_factory: pytest.TempPathFactory):
    """A table after 100 one-row appends: 100 small files, 100 manifests, 100 snapshots (never written to by tests)."""
    root = tmp_path_factory.mktemp("busy")
    catalog = CatalogFactory.build("sqlite", db_path=root / "c.db", warehouse_dir=root / "warehouse")
    catalog.create_namespace("ops")
    table = catalog.create_table("ops.busy", SCHEMA)
    for i in range(100):
        table.append(_rows(i, 1))
    yield table, root / "warehouse"
    catalog.close()


def _commit_delete_file(table, content: DataFileContent, rows: pa.Table, partition: Record, **extra) -> str:
    """Commit a delete file the way Spark or Flink merge-on-read does (PyIceberg 0.12 cannot write one)."""
    io, metadata = table.io, table.metadata
    path = f"{table.location()}/data/deletes-{uuid.uuid4().hex}.parquet"
    with io.new_output(path).create() as stream:
        pq.write_table(rows, stream)
    delete_file = DataFile.from_args(
        content=content,
        file_path=path,
        file_format=FileFormat.PARQUET,
        partition=partition,
        record_count=rows.num_rows,
        file_size_in_bytes=len(io.new_input(path)),
        **extra,
    )
    delete_file.spec_id = metadata.default_spec_id
    snapshot_id, sequence_number = metadata.new_snapshot_id(), metadata.next_sequence_number()

    manifest_path = f"{table.location()}/metadata/{uuid.uuid4().hex}-m0.avro"
    with DeleteManifestWriterV2(
        table.spec(), table.schema(), io.new_output(manifest_path), snapshot_id, "deflate"
    ) as w:
        w.add(
            ManifestEntry.from_args(
                status=ManifestEntryStatus.ADDED, snapshot_id=snapshot_id, sequence_number=None, data_file=delete_file
            )
        )
    parent = table.current_snapshot()
    list_path = f"{table.location()}/metadata/snap-{snapshot_id}-{uuid.uuid4().hex}.avro"
    with write_manifest_list(
        2, io.new_output(list_path), snapshot_id, parent.snapshot_id, sequence_number, "deflate"
    ) as lw:
        lw.add_manifests([*parent.manifests(io), w.to_manifest_file()])
    snapshot = Snapshot(
        snapshot_id=snapshot_id,
        parent_snapshot_id=parent.snapshot_id,
        sequence_number=sequence_number,
        timestamp_ms=int(time.time() * 1000),
        manifest_list=list_path,
        summary=Summary(Operation.DELETE),
        schema_id=metadata.current_schema_id,
    )
    with table.transaction() as transaction:
        transaction._apply(
            (
                AddSnapshotUpdate(snapshot=snapshot),
                SetSnapshotRefUpdate(ref_name="main", type=SnapshotRefType.BRANCH, snapshot_id=snapshot_id),
            ),
            (AssertRefSnapshotId(ref="main", snapshot_id=parent.snapshot_id),),
        )
    return path


def _position_deletes(data_path: str, positions: list[int]) -> pa.Table:
    schema = pa.schema(
        [
            pa.field("file_path", pa.string(), nullable=False, metadata={b"PARQUET:field_id": b"2147483546"}),
            pa.field("pos", pa.int64(), nullable=False, metadata={b"PARQUET:field_id": b"2147483545"}),
        ]
    )
    return pa.table({"file_path": [data_path] * len(positions), "pos": positions}, schema=schema)


# --- verdicts -------------------------------------------------------------------------------------------------


def test_a_healthy_table_needs_nothing_and_the_report_changes_nothing(catalog, tmp_path: Path):
    catalog.create_namespace("ops")
    table = catalog.create_table("ops.healthy", SCHEMA)
    for i in range(3):
        table.append(_rows(i * 10, 10))
    files, location = _files(tmp_path / "warehouse"), table.metadata_location

    report = table_health_report(table)

    assert report.needs == () and report.healthy and report.recommendations == () and report.warnings == ()
    assert report.data_files.files == 3 and report.data_files.small_files == 3  # small, but fewer than 5
    assert report.snapshots.snapshots == 3 and report.snapshots.expirable_snapshots == 0
    assert report.manifests.manifests == 3 and report.metadata.log_length == 3
    document = _json_round_trip(report)
    assert document["healthy"] is True and document["needs"] == []
    assert report.summary().splitlines()[0] == "ops.healthy: healthy, no maintenance due"
    assert _files(tmp_path / "warehouse") == files and table.metadata_location == location
    catalog.load_table("ops.healthy")  # still loads: nothing was committed
    assert catalog.load_table("ops.healthy").metadata_location == location


def test_one_file_and_one_partition_are_counted_in_the_singular(catalog):
    catalog.create_namespace("ops")
    table = catalog.create_table("ops.one", SCHEMA)
    table.append(_rows(0, 5))

    data_line = table_health_report(table).summary().splitlines()[1]

    assert data_line.startswith("data: 1 file, ") and "0 of 1 partition need compaction" in data_line


def test_an_empty_table_and_a_table_whose_rows_are_all_deleted(catalog):
    catalog.create_namespace("ops")
    table = catalog.create_table("ops.empty", SCHEMA)

    report = table_health_report(table)

    assert report.healthy and report.snapshot_id is None and report.partitions == ()
    assert report.data_files.files == 0 and report.data_files.min_bytes == 0 and report.data_files.histogram == ()
    assert report.snapshots.oldest_age_seconds is None and report.manifests.max_manifests_per_snapshot == 0
    assert report.partition_skew is None and _json_round_trip(report)["partitions_total"] == 0
    assert "0 files" in report.summary()

    table.append(_rows(0, 5))
    table.delete("id >= 0")
    emptied = table_health_report(table)
    assert emptied.healthy and emptied.data_files.files == 0 and emptied.snapshots.snapshots == 2


def test_many_small_files_need_compaction_with_the_tables_target(catalog):
    catalog.create_namespace("ops")
    table = catalog.create_table("ops.small", SCHEMA, properties={"write.target-file-size-bytes": "4096"})
    for i in range(6):
        table.append(_rows(i * 10, 10))
    sizes = table.inspect.files().column("file_size_in_bytes").to_pylist()
    assert all(size < 3072 for size in sizes)  # under 75% of 4 KiB: small

    report = table_health_report(table)

    assert report.needs == ("compact",)
    compact = report.recommendation("compact")
    assert compact.function == "compact_small_files_streaming" and compact.needed
    assert compact.params == {
        "target_file_size_bytes": 4096,
        "min_input_files": 5,
        "where": None,
        "strategy": "binpack",
    }
    expected = expected_output_files(sum(sizes), 4096)  # the compaction's own rule (Spark's)
    assert f"6 small files (under 3.0 KiB, 75% of the 4.0 KiB target), {sum(sizes) / 1024:.1f} KiB" in compact.reason
    assert f"about {expected} file{'' if expected == 1 else 's'} after compaction" in compact.reason
    assert compact.call().startswith("compact_small_files_streaming(table, target_file_size_bytes=4096, ")
    assert report.data_files.small_files == 6 and report.data_files.small_bytes == sum(sizes)
    assert report.data_files.min_bytes == min(sizes) and report.data_files.max_bytes == max(sizes)
    assert sum(bucket.files for bucket in report.data_files.histogram) == 6
    assert all(b.min_bytes <= size < b.max_bytes for b in report.data_files.histogram for size in [b.bytes // b.files])

    # Files of about the target are not small: the same table with a target just above them is healthy.
    with table.transaction() as transaction:
        transaction.set_properties({"write.target-file-size-bytes": str(max(sizes) + 100)})
    assert table_health_report(table).needs == ()


def test_a_format_version_1_table(catalog):
    catalog.create_namespace("ops")
    table = catalog.create_table("ops.v1", SCHEMA, properties={"format-version": "1"})
    for i in range(5):
        table.append(_rows(i * 10, 10))
    assert table.metadata.format_version == 1

    report = table_health_report(table)

    assert report.needs == ("compact",) and report.format_version == 1
    assert report.data_files.files == 5 and report.data_files.records == 50
    assert report.manifests.max_manifests_per_snapshot == 5 and report.snapshots.snapshots == 5


def test_a_sorted_table_is_compacted_with_the_sort_strategy(catalog):
    catalog.create_namespace("ops")
    order = SortOrder(SortField(source_id=1, transform=IdentityTransform()))
    table = catalog.create_table("ops.sorted", SCHEMA, sort_order=order)
    for i in range(5):
        table.append(_rows(i * 10, 10))

    compact = table_health_report(table).recommendation("compact")

    assert compact is not None and compact.params["strategy"] == "sort" and "sort order" in compact.reason


def test_many_manifests_need_rewrite_manifests(busy):
    table, _ = busy

    report = table_health_report(table)

    assert report.needs == ("compact", "rewrite_manifests")
    rewrite = report.recommendation("rewrite_manifests")
    assert rewrite.params == {"target_manifest_size_bytes": 8 * 1024 * 1024}
    assert "lists 100 manifests" in rewrite.reason and "about 1" in rewrite.reason
    manifests = report.manifests
    assert manifests.manifests == manifests.data_manifests == manifests.small_manifests == 100
    assert manifests.delete_manifests == 0 and manifests.manifests_after_rewrite == 1
    assert manifests.bytes == sum(table.inspect.manifests().column("length").to_pylist())
    # Snapshot k lists k manifests (one per fast append), the 100 distinct ones shared.
    assert manifests.max_manifests_per_snapshot == 100 and manifests.mean_manifests_per_snapshot == pytest.approx(50.5)
    assert manifests.distinct_manifests == 100 and manifests.distinct_manifest_bytes == manifests.bytes
    assert [r.action for r in report.recommendations] == ["compact", "rewrite_manifests"]  # order to run them


def _count_opened(table, monkeypatch) -> list[str]:
    """The locations the table's FileIO opens from now on, in order (each read still happens)."""
    opened: list[str] = []
    lock = threading.Lock()
    real = type(table.io).new_input

    def counting(io, location):
        with lock:
            opened.append(location)
        return real(io, location)

    monkeypatch.setattr(type(table.io), "new_input", counting)
    return opened


def test_skipping_the_kept_snapshots_manifest_lists_leaves_the_verdict_and_drops_only_their_figures(busy, monkeypatch):
    table, _ = busy
    full = table_health_report(table)
    read = _count_opened(table, monkeypatch)
    quick = table_health_report(table, kept_snapshots=False)

    lists = {snapshot.manifest_list for snapshot in table.snapshots()}
    assert len(lists & set(read)) <= 1  # at most the current snapshot's own list, for its manifests
    assert quick.needs == full.needs and quick.recommendations == full.recommendations
    assert quick.manifests.max_manifests_per_snapshot is None and quick.manifests.distinct_manifests is None
    assert quick.manifests.mean_manifests_per_snapshot is None and quick.manifests.distinct_manifest_bytes is None
    assert quick.manifests.manifests == full.manifests.manifests == 100
    assert quick.to_json()["manifests"]["distinct_manifests"] is None


def test_thresholds_change_the_verdict(busy):
    table, _ = busy
    assert table_health_report(table).needs == ("compact", "rewrite_manifests")

    relaxed = HealthThresholds(min_manifests_to_rewrite=101, min_input_files=101)
    assert table_health_report(table, relaxed).needs == ()
    # A target just above the files' size makes none of them small.
    largest = max(table.inspect.files().column("file_size_in_bytes").to_pylist())
    near = table_health_report(table, HealthThresholds(target_file_size_bytes=largest + 1))
    assert (
        "compact" not in near.needs and near.data_files.small_files == 0 and near.target_file_size_bytes == largest + 1
    )
    # A smaller manifest target makes none of these ~4 KiB manifests small.
    tiny = table_health_report(table, HealthThresholds(target_manifest_size_bytes=1024))
    assert "rewrite_manifests" not in tiny.needs and tiny.manifests.small_manifests == 0
    # Snapshots younger than the table's 5-day default are kept; a shorter age makes them due.
    assert table_health_report(table).snapshots.expirable_snapshots == 0
    aged = table_health_report(table, HealthThresholds(max_snapshot_age=timedelta(0), retain_last=10))
    expire = aged.recommendation("expire_snapshots")
    assert "expire_snapshots" in aged.needs and aged.snapshots.expirable_snapshots == 90
    assert expire.params["retain_last"] == 10 and expire.params["delete_files"] is True
    assert isinstance(expire.params["older_than"], datetime) and expire.params["older_than"] <= datetime.now(UTC)
    assert expire.to_json()["params"]["older_than"] == expire.params["older_than"].isoformat()
    # A count limit keeps the latest max_snapshots whatever their age.
    counted = table_health_report(table, HealthThresholds(max_snapshots=30))
    assert counted.recommendation("expire_snapshots").params["retain_last"] == 30
    assert (
        counted.snapshots.expirable_snapshots == 70
        and "max_snapshots=30" in counted.recommendation("expire_snapshots").reason
    )
    assert table_health_report(table, HealthThresholds(max_snapshots=100)).recommendation("expire_snapshots") is None
    # A small metadata.json limit warns.
    warned = table_health_report(table, HealthThresholds(max_metadata_file_bytes=1024))
    assert any("metadata.json is" in w for w in warned.warnings)


def test_the_report_reads_each_manifest_once_and_no_data_file(busy, monkeypatch):
    table, _ = busy
    opened = _count_opened(table, monkeypatch)
    report = table_health_report(table)

    manifests = [p for p in opened if p.endswith(".avro") and "/snap-" not in p]
    lists = [p for p in opened if "/snap-" in p]
    assert len(manifests) == len(set(manifests)) == 100
    assert len(set(lists)) == 100 and len(lists) <= 101  # every list once; the current one also for its manifests
    assert not [p for p in opened if p.endswith(".parquet")]
    assert report.data_files.files == 100


def test_old_snapshots_need_expiry_planned_exactly_as_expire_snapshots_plans_it(catalog, tmp_path: Path):
    catalog.create_namespace("ops")
    table = catalog.create_table("ops.old", SCHEMA)
    for i in range(6):
        table.append(_rows(i * 10, 10))
    table.manage_snapshots().create_tag(table.snapshots()[1].snapshot_id, "audit").commit()
    with table.transaction() as transaction:  # every snapshot is now past the table's own max age
        transaction.set_properties({"history.expire.max-snapshot-age-ms": "1"})
    time.sleep(0.01)

    report = table_health_report(table)

    expire = report.recommendation("expire_snapshots")
    assert report.needs == ("compact", "expire_snapshots")
    assert expire.params == {"older_than": None, "retain_last": 1, "delete_files": True}  # the table's own default
    assert "history.expire.max-snapshot-age-ms" in expire.reason and report.snapshots.tags == 1
    planned = expire_snapshots(table, dry_run=True)
    assert report.snapshots.expirable_snapshots == len(planned.expired_snapshot_ids) == 4  # all but head and tag

    done = expire_snapshots(table, **expire.params)

    assert len(done.expired_snapshot_ids) == 4 and done.deleted_manifest_lists_count == 4
    after = table_health_report(table)
    assert "expire_snapshots" not in after.needs and after.snapshots.snapshots == 2
    assert after.manifests.distinct_manifests == 6  # the head lists all six


def test_the_recommended_calls_run_as_given_and_settle_the_table(catalog):
    from iceberg_ops_provider.maintenance import compaction, manifests

    functions = {
        "compact_small_files_streaming": compaction.compact_small_files_streaming,
        "rewrite_manifests": manifests.rewrite_manifests,
    }
    catalog.create_namespace("ops")
    table = catalog.create_table("ops.settle", SCHEMA, properties={"write.target-file-size-bytes": "65536"})
    for i in range(6):
        table.append(_rows(i * 10, 10))
    rows = sorted(table.scan().to_arrow().column("id").to_pylist())
    thresholds = HealthThresholds(min_manifests_to_rewrite=5)

    report = table_health_report(table, thresholds)
    assert report.needs == ("compact", "rewrite_manifests")
    for recommendation in report.recommendations:
        functions[recommendation.function](table, **recommendation.params)

    after = table_health_report(table, thresholds)
    assert after.needs == () and after.data_files.files == 1 and after.manifests.manifests == 1
    assert sorted(table.scan().to_arrow().column("id").to_pylist()) == rows


def test_a_bad_expiry_property_is_a_policy_error_and_a_warning_under_given_thresholds(catalog):
    catalog.create_namespace("ops")
    table = catalog.create_table("ops.badprop", SCHEMA, properties={"history.expire.max-snapshot-age-ms": "soon"})
    table.append(_rows(0, 3))

    with pytest.raises(MaintenancePolicyError) as raised:
        table_health_report(table)  # judged by its policy, which holds a bad value
    assert (raised.value.key, raised.value.value) == ("history.expire.max-snapshot-age-ms", "soon")
    assert raised.value.accepted == "an integer >= 0 (milliseconds) and < 2^63"

    report = table_health_report(table, HealthThresholds())

    assert report.needs == () and any("max-snapshot-age-ms='soon' is not an integer" in w for w in report.warnings)


def test_position_delete_files_are_counted_per_partition(catalog):
    catalog.create_namespace("ops")
    table = catalog.create_table("ops.mor", SCHEMA, partition_spec=BY_REGION)
    table.append(pa.concat_tables([_rows(0, 10, "eu"), _rows(10, 10, "us")]))
    eu_file = next(p for p in table.inspect.files().column("file_path").to_pylist() if "region=eu" in p)
    for positions in ([0, 1], [5]):
        _commit_delete_file(
            table, DataFileContent.POSITION_DELETES, _position_deletes(eu_file, positions), Record("eu")
        )
    assert table.scan().to_arrow().num_rows == 17  # PyIceberg applies them: the delete files are real

    report = table_health_report(table, HealthThresholds(max_position_delete_files=1))

    deletes = report.delete_files
    assert deletes.position_delete_files == 2 and deletes.position_delete_records == 3
    assert deletes.equality_delete_files == 0 and deletes.position_delete_bytes > 0
    by_path = {p.path: p for p in report.partitions}
    assert by_path["region=eu"].position_delete_files == 2 and by_path["region=us"].position_delete_files == 0
    assert by_path["region=eu"].data_files == 1 and report.data_files.files == 2  # delete files are not data files
    assert report.manifests.delete_manifests == 2
    assert any("2 position delete files" in w for w in report.warnings)
    assert not any("position delete" in w for w in table_health_report(table).warnings)  # default limit 10


def test_equality_deletes_block_the_compaction_recommendation(catalog):
    catalog.create_namespace("ops")
    table = catalog.create_table("ops.eq", SCHEMA)
    for i in range(6):
        table.append(_rows(i * 10, 10))
    keys = pa.table({"id": pa.array([3], pa.int64())}, schema=pa.schema([pa.field("id", pa.int64())]))
    _commit_delete_file(table, DataFileContent.EQUALITY_DELETES, keys, Record(), equality_ids=[1])

    report = table_health_report(table)

    assert report.delete_files.equality_delete_files == 1 and report.partitions[0].needs_compaction
    assert "compact" not in report.needs and report.recommendation("compact") is None
    assert any("equality delete" in w and "rewrite_data_files" in w for w in report.warnings)


def test_partitioned_table_small_file_ratio_per_partition_and_skew(catalog):
    catalog.create_namespace("ops")
    table = catalog.create_table("ops.parts", SCHEMA, partition_spec=BY_REGION)
    for i in range(3):  # eu: three large files
        table.append(_rows(i * 10_000, 1000, "eu", payload=40))
    for i in range(6):  # small files: eu 5, us 6, apac 2
        batch = [_rows(100_000 + i, 1, "us")]
        batch += [_rows(200_000 + i, 1, "eu")] if i < 5 else []
        batch += [_rows(300_000 + i, 1, "apac")] if i < 2 else []
        table.append(pa.concat_tables(batch))
    files = table.inspect.files().to_pylist()
    big = [f["file_size_in_bytes"] for f in files if f["record_count"] == 1000]
    assert len(big) == 3 and max(f["file_size_in_bytes"] for f in files if f["record_count"] == 1) < min(big) / 4
    with table.transaction() as transaction:  # a target the large files are near
        transaction.set_properties({"write.target-file-size-bytes": str(max(big) + 1)})

    report = table_health_report(table)

    parts = {p.partition["region"]: p for p in report.partitions}
    eu, us, apac = parts["eu"], parts["us"], parts["apac"]
    assert (us.data_files, us.small_files, us.small_file_ratio, us.needs_compaction) == (6, 6, 1.0, True)
    assert (eu.data_files, eu.small_files, eu.small_file_ratio, eu.needs_compaction) == (8, 5, 5 / 8, True)
    assert (apac.small_files, apac.needs_compaction) == (2, False)
    assert report.partitions[0].needs_compaction and not report.partitions[-1].needs_compaction
    assert report.data_files.small_files == 13 and report.data_files.files == 16 and len(report.partitions) == 3
    assert _json_round_trip(report)["partitions_needing_compaction"] == 2

    # The ratio limit: a partition whose small files are a small share of its files does not count.
    strict = table_health_report(table, HealthThresholds(max_small_file_ratio=0.7))
    assert {p.path for p in strict.partitions if p.needs_compaction} == {"region=us"}
    looser = table_health_report(table, HealthThresholds(min_input_files=2))
    assert {p.path for p in looser.partitions if p.needs_compaction} == {"region=us", "region=eu", "region=apac"}
    assert (
        table_health_report(table, HealthThresholds(min_input_files=6))
        .recommendation("compact")
        .reason.startswith("1 partition (of ")
    )

    # Skew: eu holds the three large files, us (the median) six one-row files.
    assert report.partition_skew == round(eu.data_bytes / us.data_bytes, 2) and report.partition_skew > 10
    assert any(w.startswith("partition skew") for w in report.warnings)
    assert not any(
        w.startswith("partition skew")
        for w in table_health_report(table, HealthThresholds(max_partition_skew=1e6)).warnings
    )
    assert eu.data_bytes == sum(big) + eu.small_bytes


def test_files_of_an_older_partition_spec_count_apart_and_are_compaction_candidates(catalog):
    catalog.create_namespace("ops")
    table = catalog.create_table("ops.evolved", SCHEMA)
    for i in range(5):
        table.append(_rows(i * 10, 10))
    with table.update_spec() as spec:
        spec.add_identity("region")
    table.append(_rows(50, 10, "eu"))
    # A 1-byte target makes every file large: only the spec decides what compaction rewrites.
    thresholds = HealthThresholds(target_file_size_bytes=1)

    report = table_health_report(table, thresholds)

    parts = {(p.spec_id, p.path): p for p in report.partitions}
    assert set(parts) == {(0, ""), (1, "region=eu")}
    old, new = parts[(0, "")], parts[(1, "region=eu")]
    assert (old.small_files, old.compaction_candidates, old.needs_compaction) == (0, 5, True)
    assert (new.compaction_candidates, new.needs_compaction) == (0, False)
    assert report.data_files.older_spec_files == 5 and report.data_files.small_files == 0
    compact = report.recommendation("compact")
    assert "compact" in report.needs and "5 written under an older partition spec" in compact.reason


def test_metadata_files_left_behind_give_orphan_advice_never_a_need(catalog, tmp_path: Path):
    catalog.create_namespace("ops")
    table = catalog.create_table("ops.meta", SCHEMA, properties={"write.metadata.previous-versions-max": "2"})
    for i in range(4):
        table.append(_rows(i, 1))
    on_disk = [p for p in _files(tmp_path / "warehouse") if p.endswith(".metadata.json")]
    logged = {e.metadata_file.removeprefix("file://") for e in table.metadata.metadata_log}
    left_behind = len(on_disk) - len(logged) - 1

    report = table_health_report(table)

    assert report.metadata.log_length == 2 and report.metadata.dropped_files == left_behind == 2
    assert report.metadata.file_bytes == os.path.getsize(table.metadata_location.removeprefix("file://"))
    orphans = report.recommendation("remove_orphan_files")
    assert orphans is not None and not orphans.needed and "remove_orphan_files" not in report.needs
    assert orphans.params == {"older_than": None, "location": None} and "schedule" in orphans.reason
    assert report.summary().count("advice: remove_orphan_files(table") == 1

    with table.transaction() as transaction:
        transaction.set_properties({"write.metadata.delete-after-commit.enabled": "true"})
    assert table_health_report(table).recommendation("remove_orphan_files") is None


def test_a_static_table_from_its_metadata_file_gets_the_same_verdict(busy):
    table, _ = busy
    static = StaticTable.from_metadata(table.metadata_location)

    report = table_health_report(static)

    assert report.needs == table_health_report(table).needs and report.data_files.files == 100


def test_a_stale_handle_after_a_concurrent_expiry_reports_the_fresh_metadata(catalog):
    catalog.create_namespace("ops")
    stale = catalog.create_table("ops.raced", SCHEMA)
    for i in range(3):
        stale.append(_rows(i, 1))
    other = catalog.load_table("ops.raced")
    for i in range(3, 6):
        other.append(_rows(i, 1))
    expired = expire_snapshots(other, older_than=datetime.now(UTC), retain_last=1)
    assert expired.deleted_manifest_lists_count == 5  # the stale handle's snapshots lists are gone
    loaded = stale.metadata_location

    report = table_health_report(stale)

    assert stale.metadata_location != loaded  # refreshed once, as the docstring says
    assert report.snapshot_id == other.current_snapshot().snapshot_id
    assert report.snapshots.snapshots == 1 and report.data_files.files == 6


def test_a_missing_manifest_is_reported_not_hidden(catalog):
    catalog.create_namespace("ops")
    table = catalog.create_table("ops.damaged", SCHEMA)
    for i in range(2):
        table.append(_rows(i, 1))
    manifest = table.inspect.manifests().column("path").to_pylist()[0]
    os.remove(manifest.removeprefix("file://"))

    with pytest.raises(FileNotFoundError):
        table_health_report(table)
    with pytest.raises(FileNotFoundError):
        table_health_report(StaticTable.from_metadata(table.metadata_location))


# --- bad input --------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"small_file_fraction": 0}, "small_file_fraction must be a number > 0 and <= 1, got 0"),
        ({"small_file_fraction": 1.5}, "small_file_fraction must be a number > 0 and <= 1"),
        ({"small_file_fraction": float("nan")}, "small_file_fraction"),
        ({"max_small_file_ratio": 1}, "max_small_file_ratio must be a number >= 0 and < 1"),
        ({"min_input_files": 0}, "min_input_files must be an integer of at least 1, got 0"),
        ({"min_input_files": True}, "min_input_files must be an integer of at least 1, got True"),
        ({"min_input_files": 5.0}, "min_input_files must be an integer of at least 1"),
        ({"target_file_size_bytes": 0}, "target_file_size_bytes must be an integer >= 1 or None"),
        ({"target_manifest_size_bytes": "8MB"}, "target_manifest_size_bytes must be an integer >= 1 or None"),
        ({"retain_last": 0}, "retain_last must be an integer >= 1"),
        ({"max_snapshots": 0}, "max_snapshots must be an integer >= 1 or None"),
        ({"max_snapshot_age": timedelta(days=-1)}, "max_snapshot_age must be a timedelta >= 0"),
        ({"max_snapshot_age": 3600}, "max_snapshot_age must be a timedelta"),
        ({"large_file_factor": 0.5}, "large_file_factor must be a number >= 1"),
        ({"max_partition_skew": "high"}, "max_partition_skew must be a number >= 1"),
        ({"max_position_delete_files": -1}, "max_position_delete_files must be an integer >= 0"),
        ({"min_manifests_to_rewrite": 1}, "min_manifests_to_rewrite must be an integer >= 2"),
        ({"max_metadata_file_bytes": 0}, "max_metadata_file_bytes must be an integer >= 1"),
    ],
)
def test_bad_thresholds_are_refused_naming_the_field(kwargs, message):
    with pytest.raises(ValueError, match="Invalid HealthThresholds") as raised:
        HealthThresholds(**kwargs)
    assert message in str(raised.value)


def test_every_problem_is_named_at_once_and_json_thresholds_round_trip():
    with pytest.raises(ValueError) as raised:
        HealthThresholds(min_input_files=0, retain_last=0)
    assert "min_input_files" in str(raised.value) and "retain_last" in str(raised.value)

    thresholds = HealthThresholds.from_json({"max_snapshot_age": 3600, "min_input_files": 8})
    assert thresholds.max_snapshot_age == timedelta(hours=1) and thresholds.min_input_files == 8
    assert HealthThresholds.from_json(thresholds.to_json()) == thresholds
    assert HealthThresholds.from_json(None) == HealthThresholds()
    with pytest.raises(ValueError, match=r"Unknown health threshold\(s\) \['min_files'\]; the known ones are"):
        HealthThresholds.from_json({"min_files": 3})
    with pytest.raises(ValueError, match="max_snapshot_age must be >= 0 seconds"):
        HealthThresholds.from_json({"max_snapshot_age": -5})
    with pytest.raises(ValueError, match="takes a mapping"):
        HealthThresholds.from_json([("min_input_files", 3)])


def test_bad_arguments_and_table_properties(catalog):
    catalog.create_namespace("ops")
    table = catalog.create_table("ops.bad", SCHEMA)
    table.append(_rows(0, 1))
    with table.transaction() as transaction:
        transaction.set_properties({"write.target-file-size-bytes": "big"})
    with pytest.raises(ValueError, match=r"HealthThresholds\.from_json builds one from a dict"):
        table_health_report(table, {"min_input_files": 3})
    with pytest.raises(ValueError, match=r"write.target-file-size-bytes='big' is not accepted: it takes an integer"):
        table_health_report(table)
    assert table_health_report(table, HealthThresholds(target_file_size_bytes=1024)).healthy  # an override wins
    report = table_health_report(table, HealthThresholds(target_file_size_bytes=1024))
    with pytest.raises(ValueError, match="Unknown maintenance action 'vacuum'"):
        report.recommendation("vacuum")
    assert set(ACTIONS) == {"compact", "rewrite_manifests", "expire_snapshots", "remove_orphan_files"}


def test_window_map_keeps_order_and_bounds_what_is_pending():
    running, peak, lock = [0], [0], threading.Lock()

    def work(n: int) -> int:
        with lock:
            running[0] += 1
            peak[0] = max(peak[0], running[0])
        time.sleep(0.002 * (n % 3))
        with lock:
            running[0] -= 1
        return n * n

    assert list(window_map(work, range(40), workers=3)) == [n * n for n in range(40)]
    assert peak[0] <= 3
    started: list[int] = []
    results = window_map(lambda n: started.append(n) or n, range(100), workers=2)
    next(results)
    time.sleep(0.05)
    assert len(started) <= 5  # 2 * workers submitted ahead, plus one refill: not all 100


# --- S3 -----------------------------------------------------------------------------------------------------------


@pytest.mark.backends
def test_a_table_on_s3(seaweedfs, unique_name, tmp_path: Path):
    boto3.client("s3", **boto_kwargs(seaweedfs.s3_endpoint)).create_bucket(Bucket=unique_name)
    catalog = CatalogFactory.build(
        "sqlite", db_path=tmp_path / "c.db", warehouse_dir=f"s3://{unique_name}/wh", **seaweedfs.s3_properties()
    )
    catalog.create_namespace("ops")
    table = catalog.create_table("ops.remote", SCHEMA, partition_spec=BY_REGION)
    for i in range(6):
        table.append(pa.concat_tables([_rows(i, 1, "eu"), _rows(100 + i, 1, "us")]))
    assert table.metadata_location.startswith("s3://")

    report = table_health_report(table, HealthThresholds(min_manifests_to_rewrite=6))

    assert report.needs == ("compact", "rewrite_manifests")
    assert {p.path: p.small_files for p in report.partitions} == {"region=eu": 6, "region=us": 6}
    assert report.manifests.manifests == 6 and report.manifests.distinct_manifests == 6
    head = boto3.client("s3", **boto_kwargs(seaweedfs.s3_endpoint)).head_object(
        Bucket=unique_name, Key=table.metadata_location.removeprefix(f"s3://{unique_name}/")
    )
    assert report.metadata.file_bytes == head["ContentLength"]
    _json_round_trip(report)
    catalog.close()
