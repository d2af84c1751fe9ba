"""A namespace's tables at a glance, and a table's last maintenance, read from metadata."""

from __future__ import annotations

from datetime import UTC, datetime

import pyarrow as pa

from iceberg_ops_provider.maintenance import compact_small_files_streaming, expire_snapshots, rewrite_manifests
from iceberg_ops_provider.maintenance.activity import maintenance_history
from iceberg_ops_provider.maintenance.overview import namespace_tables, table_overview

SCHEMA = pa.schema([pa.field("id", pa.int64()), pa.field("kind", pa.string())])


def _appends(catalog, identifier: str, count: int):
    table = catalog.create_table(identifier, schema=SCHEMA)
    for n in range(count):
        table.append(pa.table({"id": [n], "kind": ["x"]}, schema=SCHEMA))
    return table


def test_namespace_tables_reads_every_table_and_reports_a_broken_one_apart(catalog, namespace, tmp_path):
    for n in range(12):
        _appends(catalog, f"sales.t{n:02d}", n % 3)
    broken = catalog.load_table("sales.t01")
    from pathlib import Path

    Path(broken.metadata_location.removeprefix("file://")).unlink()  # its metadata.json is gone
    found = namespace_tables(catalog, "sales", parallelism=4)
    assert [overview.table for overview in found.tables] == [f"sales.t{n:02d}" for n in range(12) if n != 1]
    assert list(found.errors) == ["sales.t01"]
    by_name = {overview.table: overview for overview in found.tables}
    assert (by_name["sales.t02"].data_files, by_name["sales.t02"].records, by_name["sales.t02"].snapshots) == (2, 2, 2)
    assert by_name["sales.t00"].snapshot_id is None and by_name["sales.t00"].data_files == 0
    assert by_name["sales.t02"].to_json()["mean_file_bytes"] == by_name["sales.t02"].bytes // 2
    assert namespace_tables(catalog, "sales", parallelism=1).to_json()["tables"] == found.to_json()["tables"]


def test_the_overview_of_a_table_without_snapshot(catalog, namespace):
    overview = table_overview(catalog.create_table("sales.empty", schema=SCHEMA))
    assert (overview.snapshots, overview.last_commit_at, overview.mean_file_bytes) == (0, None, None)
    assert overview.target_file_size_bytes == 512 * 1024 * 1024


def test_maintenance_history_finds_compaction_manifest_rewrite_and_expiry_newest_first(catalog, namespace):
    table = _appends(catalog, "sales.events", 6)
    assert maintenance_history(table).commits == []
    compact_small_files_streaming(table, target_file_size_bytes=1 << 20)
    table.refresh()
    rewrite_manifests(table)
    table.refresh()
    expire_snapshots(table, older_than=datetime.now(UTC), retain_last=1)  # removes the compaction's snapshot too
    table.refresh()
    history = maintenance_history(table)
    kinds = [commit.kind for commit in history.commits]
    assert kinds == ["expire_snapshots", "rewrite_manifests", "compaction"]  # the compaction, from earlier metadata
    compaction = history.commits[2]
    assert compaction.details["rewritten_data_files"] == 6 and compaction.details["strategy"] == "binpack"
    assert history.commits[0].details["expired_snapshots"] >= 6 and history.commits[0].snapshot_id is None
    assert history.metadata_files_read > 0 and history.expiries_searched_since is not None
    assert [commit["kind"] for commit in history.to_json()["commits"]] == kinds
    without_log = maintenance_history(table, metadata_files=0)  # snapshots only: the expired compaction is gone
    assert [commit.kind for commit in without_log.commits] == ["rewrite_manifests"]
    assert maintenance_history(table, limit=1).commits[0].kind == "expire_snapshots"


def _with_log(table, entries: list[str]):
    """``table`` as loaded, with a metadata log naming ``entries`` (newest last): what a catalog could answer."""
    from pyiceberg.table import Table
    from pyiceberg.table.metadata import MetadataLogEntry

    log = [MetadataLogEntry(metadata_file=entry, timestamp_ms=0) for entry in entries]
    metadata = table.metadata.model_copy(update={"metadata_log": log})
    return Table(table._identifier, metadata, table.metadata_location, table.io, table.catalog)


def test_maintenance_history_reads_no_pipe_and_nothing_outside_the_table(catalog, namespace, tmp_path, monkeypatch):
    """A metadata log is the catalog's to write: a pipe would block a reader forever, a bomb would fill memory."""
    import gzip
    import os
    import shutil
    import threading
    from pathlib import Path

    from iceberg_ops_provider.maintenance import activity

    table = _appends(catalog, "sales.events", 3)
    earlier = table.metadata.metadata_log[-1].metadata_file
    metadata_dir = Path(earlier.removeprefix("file://")).parent
    assert maintenance_history(table).metadata_files_read == len(table.metadata.metadata_log)

    outside = tmp_path / "elsewhere.metadata.json"  # a readable copy of a real metadata file, outside the table
    shutil.copy(earlier.removeprefix("file://"), outside)
    assert maintenance_history(_with_log(table, [str(outside)])).metadata_files_read == 0
    assert maintenance_history(_with_log(table, [f"{metadata_dir}/../../../elsewhere.metadata.json"])).commits == []

    monkeypatch.setattr(activity, "MAX_METADATA_BYTES", 1 << 20)
    bomb = metadata_dir / "00099-bomb.gz.metadata.json"
    bomb.write_bytes(gzip.compress(b" " * (8 << 20)))
    assert maintenance_history(_with_log(table, [str(bomb)])).metadata_files_read == 0

    pipe = metadata_dir / "00098-pipe.metadata.json"
    os.mkfifo(pipe)
    found: list[object] = []
    reader = threading.Thread(target=lambda: found.append(maintenance_history(_with_log(table, [str(pipe)]))))
    reader.start()
    reader.join(10)
    blocked = reader.is_alive()
    if blocked:  # let it go before failing: a writer opening the pipe ends the blocked read
        os.close(os.open(pipe, os.O_WRONLY | os.O_NONBLOCK))
        reader.join(10)
    assert not blocked, "the history read a pipe the metadata log names"
    assert found and found[0].metadata_files_read == 0

    # The scheme in capitals, table and log alike (PyArrow opens FILE:// as file://): still no pipe read.
    from pyiceberg.table import Table
    from pyiceberg.table.metadata import MetadataLogEntry

    shouted = table.metadata.model_copy(
        update={
            "location": "FILE://" + table.metadata.location.removeprefix("file://"),
            "metadata_log": [MetadataLogEntry(metadata_file=f"FILE://{pipe}", timestamp_ms=0)],
        }
    )
    current = "FILE://" + table.metadata_location.removeprefix("file://")
    loud = Table(table._identifier, shouted, current, table.io, table.catalog)
    found.clear()
    reader = threading.Thread(target=lambda: found.append(maintenance_history(loud)))
    reader.start()
    reader.join(10)
    blocked = reader.is_alive()
    if blocked:
        os.close(os.open(pipe, os.O_WRONLY | os.O_NONBLOCK))
        reader.join(10)
    assert not blocked, "the history read a pipe named FILE://"
    assert found and found[0].metadata_files_read == 0
