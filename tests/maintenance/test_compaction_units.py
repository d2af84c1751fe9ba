"""Compaction fanned out as units: planned as JSON, run anywhere, each committed exactly once.

On a real SQLite catalog with a partitioned table of many small files: the units cover what a dry run
of the whole compaction would rewrite and survive JSON; running them rewrites every row once; running
them again (a retry) skips them all; two processes given the same units at once commit each unit once;
a process SIGKILLed after its first commit leaves a table a rerun finishes; rows appended meanwhile are
kept; units of another table or malformed JSON are refused before anything is written.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from iceberg_ops_provider.maintenance import compact_small_files_streaming
from iceberg_ops_provider.maintenance.compaction_units import (
    CompactionUnit,
    plan_compaction_units,
    run_compaction_units,
)
from tests.cli.ops_support import sqlite_catalog
from tests.support.tables import batch, live_data_files, rows, small_files_table

ROOT = Path(__file__).resolve().parents[2]

_RUN_UNITS = """
import json, sys, time
from iceberg_ops_provider.catalogs import CatalogFactory
from iceberg_ops_provider.maintenance.compaction_units import run_compaction_units
root, units_file, start_line = sys.argv[1], sys.argv[2], sys.argv[3]
catalog = CatalogFactory.build("sqlite", db_path=f"{root}/catalog.db", warehouse_dir=f"{root}/warehouse")
table = catalog.load_table("sales.events")
units = json.load(open(units_file))
if start_line != "-":
    import os
    open(f"{start_line}.ready.{os.getpid()}", "w").close()
    while not os.path.exists(start_line):
        time.sleep(0.001)
result = run_compaction_units(table, units)
print(json.dumps([group.status for group in result.groups]))
"""


def _compaction_snapshots(table) -> int:
    table.refresh()
    return sum(
        (s.summary.additional_properties if s.summary else {}).get("iceberg-ops.operation") == "compaction"
        for s in table.snapshots()
    )


def _lake(root: Path):
    catalog = sqlite_catalog(root)
    table = small_files_table(catalog, "sales.events", appends=8, rows=40, partitioned=True)
    return catalog, table


def _start(root: Path, units: list[dict], start_line: str = "-") -> subprocess.Popen[str]:
    units_file = root / f"units-{time.monotonic_ns()}.json"
    units_file.write_text(json.dumps(units))
    return subprocess.Popen(
        [sys.executable, "-c", _RUN_UNITS, str(root), str(units_file), start_line],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )


def test_units_are_the_dry_runs_groups_and_survive_json(tmp_path: Path):
    _, table = _lake(tmp_path)
    dry = compact_small_files_streaming(table, min_input_files=2, dry_run=True)

    units = plan_compaction_units(table, min_input_files=2)

    assert [sorted(g.data_files) for g in dry.groups] == [list(u.data_files) for u in units]
    assert len(units) == 2 and {u.partition for u in units} == {"category=a", "category=b"}
    assert [CompactionUnit.from_json(json.loads(json.dumps(u.to_json()))) for u in units] == units
    assert len({u.unit_id for u in units}) == 2 and all(u.planned_snapshot_id == dry.planned_snapshot_id for u in units)


def test_running_the_units_rewrites_every_row_once_and_a_rerun_skips_them(tmp_path: Path):
    _, table = _lake(tmp_path)
    before, files_before = rows(table), len(live_data_files(table))
    units = [u.to_json() for u in plan_compaction_units(table, min_input_files=2)]

    result = run_compaction_units(table, units)

    assert [g.status for g in result.groups] == ["committed", "committed"] and result.committed_groups_count == 2
    assert rows(table) == before and len(live_data_files(table)) < files_before
    assert _compaction_snapshots(table) == 2
    again = run_compaction_units(table, units)  # a retry of a task whose units all landed
    assert [g.status for g in again.groups] == ["skipped", "skipped"] and again.skipped_groups_count == 2
    assert again.snapshot_ids == [] and _compaction_snapshots(table) == 2 and rows(table) == before


def test_rows_appended_between_plan_and_run_are_kept(tmp_path: Path):
    _, table = _lake(tmp_path)
    units = plan_compaction_units(table, min_input_files=2)
    table.append(batch(10_000, 7))
    before = rows(table)

    run_compaction_units(table, units)

    assert rows(table) == before


@pytest.mark.slow
@pytest.mark.long
def test_two_processes_given_the_same_units_commit_each_once(tmp_path: Path):
    _, table = _lake(tmp_path)
    before = rows(table)
    units = [u.to_json() for u in plan_compaction_units(table, min_input_files=2)]
    start_line = str(tmp_path / "go")
    runs = [_start(tmp_path, units, start_line), _start(tmp_path, list(reversed(units)), start_line)]
    deadline = time.monotonic() + 120
    while len(list(tmp_path.glob("go.ready.*"))) < 2:
        assert time.monotonic() < deadline and all(run.poll() is None for run in runs)
        time.sleep(0.01)
    Path(start_line).touch()
    outputs = [run.communicate(timeout=180) for run in runs]

    statuses = [status for stdout, stderr in outputs for status in json.loads(stdout or "null") or [stderr]]
    assert sorted(statuses) == ["committed", "committed", "skipped", "skipped"], outputs
    assert _compaction_snapshots(table) == 2 and rows(table) == before


@pytest.mark.slow
@pytest.mark.long
def test_a_process_killed_after_its_first_commit_leaves_what_a_rerun_finishes(tmp_path: Path):
    _, table = _lake(tmp_path)
    before = rows(table)
    units = [u.to_json() for u in plan_compaction_units(table, min_input_files=2)]
    killed = _start(tmp_path, units)
    deadline = time.monotonic() + 120
    while _compaction_snapshots(table) < 1 and killed.poll() is None:
        assert time.monotonic() < deadline
        time.sleep(0.005)
    killed.send_signal(signal.SIGKILL)
    killed.communicate(timeout=60)
    landed = _compaction_snapshots(table)
    assert rows(table) == before  # whatever landed, the table reads the same rows

    rerun = run_compaction_units(table, units)

    statuses = [g.status for g in rerun.groups]
    assert statuses.count("skipped") == landed and statuses.count("committed") == 2 - landed, statuses
    assert _compaction_snapshots(table) == 2 and rows(table) == before


def test_units_of_another_table_or_malformed_are_refused_before_anything_is_written(tmp_path: Path):
    catalog, table = _lake(tmp_path)
    other = small_files_table(catalog, "sales.other", appends=3, rows=10, partitioned=False)
    theirs = plan_compaction_units(other, min_input_files=2)
    snapshots = len(table.snapshots())

    with pytest.raises(ValueError, match=r"units of sales\.other were given to the compaction of sales\.events"):
        run_compaction_units(table, theirs)
    broken = plan_compaction_units(table, min_input_files=2)[0].to_json()
    del broken["data_files"]
    with pytest.raises(ValueError, match="lacks data_files"):
        run_compaction_units(table, [broken])
    with pytest.raises(ValueError, match="must be a mapping"):
        run_compaction_units(table, ["unit 1"])
    table.refresh()
    assert len(table.snapshots()) == snapshots
