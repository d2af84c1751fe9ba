"""A run whose lock is released while its migration runs records nothing, also for a migration that changes no table.

A real ``iceberg-ops upgrade`` subprocess runs a migration whose body only waits; ``iceberg-ops unlock``
releases the lock meanwhile. When the body returns, the run must read the lock from the catalog before
it writes the history row, and stop with ``LockLostError``: the version stays unapplied, and the next
run applies it.
"""

from __future__ import annotations

import json
import subprocess
import time
from pathlib import Path

import pytest

from tests.cli.ops_support import BIN, CommandLake
from tests.support.migrations import write_migration

pytestmark = [pytest.mark.slow, pytest.mark.long]

WAITS = """
import time
from pathlib import Path
Path(__file__).with_name("started").touch()
while not Path(__file__).with_name("go").exists():
    time.sleep(0.05)
"""


def test_a_released_lock_stops_the_run_before_it_records_a_tableless_migration(tmp_path: Path):
    lake = CommandLake(tmp_path)
    write_migration(lake.migrations, "0001_wait.py", WAITS, "pass")
    options = [*lake.flags, "--namespace", "sales", "--migrations-dir", str(lake.migrations)]
    running = subprocess.Popen(
        [str(BIN), *options, "upgrade"], cwd=lake.cwd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    deadline = time.monotonic() + 120
    while not (lake.migrations / "started").exists():
        assert time.monotonic() < deadline and running.poll() is None, running.communicate()
        time.sleep(0.05)

    released = lake.run("unlock")
    assert released.returncode == 0 and "released the lock" in released.stdout, released.stderr
    (lake.migrations / "go").touch()
    stdout, stderr = running.communicate(timeout=120)

    assert running.returncode != 0, (stdout, stderr)
    assert "lost the migration lock" in stderr, stderr
    assert json.loads(lake.run("--json", "status").stdout)["current"] is None
    (lake.migrations / "started").unlink()
    again = lake.run("upgrade")
    assert again.returncode == 0, again.stderr
    assert lake.run("current").stdout.strip() == "0001"
