"""What the command line says about a run that was killed while a migration wrote through the table directly.

A real SIGKILL of ``iceberg-ops upgrade`` while the migration body waits (it wrote nothing yet): the
rerun refuses, and says the change cannot be checked instead of calling nothing "partly committed";
``stamp`` of the version below settles it, saying the namespace is already there instead of "Nothing
to stamp." with an empty list of what was committed; the rerun of ``upgrade`` then applies it.
"""

from __future__ import annotations

import json
import signal
import subprocess
import time
from pathlib import Path

import pytest

from tests.cli.ops_support import BIN, CREATE_ORDERS, CommandLake
from tests.support.migrations import write_migration

pytestmark = [pytest.mark.slow, pytest.mark.long]

WRITES_DIRECTLY = """
import time
from pathlib import Path
orders = ctx.load_table("orders")  # reaches the table directly: the run's intent notes it
Path(__file__).with_name("started").touch()
while not Path(__file__).with_name("go").exists():
    time.sleep(0.05)
schema = pa.schema([pa.field("id", pa.int64(), nullable=False)])
orders.append(pa.table({"id": pa.array([1], pa.int64())}, schema=schema))
"""


def test_a_killed_direct_write_is_called_unchecked_and_stamp_says_where_the_namespace_is(tmp_path: Path):
    lake = CommandLake(tmp_path)
    write_migration(lake.migrations, "0001_create_orders.py", CREATE_ORDERS, 'ctx.drop_table("orders")')
    assert lake.run("upgrade").returncode == 0
    write_migration(lake.migrations, "0002_load.py", WRITES_DIRECTLY)

    options = [*lake.flags, "--namespace", "sales", "--migrations-dir", str(lake.migrations)]
    running = subprocess.Popen([str(BIN), *options, "upgrade"], cwd=lake.cwd, stdout=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 120
    while not (lake.migrations / "started").exists():
        assert time.monotonic() < deadline and running.poll() is None
        time.sleep(0.05)
    running.send_signal(signal.SIGKILL)
    running.communicate(timeout=60)
    (lake.migrations / "go").touch()

    refused = lake.run("upgrade")
    assert refused.returncode != 0
    assert "cannot be checked" in refused.stderr and "partly committed" not in refused.stderr, refused.stderr
    assert "runner.stamp" not in refused.stderr and "`iceberg-ops stamp`" in refused.stderr
    assert "if nothing landed, stamp the version upgrade started from" in refused.stderr

    stamped = lake.run("stamp", "0001")
    assert stamped.returncode == 0, stamped.stderr
    assert "already at 0001" in stamped.stdout and "Nothing to stamp" not in stamped.stdout
    assert "(committed: )" not in stamped.stderr and "no change of it was found committed" in stamped.stderr

    applied = lake.run("--json", "upgrade")
    assert applied.returncode == 0, applied.stderr
    assert [step["version"] for step in json.loads(applied.stdout)] == ["0002"]
