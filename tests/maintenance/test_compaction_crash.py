"""A compaction killed with SIGKILL, in a subprocess, at chosen points and at arbitrary moments: the
table stays readable with the same rows, the killed group's files are orphans nothing references,
and a rerun finishes the job.

The kills at chosen points run in the default suite. The kills at random moments are a long suite
(``make test-all``): each kill falls within the time a whole compaction takes on this machine,
measured by a reference run first; ``ICEBERG_OPS_COMPACTION_KILLS`` sets how many (``make crash``
runs 12) and ``ICEBERG_OPS_CRASH_SEED`` replays a run's moments.
"""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import time
from datetime import UTC, datetime
from pathlib import Path

import pytest

from iceberg_ops_provider.maintenance.compaction import compact_small_files_streaming
from iceberg_ops_provider.maintenance.files import ManifestReader
from iceberg_ops_provider.maintenance.orphans import remove_orphan_files
from tests.support.lake import Lake
from tests.support.tables import files_on_disk, live_data_files, rows, small_files_table

KILLS = int(os.environ.get("ICEBERG_OPS_COMPACTION_KILLS", "3"))

CHILD = """
import os, signal, sys
from iceberg_ops_provider.catalogs import CatalogFactory
from iceberg_ops_provider.maintenance import streaming
from iceberg_ops_provider.maintenance.compaction import compact_small_files_streaming

db, warehouse, point, target = sys.argv[1:5]
catalog = CatalogFactory.build("sqlite", db_path=db, warehouse_dir=warehouse)
table = catalog.load_table("sales.events")

def die():
    os.kill(os.getpid(), signal.SIGKILL)

if point == "mid-write":  # group 2 has closed its first output file
    close_file = streaming.GroupRewriter.close_file
    def closing(self, file, record):
        close_file(self, file, record)
        if "group 2/" in self.label:
            die()
    streaming.GroupRewriter.close_file = closing
elif point in ("before-commit", "after-commit"):  # group 2's manifests are written; its catalog commit
    commit_table = type(catalog).commit_table
    calls = []
    def committing(self, *args, **kwargs):
        calls.append(1)
        if len(calls) == 2 and point == "before-commit":
            die()
        response = commit_table(self, *args, **kwargs)
        if len(calls) == 2:
            die()
        return response
    type(catalog).commit_table = committing
print("compacting", flush=True)
compact_small_files_streaming(table, target_file_size_bytes=int(target))
print("done", flush=True)
"""


def _referenced(table) -> set[str]:
    """Every file the table's metadata reaches: metadata log, manifest lists, manifests, data and delete files."""
    reader = ManifestReader(table.io)
    metadata = table.metadata
    paths = {table.metadata_location} | {entry.metadata_file for entry in metadata.metadata_log}
    for snapshot in metadata.snapshots:
        paths.add(snapshot.manifest_list)
        for manifest in reader.manifests(snapshot):
            paths.add(manifest.manifest_path)
            paths.update(entry.path for entry in reader.entries(manifest))
    return {path.removeprefix("file://") for path in paths}


@pytest.fixture
def setup(catalog, tmp_path: Path):
    table = small_files_table(catalog, "sales.events", appends=40, rows=100)
    target = sum(f.file_size_in_bytes for f in live_data_files(table)) // 25  # three groups
    return table, target, rows(table), tmp_path


def _child(tmp_path: Path, point: str, target: int) -> subprocess.Popen[str]:
    command = [
        sys.executable,
        "-c",
        CHILD,
        str(tmp_path / "catalog.db"),
        str(tmp_path / "warehouse"),
        point,
        str(target),
    ]
    return subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def _check_and_finish(catalog, before, target: int, tmp_path: Path) -> set[str]:
    """The table reads the same; returns the orphans; then a rerun compacts what is left and nothing more.

    ``tmp_path`` holds the catalog and warehouse of this table alone.
    """
    table = catalog.load_table("sales.events")
    assert rows(table) == before
    orphans = files_on_disk(tmp_path / "warehouse") - _referenced(table)
    assert all(path.startswith(str(tmp_path / "warehouse" / "sales" / "events")) for path in orphans)
    # Orphan-file removal finds exactly these and deletes them; the table does not notice.
    removed = remove_orphan_files(table, older_than=datetime.now(UTC))
    assert {path.removeprefix("file://") for path in removed.orphan_file_locations} == orphans
    assert files_on_disk(tmp_path / "warehouse") & orphans == set() and rows(table) == before
    rerun = compact_small_files_streaming(table, target_file_size_bytes=target)
    assert rerun.failed_groups_count == 0 and rows(table) == before
    assert compact_small_files_streaming(table, target_file_size_bytes=target).file_groups_count == 0
    return orphans


@pytest.mark.parametrize("point", ["mid-write", "before-commit", "after-commit"])
def test_sigkill_at_each_point_of_a_group(catalog, setup, point: str):
    table, target, before, tmp_path = setup
    child = _child(tmp_path, point, target)
    _, stderr = child.communicate(timeout=120)
    assert child.returncode == -signal.SIGKILL, stderr

    table = catalog.load_table("sales.events")
    committed = [s for s in table.snapshots() if s.summary.get("iceberg-ops.operation") == "compaction"]
    # Groups are written two at a time and each commits while the next ones are written: killed in
    # group 2's write, group 1 may or may not have committed; in group 2's commit, group 1 has.
    expected = {"mid-write": {0, 1}, "before-commit": {1}, "after-commit": {2}}[point]
    assert len(committed) in expected
    orphans = _check_and_finish(catalog, before, target, tmp_path)
    orphan_data = {path for path in orphans if path.endswith(".parquet")}
    # Output files of groups not committed (group 3 may have started beside group 2), nothing a
    # snapshot needs; killed inside the commit, also group 2's manifests and manifest list.
    assert all("/data/" in path for path in orphan_data)
    assert point == "after-commit" or orphan_data
    assert bool(orphans - orphan_data) == (point == "before-commit")
    assert all("/metadata/" in path and path.endswith(".avro") for path in orphans - orphan_data)


def _compaction_at(root: Path):
    """A catalog in ``root`` holding ``sales.events``: 40 small files, compacted in three groups."""
    catalog = Lake(root).catalog()
    table = small_files_table(catalog, "sales.events", appends=40, rows=100)
    target = sum(f.file_size_in_bytes for f in live_data_files(table)) // 25
    return catalog, target, rows(table)


def _run_child(root: Path, target: int, kill_after: float | None) -> tuple[bool, float]:
    """Compact in a child; SIGKILL it ``kill_after`` seconds into the compaction. Whether the kill landed
    before the compaction finished, and how long the child compacted."""
    child = _child(root, "none", target)
    assert child.stdout is not None
    assert child.stdout.readline().strip() == "compacting"
    began = time.monotonic()
    if kill_after is None:
        assert child.stdout.readline().strip() == "done"  # the compaction itself, not the interpreter's exit
        took = time.monotonic() - began
    else:
        time.sleep(kill_after)
        child.send_signal(signal.SIGKILL)  # harmless if it already exited
        took = time.monotonic() - began
    stdout, stderr = child.communicate(timeout=120)
    assert child.returncode in (0, -signal.SIGKILL), stderr
    return child.returncode == -signal.SIGKILL and "done" not in stdout, took


@pytest.mark.long
def test_sigkills_at_random_moments_of_a_compaction(tmp_path: Path):
    seed = int(os.environ.get("ICEBERG_OPS_CRASH_SEED", time.time_ns() % 10_000))
    chooser = random.Random(seed)
    _, target, _ = _compaction_at(tmp_path / "reference")
    _, duration = _run_child(tmp_path / "reference", target, None)
    # A kill after the compaction finished proves nothing: trials go on until KILLS kills landed while it
    # ran (a trial can run faster than the reference on a machine whose load changed), up to 3 x KILLS.
    landed = trials = 0
    while landed < KILLS and trials < 3 * KILLS:
        root = tmp_path / f"trial{trials}"
        trials += 1
        catalog, target, before = _compaction_at(root)
        killed, _ = _run_child(root, target, chooser.uniform(0.02, 0.8) * duration)
        landed += killed
        orphans = _check_and_finish(catalog, before, target, root)
        table = catalog.load_table("sales.events")
        files = live_data_files(table)
        assert all(f.file_size_in_bytes >= 0.5 * target for f in files) or len(files) < 5, f"seed {seed}"
        assert all("/data/" in path or "/metadata/" in path for path in orphans), f"seed {seed}"
        catalog.close()
    assert landed == KILLS, f"{landed} of {trials} kills landed in a {duration:.2f} s compaction (seed {seed})"
