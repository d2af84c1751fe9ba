"""``iceberg-ops unlock`` of a lock whose run still looks alive releases it and warns what follows."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path

from iceberg_ops_provider.history.lock import NamespaceLock
from tests.cli.ops_support import run, sqlite_catalog, sqlite_flags


def test_unlocking_a_live_run_warns_and_a_dead_one_does_not(tmp_path: Path):
    catalog = sqlite_catalog(tmp_path)
    catalog.create_namespace("sales")
    NamespaceLock(catalog, "_iceberg_ops", "sales").acquire("live-run")  # held by this test process, alive

    released = run(tmp_path, *sqlite_flags(tmp_path), "--namespace", "sales", "unlock")
    assert released.returncode == 0, released.stderr
    assert "released the lock held by run live-run" in released.stdout
    assert "warning: that run did not look dead" in released.stderr
    assert "its process still runs on this host" in released.stderr and "LockLostError" in released.stderr

    earlier = NamespaceLock(catalog, "_iceberg_ops", "sales", stale_after=1)
    earlier.clock = lambda: datetime.now(UTC) - timedelta(seconds=1.5)
    earlier.acquire("dead-run")  # 1.5 s ago, with a lease of 1 s: it ran out, nobody renewed it
    again = run(tmp_path, *sqlite_flags(tmp_path), "--namespace", "sales", "--json", "unlock")
    assert again.returncode == 0, again.stderr
    assert json.loads(again.stdout)["released"]["run_id"] == "dead-run" and "warning" not in again.stderr
