"""What a batch leaves when its commit goes wrong in the middle: a delete file a concurrent expiry removed
before the batch reads it is a conflict (the files written are deleted), and an interrupt while a
conflicting batch is committed group by group deletes the files of the groups not reached. Everything
is real (SQLite catalog, Parquet files, a second catalog handle's commits); the tests only choose the
moment, by wrapping the real calls."""

from __future__ import annotations

from pathlib import Path

import pytest

from iceberg_ops_provider.errors import MaintenanceConflictError
from iceberg_ops_provider.maintenance import group_runner
from iceberg_ops_provider.maintenance.compaction import compact_small_files_streaming
from tests.support.lake import Lake
from tests.support.tables import (
    batch,
    commit_delete_files,
    files_on_disk,
    live_data_files,
    position_delete_file,
    rows,
    small_files_table,
)

TARGET = 2**20


def test_a_delete_file_gone_before_the_batch_reads_it_is_a_conflict_and_leaves_no_file(catalog, tmp_path, monkeypatch):
    table = small_files_table(catalog, "sales.events", appends=6, rows=20, partitioned=True)
    a_files = [f for f in live_data_files(table) if f.partition[0] == "a"]
    deletes = position_delete_file(table, {a_files[0].file_path: [0], a_files[1].file_path: [1]}, with_bounds=False)
    commit_delete_files(table, [deletes])
    before = rows(table)
    data = tmp_path / "warehouse" / "sales" / "events" / "data"
    on_disk = files_on_disk(data)
    real = group_runner.GroupRunner.commit

    def commit_after_the_delete_file_vanished(self, batch, removable=None):
        Path(deletes.file_path.removeprefix("file://")).unlink()  # as a concurrent expiry would have
        return real(self, batch, removable)

    monkeypatch.setattr(group_runner.GroupRunner, "commit", commit_after_the_delete_file_vanished)
    with pytest.raises(MaintenanceConflictError, match="missing"):
        compact_small_files_streaming(table, target_file_size_bytes=TARGET, min_input_files=3)
    table.refresh()
    assert files_on_disk(data) == on_disk - {deletes.file_path.removeprefix("file://")}  # nothing written is left
    assert len(live_data_files(table)) == 12 and sum(before.values()) == 6 * 20 - 2


def test_an_interrupt_while_a_conflicting_batch_commits_group_by_group_leaves_no_file(catalog, tmp_path, monkeypatch):
    table = small_files_table(catalog, "sales.events", appends=6, rows=20, partitioned=True)
    for number in range(6):
        table.append(batch(1_000 + number * 20, 20, categories=("c", "d")))
    other = Lake(tmp_path).catalog()
    data = tmp_path / "warehouse" / "sales" / "events" / "data"
    real = group_runner.commit_rewrite
    calls = []

    def racing(table_, validator, **kwargs):
        calls.append(1)
        if len(calls) == 1:
            other.load_table("sales.events").delete("id = 1")  # partition 'b': the batch of 4 conflicts
        if len(calls) == 3:
            raise KeyboardInterrupt  # during the second single commit
        return real(table_, validator, **kwargs)

    monkeypatch.setattr(group_runner, "commit_rewrite", racing)
    with pytest.raises(KeyboardInterrupt):
        compact_small_files_streaming(table, target_file_size_bytes=TARGET)
    table.refresh()
    committed = [s for s in table.snapshots() if s.summary.get("iceberg-ops.operation") == "compaction"]
    assert [s.summary["iceberg-ops.compaction.group"] for s in committed] == ["1/4"]
    referenced = {path.removeprefix("file://") for path in _old_files(table)}
    assert files_on_disk(data) <= referenced  # no orphan: the groups not reached deleted their files
    other.close()


def _old_files(table) -> set[str]:
    """Every data file any snapshot still references (time travel keeps the replaced ones)."""
    return {
        entry.data_file.file_path
        for snapshot in table.snapshots()
        for manifest in snapshot.manifests(table.io)
        for entry in manifest.fetch_manifest_entry(table.io, discard_deleted=False)
    }
