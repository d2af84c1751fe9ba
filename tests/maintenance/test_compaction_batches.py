"""Compaction groups written side by side and committed several at a time.

Small groups are committed together, one ``replace`` snapshot per batch; a conflict with a batch
commits its groups one by one so only the touched group fails; delete files are chosen at commit
time; a failure or an interrupt while groups are in flight leaves no file behind. Everything is
real (SQLite catalog, Parquet files, concurrent commits through a second catalog handle); where a
test needs a moment (the rival commit just before the batch's), it wraps the real commit call.
"""

from __future__ import annotations

import threading
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from iceberg_ops_provider.errors import MaintenanceConflictError
from iceberg_ops_provider.maintenance import group_runner
from iceberg_ops_provider.maintenance.compaction import compact_small_files_streaming
from tests.support.tables import (
    batch,
    commit_delete_files,
    files_on_disk,
    live_data_files,
    position_delete_file,
    rows,
    small_files_table,
)

KIB = 1024
TARGET = 1024 * KIB


def _compactions(table) -> list:
    return [s for s in table.snapshots() if s.summary.get("iceberg-ops.operation") == "compaction"]


def _four_partitions(catalog):
    table = small_files_table(catalog, "sales.events", appends=6, rows=40, partitioned=True)
    for number in range(6):
        table.append(batch(10_000 + number * 40, 40, categories=("c", "d")))
    return table


def test_small_groups_are_committed_together_as_one_snapshot(catalog):
    table = _four_partitions(catalog)
    before = rows(table)

    result = compact_small_files_streaming(table, target_file_size_bytes=TARGET)

    assert result.committed_groups_count == 4 and len(result.snapshot_ids) == 1
    assert {group.snapshot_id for group in result.groups} == set(result.snapshot_ids)
    [snapshot] = _compactions(table)
    assert snapshot.summary["iceberg-ops.compaction.group"] == "1-4/4"
    assert snapshot.summary["iceberg-ops.compaction.partition"] == "4 partitions"
    assert snapshot.summary["iceberg-ops.compaction.rewritten-data-files"] == "24"
    assert rows(table) == before and len(live_data_files(table)) == 4


def test_commit_every_bytes_zero_commits_each_group_alone(catalog):
    table = _four_partitions(catalog)

    result = compact_small_files_streaming(table, target_file_size_bytes=TARGET, commit_every_bytes=0)

    assert len(result.snapshot_ids) == 4 and len({group.snapshot_id for group in result.groups}) == 4
    assert [s.summary["iceberg-ops.compaction.group"] for s in _compactions(table)] == ["1/4", "2/4", "3/4", "4/4"]


def test_a_batch_is_due_once_its_groups_rewrote_commit_every_bytes(catalog):
    table = _four_partitions(catalog)
    group_bytes = max(f.file_size_in_bytes for f in live_data_files(table)) * 6

    result = compact_small_files_streaming(
        table, target_file_size_bytes=TARGET, commit_every_bytes=group_bytes + 1, max_concurrent_groups=1
    )

    assert len(result.snapshot_ids) == 2  # two groups' bytes reach it: groups 1-2, then 3-4
    assert [s.summary["iceberg-ops.compaction.group"] for s in _compactions(table)] == ["1-2/4", "3-4/4"]


def _before_the_first_commit(monkeypatch, action) -> None:
    real = group_runner.commit_rewrite
    calls = []

    def racing(table, validator, **kwargs):
        calls.append(1)
        if len(calls) == 1:
            action()
        return real(table, validator, **kwargs)

    monkeypatch.setattr(group_runner, "commit_rewrite", racing)


def test_a_conflict_with_a_batch_fails_only_the_group_it_touches(catalog, other, monkeypatch):
    table = small_files_table(catalog, "sales.events", appends=8, rows=30, partitioned=True)
    # Group 2 is partition 'b' (odd ids): the rival deletes id 31 there just before the batch commits.
    _before_the_first_commit(monkeypatch, lambda: other.load_table("sales.events").delete("id = 31"))

    with pytest.raises(MaintenanceConflictError, match=r"1 of 2 compaction group\(s\) were not committed") as caught:
        compact_small_files_streaming(table, target_file_size_bytes=TARGET)

    result = caught.value.result
    assert [group.status for group in result.groups] == ["committed", "failed"]
    assert [s.summary["iceberg-ops.compaction.group"] for s in _compactions(table)] == ["1/2"]
    table.refresh()
    assert 31 not in {row[0] for row in rows(table)} and len(rows(table)) == 8 * 30 - 1


def _spanning_delete(catalog):
    """40 small files in one partition, three groups; a delete file hiding a row of group 1 and one of group 3."""
    table = small_files_table(catalog, "sales.events", appends=40, rows=100)
    target = sum(f.file_size_in_bytes for f in live_data_files(table)) // 25
    plan = compact_small_files_streaming(table, target_file_size_bytes=target, dry_run=True)
    assert plan.file_groups_count == 3
    first, last = plan.groups[0].data_files, plan.groups[-1].data_files
    spanning = position_delete_file(table, {first[0]: [0], last[0]: [0]}, with_bounds=False)
    commit_delete_files(table, [spanning])
    return table, target, spanning, last


def _live_delete_files(table) -> set[str]:
    return {d.file_path for task in table.scan().plan_files() for d in task.delete_files}


def test_a_delete_file_spanning_a_failed_group_stays(catalog, other, monkeypatch):
    """Chosen at commit time: a delete file whose targets lie in two groups goes only when both commit."""
    table, target, spanning, last = _spanning_delete(catalog)
    deleted = rows(table)
    rival_id = pq.read_table(last[1].removeprefix("file://")).column("id")[5].as_py()  # in group 3
    _before_the_first_commit(monkeypatch, lambda: other.load_table("sales.events").delete(f"id = {rival_id}"))

    with pytest.raises(MaintenanceConflictError, match=r"1 of 3 compaction group\(s\) were not committed") as caught:
        compact_small_files_streaming(table, target_file_size_bytes=target, commit_every_bytes=2**40)

    assert [group.status for group in caught.value.result.groups] == ["committed", "committed", "failed"]
    assert caught.value.result.removed_delete_files_count == 0
    table.refresh()
    expected = deleted.copy()
    expected.pop(next(row for row in deleted if row[0] == rival_id))
    assert rows(table) == expected  # the spanning delete still hides its row of group 3's file
    assert spanning.file_path in _live_delete_files(table)


def test_without_conflicts_a_batch_removes_a_delete_file_spanning_its_groups(catalog):
    table, target, _, _ = _spanning_delete(catalog)
    deleted = rows(table)

    result = compact_small_files_streaming(table, target_file_size_bytes=target, commit_every_bytes=2**40)

    assert len(result.snapshot_ids) == 1 and result.removed_delete_files_count == 1
    assert rows(table) == deleted and _live_delete_files(table) == set()


def test_groups_are_written_side_by_side(catalog, monkeypatch):
    table = _four_partitions(catalog)
    both_writing = threading.Barrier(2, timeout=20)
    real_write = group_runner.GroupRunner.write

    def write(self, group, planned):
        if group.index <= 2:
            both_writing.wait()  # breaks (and the compaction raises) unless groups 1 and 2 run at once
        return real_write(self, group, planned)

    monkeypatch.setattr(group_runner.GroupRunner, "write", write)
    assert compact_small_files_streaming(table, target_file_size_bytes=TARGET).committed_groups_count == 4


def test_one_group_at_a_time_when_asked(catalog, monkeypatch):
    table = _four_partitions(catalog)
    running, most = [0], [0]
    lock = threading.Lock()
    real_write = group_runner.GroupRunner.write

    def write(self, group, planned):
        with lock:
            running[0] += 1
            most[0] = max(most[0], running[0])
        try:
            return real_write(self, group, planned)
        finally:
            with lock:
                running[0] -= 1

    monkeypatch.setattr(group_runner.GroupRunner, "write", write)
    compact_small_files_streaming(table, target_file_size_bytes=TARGET, max_concurrent_groups=1)
    assert most[0] == 1


def test_a_group_that_cannot_be_read_stops_the_call_and_leaves_no_file(catalog, tmp_path: Path):
    table = _four_partitions(catalog)
    before, on_disk = rows(table), files_on_disk(tmp_path / "warehouse")
    broken = next(f for f in live_data_files(table) if f.partition[0] == "c")
    Path(broken.file_path.removeprefix("file://")).write_bytes(b"not parquet at all")

    with pytest.raises(Exception, match=r"(?i)parquet"):
        compact_small_files_streaming(table, target_file_size_bytes=TARGET)

    table.refresh()
    assert _compactions(table) == []  # the groups written before it were waiting for their batch
    assert files_on_disk(tmp_path / "warehouse") == on_disk  # their files were deleted
    Path(broken.file_path.removeprefix("file://")).unlink()
    assert len(rows(table, row_filter="category = 'a'")) == sum(1 for r in before if r[1] == "a")


def test_an_interrupt_while_groups_are_written_leaves_no_file(catalog, tmp_path: Path):
    table = _four_partitions(catalog)
    before, on_disk = rows(table), files_on_disk(tmp_path / "warehouse")
    asked = []

    def interrupt_at_the_third_group() -> bool:
        asked.append(1)
        if len(asked) == 3:  # groups 1 and 2 are being written or waiting for their batch
            raise KeyboardInterrupt
        return False

    with pytest.raises(KeyboardInterrupt):
        compact_small_files_streaming(table, target_file_size_bytes=TARGET, should_stop=interrupt_at_the_third_group)

    table.refresh()
    assert _compactions(table) == [] and rows(table) == before
    assert files_on_disk(tmp_path / "warehouse") == on_disk


@pytest.mark.parametrize(
    ("argument", "value"),
    [
        ("commit_every_bytes", -1),
        ("commit_every_bytes", "10"),
        ("commit_every_bytes", True),
        ("max_concurrent_groups", 0),
        ("max_concurrent_groups", 1.5),
    ],
)
def test_bad_batching_arguments_are_refused_naming_them(catalog, argument, value):
    table = _four_partitions(catalog)
    snapshots = len(table.snapshots())
    with pytest.raises(ValueError, match=rf"{argument}.* must be an integer of at least \d, got {value!r}"):
        compact_small_files_streaming(table, target_file_size_bytes=TARGET, **{argument: value})
    table.refresh()
    assert len(table.snapshots()) == snapshots
