"""A data step SIGKILLed mid-way, then run again: every unit applied exactly once (``v = v * 2`` checked
exactly, rows neither lost nor duplicated). The kill lands right after the first unit commit (from the
progress callback), or at random moments within the time the step takes here (``ICEBERG_OPS_STEP_KILLS``,
``ICEBERG_OPS_CRASH_SEED`` replays them)."""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import time

import pyarrow.compute as pc
import pytest

from iceberg_ops_provider.data_steps import DataStep, run_step, step_state
from tests.data_steps.support import all_rows, make_table, read_rows
from tests.support.lake import Lake

pytestmark = pytest.mark.long

KILLS = int(os.environ.get("ICEBERG_OPS_STEP_KILLS", "3"))
SEED = int(os.environ.get("ICEBERG_OPS_CRASH_SEED", time.time_ns() % 10_000))
TABLE = ("sales", "orders")

CHILD = """
import os, sys
import pyarrow.compute as pc
from tests.support.lake import Lake
from pathlib import Path
from iceberg_ops_provider.data_steps import DataStep, run_step

root, kill_after = Path(sys.argv[1]), int(sys.argv[2])
step = DataStep("crash/1", "update_rows", ("sales", "orders"), "k >= 5",
                {"v": lambda batch: pc.multiply(batch.column("v"), 2)})

def progress(report):
    if kill_after and report.units_done >= kill_after:
        os.kill(os.getpid(), 9)

print("start", flush=True)
run_step(Lake(root).catalog(), step, unit_bytes=1, progress=progress)
print("done", flush=True)
"""


def _step() -> DataStep:
    return DataStep("crash/1", "update_rows", TABLE, "k >= 5", {"v": lambda batch: pc.multiply(batch.column("v"), 2)})


def _expected() -> dict:
    rows = all_rows(files_per_region=6, rows=100)
    for row in rows.values():
        if row["k"] is not None and row["k"] >= 5 and row["v"] is not None:
            row["v"] *= 2
    return rows


def _spawn(root, kill_after: int) -> subprocess.Popen:
    env = {**os.environ, "PYTHONPATH": os.getcwd()}
    return subprocess.Popen(
        [sys.executable, "-c", CHILD, str(root), str(kill_after)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )


def test_a_step_killed_after_its_first_unit_commit_finishes_exactly_once(lake):
    table = make_table(lake.catalog(), files_per_region=6, rows=100)
    child = _spawn(lake.root, kill_after=1)
    assert child.wait(timeout=120) == -signal.SIGKILL, child.stderr.read()
    state = step_state(table.refresh(), "crash/1")
    assert state is not None and state.units_done == 1

    result = run_step(lake.catalog(), _step(), unit_bytes=1)

    assert result.units_skipped == 1 and result.files_rewritten == 11
    assert read_rows(table) == _expected()


def test_steps_killed_at_random_moments_settle_with_the_next_run(tmp_path):

    reference = Lake(tmp_path / "reference")
    make_table(reference.catalog(), files_per_region=6, rows=100)
    child = _spawn(reference.root, kill_after=0)
    assert child.stdout.readline().strip() == "start", child.stderr.read()
    began = time.monotonic()
    assert child.stdout.readline().strip() == "done", child.stderr.read()
    duration = time.monotonic() - began
    child.wait(timeout=60)

    moments = random.Random(SEED)
    landed = 0
    for trial in range(KILLS):
        lake = Lake(tmp_path / f"trial{trial}")
        table = make_table(lake.catalog(), files_per_region=6, rows=100)
        child = _spawn(lake.root, kill_after=0)
        assert child.stdout.readline().strip() == "start", child.stderr.read()
        time.sleep(moments.uniform(0.05, 0.9) * duration)
        child.send_signal(signal.SIGKILL)
        child.wait(timeout=60)
        state = step_state(table.refresh(), "crash/1")
        landed += state is None or not state.complete
        run_step(lake.catalog(), _step(), unit_bytes=1)
        assert read_rows(table) == _expected(), f"seed {SEED}, trial {trial}"
    assert landed >= max(1, KILLS // 2), f"seed {SEED}: too few kills landed before the step finished"
