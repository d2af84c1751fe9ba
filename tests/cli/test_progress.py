"""The one progress interface: compaction and the mover report :class:`Progress` through ``on_progress``,
the command line draws it (a bar on a terminal, lines otherwise), and Ctrl-C stops a move between units."""

from __future__ import annotations

import io
import os
import signal
from pathlib import Path

import pytest

from iceberg_ops_provider.cli.progress import ProgressDisplay, StopOnInterrupt
from iceberg_ops_provider.data_migration import DataMover
from iceberg_ops_provider.maintenance.compaction import compact_small_files_streaming
from iceberg_ops_provider.progress import Progress, ProgressTracker
from tests.support.tables import files_on_disk, live_data_files, rows, small_files_table


def _progress(label: str = "compact sales.events", **changes: object) -> Progress:
    values = {
        "label": label,
        "rows": 100,
        "bytes": 2048,
        "total_bytes": 8192,
        "units_done": 0,
        "units_total": 2,
        "elapsed": 1.0,
        "files_done": 1,
        "files_total": 4,
        "unit_name": "group",
    }
    return Progress(**{**values, **changes})  # type: ignore[arg-type]


def test_compaction_reports_rows_bytes_files_and_groups_through_on_progress(catalog):
    table = small_files_table(catalog, "sales.events", appends=6, rows=50, partitioned=True)
    total_bytes = sum(f.file_size_in_bytes for f in live_data_files(table))
    seen: list[Progress] = []

    result = compact_small_files_streaming(table, target_file_size_bytes=2**20, on_progress=seen.append)

    last = seen[-1]
    assert (last.files_done, last.files_total, last.units_done, last.units_total) == (12, 12, 2, 2)
    assert last.rows == 300 and last.bytes == last.total_bytes == total_bytes == result.rewritten_bytes_count
    assert last.unit_name == "group" and "12 of 12 files" in last.describe() and "group 2 of 2 done" in last.describe()
    assert [p.units_done for p in seen] == sorted(p.units_done for p in seen)
    assert all(p.files_done <= p.files_total and p.rows <= 300 for p in seen)

    table = small_files_table(catalog, "sales.other", appends=6, rows=50)
    dry: list[Progress] = []
    compact_small_files_streaming(table, target_file_size_bytes=2**20, dry_run=True, on_progress=dry.append)
    assert dry == []


def test_existing_callers_of_the_tracker_and_progress_keep_working():
    tracker = ProgressTracker("move a -> b", total_bytes=100, units_total=2, log_every=0)
    tracker.add(10, 50)
    progress = tracker.snapshot()
    assert (progress.files_done, progress.files_total, progress.unit_name) == (0, None, "unit")
    assert "unit 0 of 2 done" in progress.describe() and "files" not in progress.describe()
    assert Progress("x", 1, 2, None, 0, None, 1.0).describe().startswith("x: 1 rows")


def test_mover_stop_ends_the_run_between_units_and_the_next_run_resumes(catalog, tmp_path: Path):
    source = small_files_table(catalog, "sales.events", appends=6, rows=50)
    mover: DataMover | None = None

    def stop_after_first_unit(progress: Progress) -> None:
        if progress.units_done == 1 and mover is not None:
            mover.stop()

    mover = DataMover(
        catalog,
        "sales.events",
        "archive.events",
        create_target=True,
        commit_every_bytes=1,
        parallelism=2,
        on_progress=stop_after_first_unit,
    )
    stopped = mover.run()

    assert stopped.complete is False and stopped.units_committed == 1 and stopped.units_total == 6
    target = catalog.load_table("archive.events")
    assert sum(rows(target).values()) == 50
    folder = Path(target.location().removeprefix("file://"))
    written = {path for path in files_on_disk(folder) if path.endswith(".parquet")}
    assert written == {f.file_path.removeprefix("file://") for f in live_data_files(target)}  # the unit ahead is gone

    finished = DataMover(catalog, "sales.events", "archive.events", create_target=True, commit_every_bytes=1).run()
    assert finished.complete and finished.units_committed == 5
    target.refresh()
    assert rows(target) == rows(source)


def test_lines_when_not_a_terminal_one_per_unit_and_the_last_figures_at_the_end():
    stream = io.StringIO()
    with ProgressDisplay("auto", stream=stream, interval=60) as display:
        assert display.mode == "lines"
        display(_progress())
        display(_progress(rows=150))  # no unit done, within the interval: kept for the end
        display(_progress(rows=200, units_done=1))  # a unit done, but within a second of the last line
        display(_progress(rows=400, bytes=8192, units_done=2, files_done=4))
    lines = stream.getvalue().splitlines()
    assert len(lines) == 2 and lines[0].startswith("compact sales.events: 100 rows")
    assert "400 rows" in lines[1] and "4 of 4 files" in lines[1] and "group 2 of 2 done" in lines[1]
    assert display.last is not None and display.last.rows == 400


def test_a_bar_shows_bytes_rows_files_units_and_eta(monkeypatch):
    monkeypatch.setenv("COLUMNS", "200")  # a wide terminal: nothing left out
    stream = io.StringIO()
    with ProgressDisplay("bar", stream=stream) as display:
        display(_progress(rows=12_345, files_done=3, units_done=1))
    text = stream.getvalue()
    assert "compact sales.events" in text and "12,345 rows" in text and "3/4 files" in text and "groups 1/2" in text
    assert "ETA" in text

    monkeypatch.setenv("COLUMNS", "80")  # a narrow one: bytes and ETA stay, the rest goes first
    stream = io.StringIO()
    with ProgressDisplay("bar", stream=stream) as display:
        display(_progress(rows=12_345, files_done=3, units_done=1))
    assert "2.0 KiB / 8.0 KiB" in stream.getvalue() and "ETA" in stream.getvalue()


def test_nothing_is_drawn_without_progress():
    stream = io.StringIO()
    with ProgressDisplay("none", stream=stream) as display:
        display(_progress())
    assert stream.getvalue() == "" and display.last is not None


def test_ctrl_c_first_asks_to_stop_then_interrupts_and_is_ignored_once_finished(sigint_interrupts):
    calls: list[str] = []
    before = signal.getsignal(signal.SIGINT)
    with StopOnInterrupt(calls.append, "stopping") as stopping, pytest.raises(KeyboardInterrupt):
        os.kill(os.getpid(), signal.SIGINT)  # nothing to stop yet: interrupt at once
    assert stopping.requested and signal.getsignal(signal.SIGINT) is before

    with StopOnInterrupt(calls.append, "stopping") as stopping:
        stopping.stop = lambda: calls.append("stop")
        os.kill(os.getpid(), signal.SIGINT)
        assert calls == ["stop", "stopping"]
        with pytest.raises(KeyboardInterrupt):
            os.kill(os.getpid(), signal.SIGINT)
        stopping.finished()
        os.kill(os.getpid(), signal.SIGINT)  # ignored
    assert signal.getsignal(signal.SIGINT) is before


def test_stop_on_interrupt_leaves_an_inherited_ignored_sigint_alone():
    previous = signal.signal(signal.SIGINT, signal.SIG_IGN)  # as nohup or a non-interactive shell's & leave it
    try:
        with StopOnInterrupt(lambda message: None, "stopping") as stopping:
            stopping.stop = lambda: None
            assert signal.getsignal(signal.SIGINT) is signal.SIG_IGN
        assert signal.getsignal(signal.SIGINT) is signal.SIG_IGN
    finally:
        signal.signal(signal.SIGINT, previous)


def test_a_narrow_terminal_shortens_a_long_label_before_leaving_out_rows_and_rate(monkeypatch):
    monkeypatch.setenv("COLUMNS", "110")
    label = "move warehouse_sales.customer_events -> archive_2026.customer_events_copy"
    stream = io.StringIO()
    with ProgressDisplay("bar", stream=stream) as display:
        display(_progress(label, rows=12_345, files_total=None, units_done=1, unit_name="unit"))
    text = stream.getvalue()
    assert "12,345 rows" in text and "KiB/s" in text and "ETA" in text
    assert "move wa" in text and "…" in text and "events_copy" in text
    assert all(len(line) <= 110 for line in text.splitlines())
