"""expire_snapshots and the statistics files of expired snapshots: table (Puffin) and partition statistics.

Spark's ``compute_table_stats`` and ``compute_partition_stats`` register one file of each kind per
snapshot in the table's metadata. Iceberg's expiry removes both entries of an expired snapshot and
deletes both files; PyIceberg's snapshot removal drops only the table statistics entry, which left
the partition statistics entry (and its file, still referenced, so never an orphan) behind for good.
The files here are written by the test and registered as Spark registers them.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import pyarrow as pa
from pyiceberg.table.statistics import BlobMetadata, PartitionStatisticsFile, StatisticsFile
from pyiceberg.table.update import SetPartitionStatisticsUpdate, SetStatisticsUpdate

from iceberg_ops_provider.maintenance import expire_snapshots

SCHEMA = pa.schema([pa.field("id", pa.int64())])


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
    table = catalog.create_table("sales.events", SCHEMA)
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
