"""Compaction of tables with merge-on-read deletes: position deletes are applied and the delete files
that only touch rewritten files are removed; equality deletes are refused before anything is written."""

from __future__ import annotations

from pathlib import Path

import pytest
from pyiceberg.expressions.parser import parse

from iceberg_ops_provider.errors import UnsupportedDeleteFilesError
from iceberg_ops_provider.maintenance.candidates import plan_candidates
from iceberg_ops_provider.maintenance.compaction import compact_small_files_streaming
from tests.support.tables import (
    commit_delete_files,
    equality_delete_file,
    files_on_disk,
    live_data_files,
    position_delete_file,
    rows,
    small_files_table,
)

KIB = 1024


def _by_first_id(table):
    """Data files ordered by the first id they hold (one per append when unpartitioned)."""
    return sorted(live_data_files(table), key=lambda f: int.from_bytes(f.lower_bounds[1], "little", signed=True))


def _live_delete_files(table) -> set[str]:
    return {d.file_path for task in table.scan().plan_files() for d in task.delete_files}


def test_position_deletes_are_applied_and_the_delete_files_removed(catalog):
    table = small_files_table(catalog, "sales.events", appends=6, rows=20, partitioned=True)
    original = rows(table)
    a_files = sorted((f for f in live_data_files(table) if f.partition[0] == "a"), key=lambda f: f.file_path)
    single = position_delete_file(table, {a_files[0].file_path: [0, 3]})
    spanning = position_delete_file(table, {a_files[1].file_path: [1], a_files[2].file_path: [2]}, with_bounds=False)
    commit_delete_files(table, [single, spanning])
    deleted = rows(table)
    # PyIceberg applies them: three rows fewer, all from partition 'a'.
    assert sum(original.values()) - sum(deleted.values()) == 4 and not (deleted - original)
    assert {r[1] for r in (original - deleted).elements()} == {"a"}
    assert _live_delete_files(table) == {single.file_path, spanning.file_path}

    result = compact_small_files_streaming(table, target_file_size_bytes=1024 * KIB, min_input_files=3)

    assert rows(table) == deleted
    assert _live_delete_files(table) == set()
    assert result.removed_delete_files_count == 2
    assert sorted(result.groups[0].delete_files) == sorted([single.file_path, spanning.file_path])
    summary = table.snapshots()[-1].summary  # both groups in one snapshot; only partition 'a' had deletes
    assert summary["removed-delete-files"] == "2" and summary["removed-position-deletes"] == "4"
    assert int(summary["deleted-records"]) - int(summary["added-records"]) == 4
    assert summary["total-delete-files"] == "0"


def test_a_delete_file_that_also_touches_a_file_left_alone_stays(catalog):
    table = small_files_table(catalog, "sales.events", appends=6, rows=200)
    files = _by_first_id(table)
    big = files[0]  # made "large" below by choosing a target it is not small against
    delete_file = position_delete_file(table, {big.file_path: [5], files[3].file_path: [7]}, with_bounds=False)
    commit_delete_files(table, [delete_file])
    deleted = rows(table)
    target = int(big.file_size_in_bytes / 0.75) - 1  # big is just at 75% of it: not small
    assert all(f.file_size_in_bytes < 0.75 * target for f in files[1:])

    result = compact_small_files_streaming(table, target_file_size_bytes=target)

    assert result.rewritten_data_files_count == 5 and result.removed_delete_files_count == 0
    assert rows(table) == deleted  # the delete file still applies to the file left alone
    assert _live_delete_files(table) == {delete_file.file_path}
    assert big.file_path in {f.file_path for f in live_data_files(table)}


def test_a_delete_file_spanning_groups_is_removed_by_the_last_group_it_touches(catalog):
    table = small_files_table(catalog, "sales.events", appends=40, rows=100)
    target = sum(f.file_size_in_bytes for f in live_data_files(table)) // 25
    plan = compact_small_files_streaming(table, target_file_size_bytes=target, dry_run=True).groups
    assert len(plan) == 3
    spanning = position_delete_file(table, {plan[0].data_files[0]: [1], plan[2].data_files[-1]: [2]}, with_bounds=False)
    emptied = position_delete_file(table, {plan[1].data_files[3]: range(100)})  # every row of one file
    # Without bounds a delete file is listed for every file of its partition, so every group sees this
    # one; the first group removes it, and the others must not try again.
    early = position_delete_file(table, {plan[0].data_files[1]: [0]}, with_bounds=False)
    commit_delete_files(table, [spanning, emptied, early])
    deleted = rows(table)

    result = compact_small_files_streaming(table, target_file_size_bytes=target)

    assert result.committed_groups_count == 3 and rows(table) == deleted
    assert [g.delete_files for g in result.groups] == [[early.file_path], [emptied.file_path], [spanning.file_path]]
    assert result.removed_delete_files_count == 3 and result.failed_groups_count == 0
    assert [g.data_files for g in result.groups] == [g.data_files for g in plan]
    assert _live_delete_files(table) == set()


@pytest.mark.parametrize("dry_run", [False, True])
def test_equality_deletes_are_refused_before_anything_is_written(catalog, tmp_path: Path, dry_run: bool):
    table = small_files_table(catalog, "sales.events", appends=6, rows=20)
    commit_delete_files(table, [equality_delete_file(table, [3, 4])])
    files, snapshots = files_on_disk(tmp_path / "warehouse"), len(table.snapshots())

    with pytest.raises(UnsupportedDeleteFilesError, match=r"equality delete file\(s\).*nothing was written"):
        compact_small_files_streaming(table, target_file_size_bytes=1024 * KIB, dry_run=dry_run)

    assert files_on_disk(tmp_path / "warehouse") == files and len(table.snapshots()) == snapshots
    assert UnsupportedDeleteFilesError.transient is False


@pytest.mark.parametrize("where", ["true", "category = 'a'", "id < 150"])
def test_candidates_carry_exactly_the_delete_files_a_scan_applies(catalog, where: str):
    table = small_files_table(catalog, "sales.events", appends=6, rows=50, partitioned=True)
    files = sorted(live_data_files(table), key=lambda f: f.file_path)
    a_files = [f for f in files if f.partition[0] == "a"]
    commit_delete_files(
        table,
        [
            position_delete_file(table, {a_files[0].file_path: [1]}),
            position_delete_file(table, {a_files[1].file_path: [2], a_files[3].file_path: [0]}, with_bounds=False),
            position_delete_file(table, {files[-1].file_path: [3]}),
        ],
    )
    expression = parse(where)

    def keep(data_file) -> bool:
        return data_file.file_size_in_bytes % 2 == 0 or data_file.partition[0] == "a"  # any rule will do

    planned = plan_candidates(table.metadata, table.io, table.current_snapshot(), expression, keep)

    expected = {
        (task.file.file_path, frozenset(d.file_path for d in task.delete_files))
        for task in table.scan(row_filter=expression).plan_files()
        if keep(task.file)
    }
    assert {(task.file.file_path, frozenset(d.file_path for d in task.delete_files)) for task in planned} == expected
    assert expected and any(task.delete_files for task in planned)
    assert all(task.file.lower_bounds is None and task.file.record_count == 50 // 2 for task in planned)
