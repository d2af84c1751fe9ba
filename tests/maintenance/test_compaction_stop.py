"""Stopping a compaction: between groups when asked, and an interrupt during a group's commit leaving no orphan.

A Ctrl-C cannot be timed to land inside a commit call in a subprocess, so these tests raise
``KeyboardInterrupt`` where it would arrive: inside the commit call, before or after the catalog
took it. Everything else (the SQLite catalog, the files, the commits) is real.
"""

from __future__ import annotations

import os
import re
import signal
from pathlib import Path

import pytest
from click.testing import CliRunner

from iceberg_ops_provider.cli import cli
from iceberg_ops_provider.maintenance import group_runner
from iceberg_ops_provider.maintenance.compaction import compact_small_files_streaming
from tests.cli.ops_support import sqlite_catalog, sqlite_flags
from tests.support.tables import batch, files_on_disk, live_data_files, rows, small_files_table


@pytest.fixture
def table(tmp_path: Path):
    """``sales.events``: 12 small files in 2 partitions, so 2 compaction groups."""
    return small_files_table(sqlite_catalog(tmp_path), "sales.events", appends=6, rows=50, partitioned=True)


def _data_files(table) -> set[str]:
    return {path for path in files_on_disk(Path(table.location().removeprefix("file://")) / "data")}


def test_should_stop_ends_the_compaction_between_groups(table):
    before = rows(table)
    asked: list[int] = []

    def should_stop() -> bool:
        asked.append(1)
        return len(asked) > 1  # after the first group

    result = compact_small_files_streaming(table, target_file_size_bytes=2**20, should_stop=should_stop)

    assert result.stopped and result.committed_groups_count == 1 and len(result.groups) == 1
    assert result.file_groups_count == 2 and result.to_json()["stopped"] is True
    table.refresh()
    assert rows(table) == before and len(live_data_files(table)) == 7  # one partition compacted, 6 files left


@pytest.mark.parametrize("landed", [False, True])
def test_an_interrupt_inside_the_commit_deletes_the_group_files_unless_the_commit_landed(table, monkeypatch, landed):
    before, files_before = rows(table), _data_files(table)
    real_commit = group_runner.commit_rewrite

    def interrupted_commit(*args, **kwargs):
        if landed:
            real_commit(*args, **kwargs)
        raise KeyboardInterrupt

    monkeypatch.setattr(group_runner, "commit_rewrite", interrupted_commit)
    with pytest.raises(KeyboardInterrupt):
        compact_small_files_streaming(table, target_file_size_bytes=2**20)

    table.refresh()
    assert rows(table) == before
    live = {data_file.file_path.removeprefix("file://") for data_file in live_data_files(table)}
    if landed:
        assert len(live) == 2 and live <= _data_files(table)  # the new files (both groups, one commit) are kept
    else:
        assert _data_files(table) == files_before and len(live) == 12  # no orphan left behind


def test_the_first_ctrl_c_of_maintain_compact_stops_after_the_groups_being_written(
    tmp_path, table, monkeypatch, sigint_interrupts
):
    for number in range(6):  # a third partition, so a third group that the Ctrl-C keeps from starting
        table.append(batch(10_000 + number * 50, 50, categories=("c",)))
    before = rows(table)
    real_write = group_runner.GroupRunner.write

    def write_and_press_ctrl_c(self, group, planned):
        if group.index == 1:
            os.kill(os.getpid(), signal.SIGINT)  # a real SIGINT, handled by the command's handler
        return real_write(self, group, planned)

    monkeypatch.setattr(group_runner.GroupRunner, "write", write_and_press_ctrl_c)
    result = CliRunner().invoke(cli, [*sqlite_flags(tmp_path), "maintain", "compact", "sales.events"])

    assert result.exit_code == 130, result.output
    assert "Stopping once the groups being written are committed" in result.stderr
    # Two groups are written side by side: the second may have started before the Ctrl-C arrived.
    done = re.search(r"sales\.events: stopped after ([12]) of 3 group\(s\)", result.stderr)
    assert done, result.stderr
    assert "interrupted: stopped during maintenance" in result.stderr
    table.refresh()
    assert len(live_data_files(table)) == 18 - 5 * int(done.group(1)) and rows(table) == before
