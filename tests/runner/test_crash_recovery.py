"""SIGKILL at random moments of an upgrade: the next run finishes the job, and nothing runs twice.

Each round migrates a fresh namespace in a worker process and kills it at a random moment, then runs
the upgrade again here. Every migration makes a change that fails if it is made twice (adding a
column), so a body whose commit landed and ran again would show up as a failed migration. The only
human step allowed is settling a migration that committed some of its tables and not the others.

The worker commits table by table (``atomic_commits=False``), as on catalogs without a multi-table
commit (Glue, Hive); the runs that recover use the default, so they settle what a per-table run left
and finish with all-or-nothing commits. The SQLite catalog's all-or-nothing commits have their own
kill test, ``test_atomic_crashes.py``.

Kills fall within the time an unkilled upgrade took; a round whose worker finished before its kill is
checked all the same, shortens the next aim, and rounds go on until ``ICEBERG_OPS_CRASH_KILLS`` kills
landed mid-run (at most three times as many rounds).

A long suite (``make test-all``) of a few rounds; ``ICEBERG_OPS_CRASH_KILLS=40`` (``make crash``) runs the full test.
"""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from iceberg_ops_provider.errors import PartialMigrationError
from iceberg_ops_provider.runner import MigrationRunner
from tests.support.lake import Lake
from tests.support.migrations import write_migration

KILLS = int(os.environ.get("ICEBERG_OPS_CRASH_KILLS", "4"))
VERSIONS = [f"{n:04d}" for n in range(2, 11)]
MULTI_TABLE = {"0003", "0006", "0009"}  # these add a column to two tables
TWO_COMMITS = {"0001", *MULTI_TABLE}  # 0001 creates two tables: a kill can leave any of these partial

WORKER = """
import sys
from pathlib import Path
from iceberg_ops_provider.catalogs import CatalogFactory
from iceberg_ops_provider.runner import MigrationRunner

root, namespace = Path(sys.argv[1]), sys.argv[2]
catalog = CatalogFactory.build("sqlite", db_path=root / "catalog.db", warehouse_dir=root / "warehouse")
runner = MigrationRunner(catalog, namespace, root / "migrations", atomic_commits=False)
(root / f"ready-{namespace}").touch()
runner.upgrade()
"""


def _write_migrations(folder: Path) -> None:
    write_migration(
        folder,
        "0001_create.py",
        'ctx.create_table("orders", pa.schema([("id", pa.int64())]))\n'
        'ctx.create_table("items", pa.schema([("id", pa.int64())]))',
    )
    for version in VERSIONS:
        body = f'ctx.add_column("orders", "c{version}", "string")'
        if version in MULTI_TABLE:
            body += f'\nctx.add_column("items", "c{version}", "string")'
        write_migration(folder, f"{version}_step.py", body)


def _expected_columns() -> dict[str, list[str]]:
    return {
        "orders": ["id", *[f"c{v}" for v in VERSIONS]],
        "items": ["id", *[f"c{v}" for v in VERSIONS if v in MULTI_TABLE]],
    }


def _finish_by_hand(catalog, namespace: str, error: PartialMigrationError) -> None:
    """What a person does: complete the migration's remaining changes, then stamp it."""
    for label in error.not_committed:
        table_name = label.split(" ")[0]
        if not catalog.table_exists(table_name):
            import pyarrow as pa

            catalog.create_table(table_name, pa.schema([("id", pa.int64())]))
            continue
        table = catalog.load_table(table_name)
        column = f"c{error.version}"
        if column not in table.schema().column_names:
            with table.update_schema() as update:
                update.add_column(column, __import__("pyiceberg.types").types.StringType())


def _recover(catalog, namespace: str, migrations: Path) -> list[str]:
    """Run the upgrade to the end as an operator would; returns the versions a person had to settle."""
    runner = MigrationRunner(catalog, namespace, migrations)
    settled = []
    for _attempt in range(5):
        try:
            runner.upgrade()
            return settled
        except PartialMigrationError as error:
            settled.append(error.version)
            _finish_by_hand(catalog, namespace, error)
            runner.stamp(error.version)
    raise AssertionError("the namespace did not settle")


def _check(catalog, namespace: str, migrations: Path) -> None:
    runner = MigrationRunner(catalog, namespace, migrations)
    history = runner.history()
    assert sorted(row.version for row in history) == ["0001", *VERSIONS]  # one row per version
    assert {row.status for row in history} == {"applied"}, [(r.version, r.status, r.error) for r in history]
    for table, columns in _expected_columns().items():
        assert catalog.load_table(f"{namespace}.{table}").schema().column_names == columns
    status = runner.status()
    assert status.is_clean and status.lock is None and status.interrupted is None


@pytest.mark.long
def test_random_sigkills_during_upgrades_leave_nothing_for_a_person_but_partial_multi_table_migrations(
    tmp_path: Path,
):
    migrations = tmp_path / "migrations"
    _write_migrations(migrations)
    catalog = Lake(tmp_path).catalog()
    seed = int(os.environ.get("ICEBERG_OPS_CRASH_SEED", time.time_ns() % 10_000))
    chooser = random.Random(seed)
    killed_mid_run = 0
    settled_by_hand: list[str] = []

    def start(namespace: str) -> tuple[subprocess.Popen[bytes], float]:
        process = subprocess.Popen(
            [sys.executable, "-c", WORKER, str(tmp_path), namespace],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
        )
        ready = tmp_path / f"ready-{namespace}"
        deadline = time.monotonic() + 60
        while not ready.exists():
            assert process.poll() is None and time.monotonic() < deadline, f"worker failed to start (seed {seed})"
            time.sleep(0.01)
        return process, time.monotonic()

    # How long an upgrade takes on this machine now: the kills fall within it, whatever the load.
    process, started = start("calibration")
    assert process.wait() == 0, f"worker failed (seed {seed})"
    duration = time.monotonic() - started
    attempts = 0
    while killed_mid_run < KILLS and attempts < 3 * KILLS:
        namespace = f"crash{attempts}"
        attempts += 1
        process, started = start(namespace)
        time.sleep(chooser.uniform(0, 0.9 * duration))
        if process.poll() is None:
            killed_mid_run += 1
            os.killpg(process.pid, signal.SIGKILL)
        else:  # done before the kill (the machine got faster than when timed): aim within this run's length
            duration = 0.7 * (time.monotonic() - started)
        process.wait()
        assert process.returncode in (0, -signal.SIGKILL), f"worker failed (seed {seed})"
        settled_by_hand += _recover(catalog, namespace, migrations)
        _check(catalog, namespace, migrations)
    assert killed_mid_run >= KILLS // 2, f"{killed_mid_run} of {attempts} kills landed mid-run (seed {seed})"
    assert set(settled_by_hand) <= TWO_COMMITS, f"only multi-table migrations may need a person (seed {seed})"
