"""Compaction against real concurrent writers: a second catalog handle commits between a group's plan
and its commit (the test runs that commit just before the group's own, through the real commit code).

An append is kept (PyIceberg's overwrite would refuse it under the default serializable isolation);
a delete, overwrite or new delete file touching a rewritten file makes that group fail, with its
written files deleted and the table as the other writer left it.
"""

from __future__ import annotations

import threading
from pathlib import Path

import pytest
from pyiceberg.table.snapshots import Operation

from iceberg_ops_provider.errors import MaintenanceConflictError
from iceberg_ops_provider.maintenance import group_runner
from iceberg_ops_provider.maintenance.compaction import compact_small_files_streaming
from tests.support.tables import (
    batch,
    commit_delete_files,
    counted,
    files_on_disk,
    live_data_files,
    position_delete_file,
    rows,
    small_files_table,
)

KIB = 1024
TARGET = 1024 * KIB


def _before_commit_of(monkeypatch, group: int, action) -> None:
    """Run ``action`` right before group ``group`` commits."""
    real = group_runner.commit_rewrite
    seen = []

    def racing(table, validator, **kwargs):
        seen.append(1)
        if len(seen) == group:
            action()
        return real(table, validator, **kwargs)

    monkeypatch.setattr(group_runner, "commit_rewrite", racing)


def test_an_append_between_plan_and_commit_is_kept(catalog, other, monkeypatch):
    table = small_files_table(catalog, "sales.events", appends=8, rows=30, partitioned=True)
    before = rows(table)
    appended = batch(50_000, 10)  # rows in both partitions, so the group's own partition gets new files too
    _before_commit_of(monkeypatch, 1, lambda: other.load_table("sales.events").append(appended))

    result = compact_small_files_streaming(table, target_file_size_bytes=TARGET)

    assert result.committed_groups_count == 2 and result.failed_groups_count == 0
    after = rows(table)
    assert after - before == counted(appended) and not before - after
    assert sum(after.values()) == sum(before.values()) + 10
    append_snapshot = table.snapshots()[-3]
    assert append_snapshot.summary.operation == Operation.APPEND
    assert table.snapshots()[-2].parent_snapshot_id == append_snapshot.snapshot_id  # rebased onto it
    appended_files = {f.file_path for f in live_data_files(table) if f.record_count == 5}
    assert len(appended_files) == 2  # the two appended files are live, not rewritten
    assert "write.delete.isolation-level" not in table.properties


def test_a_delete_of_a_rewritten_file_refuses_that_group_only(catalog, other, monkeypatch, tmp_path: Path):
    table = small_files_table(catalog, "sales.events", appends=8, rows=30, partitioned=True)
    before = rows(table)
    # Group 2 is partition 'b' (odd ids): delete id 31 there, rewriting that file (copy-on-write).
    _before_commit_of(monkeypatch, 2, lambda: other.load_table("sales.events").delete("id = 31"))
    b_files = {f.file_path for f in live_data_files(table) if f.partition[0] == "b"}
    on_disk = files_on_disk(tmp_path / "warehouse")

    with pytest.raises(MaintenanceConflictError, match=r"1 of 2 compaction group\(s\) were not committed") as caught:
        compact_small_files_streaming(table, target_file_size_bytes=TARGET, commit_every_bytes=0)

    result = caught.value.result
    assert [g.status for g in result.groups] == ["committed", "failed"]
    assert "was removed or replaced by snapshot" in result.groups[1].error
    assert result.failed_data_files_count == 8 and result.rewritten_data_files_count == 8
    table.refresh()
    expected = before.copy()
    expected.pop(next(r for r in before if r[0] == 31))
    assert rows(table) == expected  # group 1's commit and the concurrent delete, nothing else
    live = {f.file_path for f in live_data_files(table)}
    assert len(b_files - live) == 1 and len(live & b_files) == 7  # only the other writer's change
    written = files_on_disk(tmp_path / "warehouse") - on_disk
    assert not {p for p in written if "/category=b/" in p and p.endswith(".parquet")} - {
        f.file_path.removeprefix("file://") for f in live_data_files(table)
    }, "group 2's written files were deleted"
    assert MaintenanceConflictError.transient


def test_a_new_position_delete_on_a_rewritten_file_refuses_the_group(catalog, other, monkeypatch):
    table = small_files_table(catalog, "sales.events", appends=6, rows=30)
    victim = live_data_files(table)[2]

    def add_delete():
        concurrent = other.load_table("sales.events")
        commit_delete_files(concurrent, [position_delete_file(concurrent, {victim.file_path: [4]})])

    _before_commit_of(monkeypatch, 1, add_delete)

    with pytest.raises(MaintenanceConflictError) as caught:
        compact_small_files_streaming(table, target_file_size_bytes=TARGET)

    assert "added delete file" in caught.value.result.groups[0].error
    table.refresh()
    assert len(live_data_files(table)) == 6 and sum(rows(table).values()) == 6 * 30 - 1


def test_a_spec_change_between_plan_and_commit_refuses_the_group(catalog, other, monkeypatch):
    table = small_files_table(catalog, "sales.events", appends=6, rows=30)
    before = rows(table)

    def evolve():
        with other.load_table("sales.events").update_spec() as spec:
            spec.add_identity("category")

    _before_commit_of(monkeypatch, 1, evolve)
    with pytest.raises(MaintenanceConflictError) as caught:
        compact_small_files_streaming(table, target_file_size_bytes=TARGET)
    assert "partition spec changed" in caught.value.result.groups[0].error
    table.refresh()
    assert rows(table) == before and len(live_data_files(table)) == 6
    # Run again: it plans on the new spec and rewrites the old-spec files into it.
    assert compact_small_files_streaming(table, target_file_size_bytes=TARGET).committed_groups_count == 1
    assert rows(table) == before and {f.spec_id for f in live_data_files(table)} == {table.spec().spec_id}


def test_an_expiry_that_deletes_planned_input_files_is_a_conflict_not_a_crash(catalog, other, monkeypatch):
    from datetime import UTC, datetime

    from iceberg_ops_provider.maintenance import expire_snapshots

    table = small_files_table(catalog, "sales.events", appends=8, rows=30, partitioned=True)
    started = []
    first = threading.Lock()
    real_write = group_runner.GroupRunner.write

    def write_after_a_rival_expiry(self, group, planned):
        # Timing is the only stand-in: the rival's delete and expiry are real commits and deletes.
        with first:  # groups are written side by side: the rival runs once, before any group reads
            if not started:
                started.append(True)
                rival = other.load_table("sales.events")
                rival.delete("id = 1")  # rewrites one planned input file ...
                expire_snapshots(rival, older_than=datetime.now(UTC))  # ... and deletes the old one from storage
        return real_write(self, group, planned)

    monkeypatch.setattr(group_runner.GroupRunner, "write", write_after_a_rival_expiry)
    with pytest.raises(MaintenanceConflictError, match=r"compaction group\(s\) were not committed") as caught:
        compact_small_files_streaming(table, target_file_size_bytes=TARGET)
    assert {g.status for g in caught.value.result.groups} == {"failed"}  # its plan's snapshot is gone: all refused
    table.refresh()
    assert 1 not in {row[0] for row in rows(table)} and len(rows(table)) == 8 * 30 - 1
