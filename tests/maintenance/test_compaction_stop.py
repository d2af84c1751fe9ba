"""Stopping a compaction: between groups when asked, and an interrupt during a group's commit leaving no orphan.

A Ctrl-C cannot be timed to land inside a commit call in a subprocess, so these tests raise
``KeyboardInterrupt`` where it would arrive: inside the commit call, before or after the catalog
took it. Everything else (the SQLite catalog, the files, the commits) is real.
"""

from __future__ import annotations

import os
import signal
from pathlib import Path

import pytest
from click.testing import CliRunner

from iceberg_ops_provider.cli import cli
from iceberg_ops_provider.maintenance import compaction
from iceberg_ops_provider.maintenance.compaction import compact_small_files_streaming
from tests.cli.ops_support import sqlite_catalog, sqlite_flags
from tests.maintenance.test_compaction_support import files_on_disk, live_data_files, rows, small_files_table


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
    real_commit = compaction.commit_rewrite

    def interrupted_commit(*args, **kwargs):
        if landed:
            real_commit(*args, **kwargs)
        raise KeyboardInterrupt

    monkeypatch.setattr(compaction, "commit_rewrite", interrupted_commit)
    with pytest.raises(KeyboardInterrupt):
        compact_small_files_streaming(table, target_file_size_bytes=2**20)

    table.refresh()
    assert rows(table) == before
    live = {data_file.file_path.removeprefix("file://") for data_file in live_data_files(table)}
    if landed:
        assert len(live) == 7 and live <= _data_files(table)  # the new file is referenced and kept
    else:
        assert _data_files(table) == files_before and len(live) == 12  # no orphan left behind


def test_the_first_ctrl_c_of_maintain_compact_stops_after_the_group_being_written(
    tmp_path, table, monkeypatch, sigint_interrupts
):
    real_run = compaction._GroupRunner.run

    def run_and_press_ctrl_c(self, *args, **kwargs):
        os.kill(os.getpid(), signal.SIGINT)  # a real SIGINT, handled by the command's handler
        return real_run(self, *args, **kwargs)

    monkeypatch.setattr(compaction._GroupRunner, "run", run_and_press_ctrl_c)
    result = CliRunner().invoke(cli, [*sqlite_flags(tmp_path), "maintain", "compact", "sales.events"])

    assert result.exit_code == 130, result.output
    assert "Stopping once the group being written is committed" in result.stderr
    assert "sales.events: stopped after 1 of 2 group(s)" in result.stderr
    assert "interrupted: stopped during maintenance" in result.stderr
    table.refresh()
    assert len(live_data_files(table)) == 7
