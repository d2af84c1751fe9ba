"""Two expiries of one table at once: neither fails on a file the other deleted, and nothing retained breaks.

The race: expiry B (keep 30) commits and reads the table again to decide what to delete; expiry A (keep
5), in another process, commits after that read and deletes the manifest lists of snapshots B still
counts as retained. B's next read of such a list finds no file. It reads the table again (those
snapshots are gone from it now) and decides on that; only when the file stays missing does it report a
transient conflict. A dry run whose plan loses files the same way plans again.

The first test places the other process's whole expiry at that moment (the hook only chooses when; the
expiry is a real one in a real process). The second starts two processes at once, several rounds, and
checks what they leave.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from datetime import UTC, datetime
from pathlib import Path

import pyarrow as pa
import pytest

from iceberg_ops_provider.errors import MaintenanceConflictError
from iceberg_ops_provider.maintenance import expire as expire_module
from iceberg_ops_provider.maintenance import expire_snapshots
from iceberg_ops_provider.maintenance.files import ManifestReader
from tests.cli.ops_support import sqlite_catalog

SCHEMA = pa.schema([pa.field("id", pa.int64())])
ROOT = Path(__file__).resolve().parents[2]

_EXPIRE = """
import json, sys
from datetime import UTC, datetime
from iceberg_ops_provider.catalogs import CatalogFactory
from iceberg_ops_provider.maintenance import expire_snapshots
root, keep, start_line = sys.argv[1], int(sys.argv[2]), sys.argv[3]
catalog = CatalogFactory.build("sqlite", db_path=f"{root}/catalog.db", warehouse_dir=f"{root}/warehouse")
table = catalog.load_table("sales.events")
if start_line != "-":
    import os, time
    open(f"{start_line}.ready.{os.getpid()}", "w").close()
    while not os.path.exists(start_line):
        time.sleep(0.001)
try:
    result = expire_snapshots(table, older_than=datetime.now(UTC), retain_last=keep)
    print(json.dumps({"expired": len(result.expired_snapshot_ids), "failed": result.failed_deletes}))
except Exception as exc:
    print(json.dumps({"error": type(exc).__name__, "transient": getattr(exc, "transient", None), "text": str(exc)}))
"""


def _table(root: Path, snapshots: int = 40):
    catalog = sqlite_catalog(root)
    catalog.create_namespace("sales")
    table = catalog.create_table("sales.events", SCHEMA)
    for batch in range(snapshots):
        table.append(pa.table({"id": pa.array([batch], pa.int64())}))
    return catalog, table


def _expire_elsewhere(root: Path, keep: int, start_line: str = "-") -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-c", _EXPIRE, str(root), str(keep), start_line],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )


def _everything_readable(table) -> None:
    """Every retained snapshot reads its rows from files that exist."""
    table.refresh()
    for snapshot in table.snapshots():
        rows = table.scan(snapshot_id=snapshot.snapshot_id).to_arrow()
        assert rows.num_rows == len(set(rows.column("id").to_pylist()))
    for path in table.inspect.all_files().column("file_path").to_pylist():
        assert os.path.exists(path.removeprefix("file://")), path


def test_a_stricter_expiry_landing_in_between_is_read_around(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    _, table = _table(tmp_path)
    read_lists = ManifestReader.manifests
    other: list[str] = []

    def manifests_after_the_other_expiry(self, snapshot):
        if not other:  # the first list this expiry reads after its commit: the other expiry lands now
            done = _expire_elsewhere(tmp_path, keep=5)
            other.append(done.communicate(timeout=120)[0])
        return read_lists(self, snapshot)

    ManifestReader._lists.clear()  # nothing cached from earlier tests: every list is read from storage
    monkeypatch.setattr(ManifestReader, "manifests", manifests_after_the_other_expiry)

    result = expire_snapshots(table, older_than=datetime.now(UTC), retain_last=30)

    assert '"expired": 25' in other[0], other  # the other one expired what this one kept, and deleted its lists
    assert len(result.expired_snapshot_ids) == 10 and result.failed_deletes == []
    assert len(table.snapshots()) == 5
    assert sorted(table.scan().to_arrow().column("id").to_pylist()) == list(range(40))
    _everything_readable(table)


def test_a_conflict_that_outlasts_every_attempt_is_transient_and_says_the_commit_landed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    """Were the file to stay missing (it never does after a concurrent expiry), the error says what landed."""
    _, table = _table(tmp_path, snapshots=6)
    calls = {"n": 0}

    def missing(*args, **kwargs):
        calls["n"] += 1
        raise FileNotFoundError("snap-0.avro")

    monkeypatch.setattr(expire_module, "_unreachable_files", missing)
    with pytest.raises(MaintenanceConflictError) as conflict:
        expire_snapshots(table, older_than=datetime.now(UTC), retain_last=2)
    assert conflict.value.transient and "commit landed" in str(conflict.value) and calls["n"] > 1
    table.refresh()
    assert len(table.snapshots()) == 2  # the commit stays
    assert expire_snapshots(table, older_than=datetime.now(UTC), retain_last=2).expired_snapshot_ids == []


@pytest.mark.slow
@pytest.mark.long
def test_two_processes_expiring_at_once_leave_a_readable_table(tmp_path: Path):
    for round_number, (first_keep, second_keep) in enumerate([(3, 20), (20, 3)]):
        root = tmp_path / f"round{round_number}"
        root.mkdir()
        _, table = _table(root, snapshots=25)
        start_line = str(root / "go")
        runs = [_expire_elsewhere(root, keep, start_line) for keep in (first_keep, second_keep)]
        deadline = time.monotonic() + 120
        while len(list(root.glob("go.ready.*"))) < 2:  # both loaded the table and wait at the start line
            assert time.monotonic() < deadline and all(run.poll() is None for run in runs)
            time.sleep(0.01)
        Path(start_line).touch()
        outputs = [run.communicate(timeout=180) for run in runs]
        for stdout, stderr in outputs:
            assert '"error"' not in stdout or '"transient": true' in stdout, (stdout, stderr)
            assert "FileNotFoundError" not in stdout, stdout
        table.refresh()
        assert len(table.snapshots()) == min(first_keep, second_keep) or any('"error"' in o for o, _ in outputs)
        assert sorted(table.scan().to_arrow().column("id").to_pylist()) == list(range(25))
        _everything_readable(table)
