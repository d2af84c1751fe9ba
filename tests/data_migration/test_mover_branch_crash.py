"""Write-audit-publish killed with SIGKILL at random moments (while units commit to the branch, while the
audit reads it, while the publish commits), then run again: ``main`` never shows part of the move, and
ends with its own rows and the source's exactly once.

A long suite (``make test-all``). ``ICEBERG_OPS_MOVE_KILLS`` sets the number of kills (a few by default).
Trials take turns at aiming at the run, the audit and the publish, each kill falling within the time
that stage takes here (measured first), and most must land in the stage they aimed at.
``ICEBERG_OPS_CRASH_SEED`` replays a run's moments. Every other trial, another writer appends to
``main`` before the move is taken up again, so its publish (when the killed one did not publish)
appends the move's files instead of fast-forwarding.
"""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import time
from collections import Counter
from itertools import pairwise

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
print("ran", flush=True)
assert mover.audit(not_null=["id"], unique=["id"]).ok
print("audited", flush=True)
mover.publish()
print("done", flush=True)
"""

STAGES = ("start", "ran", "audited", "done")
"""The lines the child prints as it starts, and after the run, the audit and the publish."""


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
    """A source of 16 files of 2,000 rows, and how long the run, the audit and the publish each take."""
    catalog = catalog_backend.build()
    source = source_table(catalog, files=16, rows_per_file=2000)
    _target(catalog, "archive.calibration")
    child = _spawn(catalog_backend, "archive.calibration")
    moments = [_started(child)]
    for stage in STAGES[1:]:
        assert child.stdout.readline().strip() == stage, child.stderr.read()
        moments.append(time.monotonic())
    assert child.wait(timeout=120) == 0, child.stderr.read()
    yield catalog, source, [later - earlier for earlier, later in pairwise(moments)]
    catalog.close()


@pytest.mark.long
@pytest.mark.parametrize("catalog_backend", ["sqlite"], indirect=True)
def test_write_audit_publish_killed_at_random_moments_publishes_exactly_once(publishing, catalog_backend):
    catalog, source, durations = publishing
    moved = row_multiset(source)
    chance = random.Random(SEED)
    # Trials take turns at killing the run, the audit and the publish; a kill counts when it landed in
    # the stage it aimed at (the child had not printed the stage's end).
    landed = [0, 0, 0]
    trial = 0
    while sum(landed) < KILLS and trial < 3 * KILLS:
        stage = trial % 3
        name = f"archive.wap_{trial}"
        own = _target(catalog, name)
        trial += 1
        child = _spawn(catalog_backend, name)
        _started(child)
        for wanted in STAGES[1 : stage + 1]:  # wait for the stages before the aimed one to end
            assert child.stdout.readline().strip() == wanted, child.stderr.read()
        time.sleep(chance.uniform(0.02, 0.9) * durations[stage])
        child.send_signal(signal.SIGKILL)
        stdout, stderr = child.communicate(timeout=60)
        assert child.returncode in (0, -signal.SIGKILL), stderr
        landed[stage] += child.returncode == -signal.SIGKILL and STAGES[stage + 1] not in stdout

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
    print(f"kills landed in the run, the audit, the publish: {landed} (seed {SEED})")
    assert sum(landed) >= KILLS, f"kills landed in run, audit, publish: {landed} of {trial} (seed {SEED})"
