"""Moves killed with SIGKILL at random moments, alone and beside a second worker, then resumed: the target
holds exactly the source rows (as multisets), never fewer, never more.

A long suite (``make test-all``). ``ICEBERG_OPS_MOVE_KILLS`` sets the number of kills per mode (a few by
default; ``make crash`` runs 30, and 10 beside a second worker); each kill falls within the time a whole
move takes on this machine, measured first, and most must land before the move finishes.
``ICEBERG_OPS_CRASH_SEED`` replays a run's moments. An overwrite killed before its last unit leaves
``main`` untouched.
Trials alternate between copying source files byte for byte (the default) and re-encoding them. The
two-worker test runs on SQLite and on PostgreSQL (``catalog_backend``).
"""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import time

import pytest

from iceberg_ops_provider.data_migration import DataMover
from tests.data_migration.support import row_multiset, source_table

KILLS = int(os.environ.get("ICEBERG_OPS_MOVE_KILLS", "3"))
SEED = int(os.environ.get("ICEBERG_OPS_CRASH_SEED", time.time_ns() % 10_000))

CHILD = """
import json, sys
from iceberg_ops_provider.catalogs import CatalogFactory
from iceberg_ops_provider.data_migration import DataMover

backend, target, move_id, mode, rewrite = json.loads(sys.argv[1]), *sys.argv[2:6]
catalog = CatalogFactory.build(backend["kind"], **backend["options"])
mover = DataMover(
    catalog,
    "sales.orders",
    target,
    create_target=True,
    move_id=move_id,
    mode=mode,
    commit_every_bytes=40_000,
    rewrite=rewrite == "rewrite",
)
print("start", flush=True)
mover.run()
print("done", flush=True)
"""


def _spawn(backend, target: str, move_id: str, mode: str = "append", rewrite: bool = False) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-c", CHILD, backend.to_json(), target, move_id, mode, "rewrite" if rewrite else "verbatim"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def _started(child: subprocess.Popen) -> float:
    line = child.stdout.readline()
    assert line.strip() == "start", child.stderr.read()
    return time.monotonic()


@pytest.fixture
def moving(catalog_backend):
    """A source of 16 files of 2,000 rows (units of about two files), and the duration of one whole move."""
    catalog = catalog_backend.build()
    source = source_table(catalog, files=16, rows_per_file=2000)
    child = _spawn(catalog_backend, "archive.calibration", "calibration")
    began = _started(child)
    assert child.stdout.readline().strip() == "done", child.stderr.read()
    duration = time.monotonic() - began  # the move itself, not the interpreter's exit after it
    assert child.wait(timeout=120) == 0, child.stderr.read()
    yield catalog, source, duration
    catalog.close()


def _kill(child: subprocess.Popen) -> bool:
    """SIGKILL ``child``; whether the kill landed before its move finished."""
    child.send_signal(signal.SIGKILL)  # harmless if it already exited
    stdout, stderr = child.communicate(timeout=60)
    assert child.returncode in (0, -signal.SIGKILL), stderr
    return child.returncode == -signal.SIGKILL and "done" not in stdout


def _finish_and_check(catalog, source, target: str, move_id: str, mode: str = "append", rewrite: bool = False) -> None:
    mover = DataMover(
        catalog,
        "sales.orders",
        target,
        create_target=True,
        move_id=move_id,
        mode=mode,
        commit_every_bytes=40_000,
        rewrite=rewrite,
    )
    result = mover.run()
    assert result.complete
    assert row_multiset(catalog.load_table(target)) == row_multiset(source)
    assert mover.verify("checksum").ok


@pytest.mark.long
@pytest.mark.parametrize("catalog_backend", ["sqlite"], indirect=True)
@pytest.mark.parametrize("mode", ["append", "overwrite"])
def test_a_move_killed_at_random_moments_resumes_to_exactly_the_source_rows(moving, catalog_backend, mode):
    catalog, source, duration = moving
    chance = random.Random(SEED)
    # A kill after the move finished proves nothing: trials go on until KILLS kills landed while it ran
    # (a trial can run faster than the calibration on a machine whose load changed), up to 3 x KILLS.
    landed = trial = 0
    while landed < KILLS and trial < 3 * KILLS:
        target, move_id = f"archive.killed_{mode}_{trial}", f"killed-{mode}-{trial}"
        rewrite = trial % 2 == 1
        trial += 1
        child = _spawn(catalog_backend, target, move_id, mode, rewrite)
        _started(child)
        time.sleep(chance.uniform(0.02, 0.8) * duration)
        landed += _kill(child)
        _finish_and_check(catalog, source, target, move_id, mode, rewrite)
    assert landed == KILLS, f"{landed} of {trial} kills landed in a {duration:.2f} s move (seed {SEED})"


@pytest.mark.long
def test_two_workers_on_one_move_one_killed(moving, catalog_backend):
    catalog, source, duration = moving
    chance = random.Random(SEED)
    wanted = max(1, KILLS // 3)
    landed = trial = 0
    while landed < wanted and trial < 3 * wanted:
        target, move_id = f"archive.pair_{trial}", f"pair-{trial}"
        # One worker copies files as they are, the other re-encodes: units of either kind are exactly once.
        victim = _spawn(catalog_backend, target, move_id, rewrite=trial % 2 == 0)
        survivor = _spawn(catalog_backend, target, move_id)
        trial += 1
        _started(victim)
        _started(survivor)
        # Two workers share the units, so the move takes about half as long as one worker alone.
        time.sleep(chance.uniform(0.02, 0.4) * duration)
        landed += _kill(victim)
        assert survivor.wait(timeout=120) == 0, survivor.stderr.read()
        _finish_and_check(catalog, source, target, move_id)
    assert landed == wanted, f"{landed} of {trial} kills landed while both workers moved (seed {SEED})"
