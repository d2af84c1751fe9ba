"""Units copied back to back by the same lanes: the lanes run ahead into the next unit while the caller
commits, never further than the lookahead; a failure anywhere stops every lane, and the mover
deletes the files of every unit it did not commit."""

from __future__ import annotations

import logging
import os
import threading
import time

import pytest

from iceberg_ops_provider.data_migration import DataMover
from iceberg_ops_provider.data_migration import unit_runner as runner_module
from iceberg_ops_provider.errors import MoveConflictError
from tests.data_migration.support import row_multiset, source_table
from tests.data_migration.test_copy import copier, failing_converter, open_paths, target_table

SMALL_UNITS = 1  # every source file is a unit of its own


def wait_until(condition, timeout: float = 30.0) -> bool:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.01)
    return True


def files_on_disk(table) -> set[str]:
    root = table.location().removeprefix("file://") + "/data"
    return {os.path.join(folder, name) for folder, _, names in os.walk(root) for name in names}


def committed_files(table) -> set[str]:
    table.refresh()
    return {task.file.file_path.removeprefix("file://") for task in table.scan().plan_files()}


def test_lanes_run_one_unit_ahead_of_the_caller_and_no_further(catalog) -> None:
    source = source_table(catalog, files=6, rows_per_file=300)
    target = target_table(catalog, "sales.copy")
    tasks = list(source.scan().plan_files())
    units = [tasks[0:2], tasks[2:4], tasks[4:6]]
    with copier(source, target, parallelism=2).pipeline(units, lookahead=1) as pipeline:
        first = pipeline.next_unit()
        assert first.index == 0 and first.rows == 600 and first.data_files
        # Unit 1 is copied while unit 0 is still held; unit 2 waits for unit 0's release.
        assert wait_until(lambda: pipeline.units[1].done)
        time.sleep(0.2)
        third = pipeline.units[2]
        assert third.pieces_left == third.pieces_total == 2 and not third.written
        pipeline.release(first)
        second = pipeline.next_unit()
        pipeline.release(second)
        third = pipeline.next_unit()
        assert (second.rows, third.rows) == (600, 600)
    for copied, unit in zip(pipeline.units, units, strict=True):
        assert copied.bytes_read == sum(task.file.file_size_in_bytes for task in unit)
        assert {f.file_path for f in copied.data_files} == set(copied.written)
    with pytest.raises(IndexError):
        pipeline.next_unit()


def test_a_unit_not_started_can_be_skipped_and_one_started_cannot(catalog) -> None:
    source = source_table(catalog, files=3, rows_per_file=100)
    target = target_table(catalog, "sales.copy")
    tasks = list(source.scan().plan_files())
    with copier(source, target, parallelism=2).pipeline([[tasks[0]], [tasks[1]], [tasks[2]]], lookahead=0) as pipeline:
        first = pipeline.next_unit()
        assert pipeline.skip(2) and pipeline.units[2].skipped
        assert not pipeline.skip(0)
        pipeline.release(first)
        assert pipeline.next_unit().rows == 100
        pipeline.release(pipeline.units[1])
        skipped = pipeline.next_unit()
        assert skipped.skipped and skipped.rows == 0 and skipped.written == []


def test_a_lane_failure_stops_every_lane_and_reaches_the_caller(catalog) -> None:
    source = source_table(catalog, files=4, rows_per_file=200)
    target = target_table(catalog, "sales.copy")
    convert = failing_converter(target, on_call=3, error=OSError("storage went away"))
    tasks = list(source.scan().plan_files())
    pipeline = copier(source, target, convert=convert, parallelism=2).pipeline([tasks[:2], tasks[2:]])
    with pytest.raises(OSError, match="storage went away"), pipeline:
        first = pipeline.next_unit()
        pipeline.release(first)
        pipeline.next_unit()
    assert not any(thread.name.startswith("iceberg-ops-copy") for thread in threading.enumerate())
    assert open_paths(target.location().removeprefix("file://")) == []
    listed = {path.removeprefix("file://") for unit in pipeline.units for path in unit.written}
    assert files_on_disk(target) == listed


def test_a_failed_commit_deletes_its_files_and_those_of_the_unit_copied_ahead(catalog, monkeypatch) -> None:
    source = source_table(catalog, files=4, rows_per_file=300)
    catalog.create_namespace("archive")
    catalog.create_table("archive.orders", schema=source.schema())
    commit_unit = runner_module.commit_unit
    commits = []

    def failing_second(table, files, **kwargs):
        commits.append(kwargs["unit_label"])
        if len(commits) == 2:
            # Let the lanes copy the next unit first: its files must be deleted as well.
            assert wait_until(lambda: len(files_on_disk(table)) > 2 * len(files))
            raise MoveConflictError("lost the race too often")
        return commit_unit(table, files, **kwargs)

    with monkeypatch.context() as patched:
        patched.setattr(runner_module, "commit_unit", failing_second)
        with pytest.raises(MoveConflictError, match="lost the race"):
            DataMover(catalog, "sales.orders", "archive.orders", commit_every_bytes=SMALL_UNITS).run()
    target = catalog.load_table("archive.orders")
    assert files_on_disk(target) == committed_files(target) and len(committed_files(target)) == 1
    result = DataMover(catalog, "sales.orders", "archive.orders", commit_every_bytes=SMALL_UNITS).run()
    assert result.complete and result.units_committed == 3
    assert row_multiset(catalog.load_table("archive.orders")) == row_multiset(source)


def test_a_commit_of_unknown_outcome_keeps_its_files_and_deletes_the_unit_ahead(catalog, monkeypatch) -> None:
    source = source_table(catalog, files=3, rows_per_file=300)
    catalog.create_namespace("archive")
    catalog.create_table("archive.orders", schema=source.schema())
    kept: list[set[str]] = []

    def unknown(table, files, **kwargs):
        assert wait_until(lambda: len(files_on_disk(table)) > len(files))  # the next unit is on its way
        kept.append({f.file_path.removeprefix("file://") for f in files})
        raise ConnectionResetError("the catalog hung up")

    with monkeypatch.context() as patched:
        patched.setattr(runner_module, "commit_unit", unknown)
        with pytest.raises(ConnectionResetError):
            DataMover(catalog, "sales.orders", "archive.orders", commit_every_bytes=SMALL_UNITS).run()
    target = catalog.load_table("archive.orders")
    assert files_on_disk(target) == kept[0]  # only the files whose commit may have landed
    result = DataMover(catalog, "sales.orders", "archive.orders", commit_every_bytes=SMALL_UNITS).run()
    assert result.complete
    assert row_multiset(catalog.load_table("archive.orders")) == row_multiset(source)


def test_units_committed_by_another_worker_meanwhile_are_not_copied(catalog, monkeypatch, caplog) -> None:
    source = source_table(catalog, files=4, rows_per_file=200)
    catalog.create_namespace("archive")
    catalog.create_table("archive.orders", schema=source.schema())
    mover = DataMover(catalog, "sales.orders", "archive.orders", commit_every_bytes=SMALL_UNITS)
    plan = mover.plan()
    commit_unit = runner_module.commit_unit

    def peer_finishes_the_rest(table, files, **kwargs):
        if kwargs["unit_label"] == "1/4":  # units 3 and 4 are not started yet (one unit of lookahead)
            DataMover(catalog, "sales.orders", "archive.orders", commit_every_bytes=SMALL_UNITS).run(plan.units[2:])
        return commit_unit(table, files, **kwargs)

    with monkeypatch.context() as patched, caplog.at_level(logging.INFO, logger=runner_module.__name__):
        patched.setattr(runner_module, "commit_unit", peer_finishes_the_rest)
        result = mover.run()
    assert result.complete and result.units_committed == 2 and result.units_skipped == 2
    assert "unit 3/4 of move" in caplog.text and "unit 4/4 of move" in caplog.text
    assert caplog.text.count(": already committed") == 2
    target = catalog.load_table("archive.orders")
    assert row_multiset(target) == row_multiset(source)
    assert files_on_disk(target) == committed_files(target)
