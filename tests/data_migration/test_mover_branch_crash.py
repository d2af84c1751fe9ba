"""Write-audit-publish killed with SIGKILL at random moments (while units commit to the branch, while the
audit reads it, while the publish commits), then run again: ``main`` never shows part of the move, and
ends with its own rows and the source's exactly once.

A long suite (``make test-all``). ``ICEBERG_OPS_MOVE_KILLS`` sets the number of kills (a few by default);
each falls within the time the whole run, audit and publish take here, measured first, and most must
land before the publish finished. ``ICEBERG_OPS_CRASH_SEED`` replays a run's moments. Every other trial,
another writer appends to ``main`` before the run again, so its publish (when the killed one did not
publish) appends the move's files instead of fast-forwarding.
"""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import time
from collections import Counter

import pytest

from iceberg_ops_provider.data_migration import DataMover
from tests.data_migration.support import ORDERS_SCHEMA, orders, row_multiset, source_table

KILLS = int(os.environ.get("ICEBERG_OPS_MOVE_KILLS", "3"))
SEED = int(os.environ.get("ICEBERG_OPS_CRASH_SEED", time.time_ns() % 10_000))

CHILD = """
import json, sys
from iceberg_ops_provider.catalogs import CatalogFactory
from iceberg_ops_provider.data_migration import DataMover

backend, target = json.loads(sys.argv[1]), sys.argv[2]
catalog = CatalogFactory.build(backend["kind"], **backend["options"])
mover = DataMover(catalog, "sales.orders", target, branch="backfill", commit_every_bytes=40_000)
print("start", flush=True)
mover.run()
assert mover.audit(not_null=["id"], unique=["id"]).ok
mover.publish()
print("done", flush=True)
"""


def _spawn(backend, target: str) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-c", CHILD, backend.to_json(), target],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def _started(child: subprocess.Popen) -> float:
    line = child.stdout.readline()
    assert line.strip() == "start", child.stderr.read()
    return time.monotonic()


def _target(catalog, name: str) -> Counter:
    """A target holding 10 rows of its own; those rows, counted."""
    if ("archive",) not in catalog.list_namespaces():
        catalog.create_namespace("archive")
    table = catalog.create_table(name, schema=ORDERS_SCHEMA)
    table.append(orders(100_000, 10))
    return row_multiset(table)


@pytest.fixture
def publishing(catalog_backend):
    """A source of 16 files of 2,000 rows, and the duration of one whole run, audit and publish."""
    catalog = catalog_backend.build()
    source = source_table(catalog, files=16, rows_per_file=2000)
    _target(catalog, "archive.calibration")
    child = _spawn(catalog_backend, "archive.calibration")
    began = _started(child)
    assert child.stdout.readline().strip() == "done", child.stderr.read()
    duration = time.monotonic() - began
    assert child.wait(timeout=120) == 0, child.stderr.read()
    yield catalog, source, duration
    catalog.close()


@pytest.mark.long
@pytest.mark.parametrize("catalog_backend", ["sqlite"], indirect=True)
def test_write_audit_publish_killed_at_random_moments_publishes_exactly_once(publishing, catalog_backend):
    catalog, source, duration = publishing
    moved = row_multiset(source)
    chance = random.Random(SEED)
    landed = trial = 0
    while landed < KILLS and trial < 3 * KILLS:
        name = f"archive.wap_{trial}"
        own = _target(catalog, name)
        trial += 1
        child = _spawn(catalog_backend, name)
        _started(child)
        time.sleep(chance.uniform(0.02, 0.9) * duration)
        child.send_signal(signal.SIGKILL)
        stdout, stderr = child.communicate(timeout=60)
        assert child.returncode in (0, -signal.SIGKILL), stderr
        landed += child.returncode == -signal.SIGKILL and "done" not in stdout

        on_main = row_multiset(catalog.load_table(name))
        assert on_main in (own, own + moved), f"main shows part of the move (seed {SEED})"
        if trial % 2 == 0:  # another writer appends to main before the move is taken up again
            catalog.load_table(name).append(orders(200_000, 5))
            own = own + row_multiset(catalog.load_table(name)) - on_main
        mover = DataMover(catalog, "sales.orders", name, branch="backfill", commit_every_bytes=40_000)
        mover.run()
        if "backfill" in catalog.load_table(name).metadata.refs:
            assert mover.audit(not_null=["id"], unique=["id"]).ok
        mover.publish()
        assert mover.publish().how == "already_published"

        target = catalog.load_table(name)
        assert row_multiset(target) == own + moved, f"seed {SEED}"
        assert "backfill" not in target.metadata.refs
    assert landed == KILLS, f"{landed} of {trial} kills landed in a {duration:.2f} s run (seed {SEED})"
