"""Edges of crash recovery: early commits, direct writes, staged drops, lost locks, damaged records."""

from __future__ import annotations

import builtins
import json
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pyarrow as pa
import pytest

from iceberg_ops_provider.cli.wording import cli_message
from iceberg_ops_provider.errors import (
    ConcurrentMigrationError,
    IntentRecordError,
    MigrationFailedError,
    PartialMigrationError,
)
from iceberg_ops_provider.history.intent import INTENT_PROPERTY
from iceberg_ops_provider.history.lock import NamespaceLock
from iceberg_ops_provider.runner import MigrationRunner
from tests.support.lake import Lake
from tests.support.migrations import write_migration

TWO_TABLES = """
ctx.create_table("orders", pa.schema([("id", pa.int64())]))
ctx.create_table("items", pa.schema([("id", pa.int64())]))
"""


def _statuses(runner: MigrationRunner) -> dict[str, str]:
    return {row.version: row.status for row in runner.history()}


def test_a_failure_after_the_migration_committed_early_is_partial_not_applied(catalog, runner, migrations_dir):
    write_migration(migrations_dir, "0001_tables.py", TWO_TABLES)
    write_migration(
        migrations_dir,
        "0002_early.py",
        'ctx.add_column("orders", "c2", "string")\nctx.commit()\nraise RuntimeError("after the early commit")\n'
        'ctx.add_column("items", "c2", "string")',
    )
    with pytest.raises(PartialMigrationError, match=r"committed: sales\.orders \(commit\); not committed: the rest"):
        runner.upgrade()
    assert _statuses(runner)["0002"] == "failed"
    assert "c2" not in catalog.load_table("sales.items").schema().column_names


def test_data_written_through_load_table_is_never_silently_written_twice(catalog, runner, migrations_dir):
    write_migration(migrations_dir, "0001_tables.py", TWO_TABLES)
    write_migration(
        migrations_dir,
        "0002_backfill.py",
        'ctx.load_table("orders").append(pa.table({"id": pa.array([1, 2, 3], pa.int64())}))\n'
        'raise RuntimeError("after the append")',
    )
    with pytest.raises(PartialMigrationError, match=r"sales\.orders \(written directly by the migration"):
        runner.upgrade()
    with pytest.raises(PartialMigrationError):  # a retry stops too, instead of appending the rows again
        runner.upgrade()
    assert catalog.load_table("sales.orders").scan().to_arrow().num_rows == 3


def test_a_migration_that_only_read_through_load_table_and_finished_is_applied(catalog, runner, migrations_dir):
    write_migration(migrations_dir, "0001_tables.py", TWO_TABLES)
    write_migration(migrations_dir, "0002_read.py", 'assert ctx.load_table("orders").scan().to_arrow().num_rows == 0')
    assert [r.version for r in runner.upgrade()] == ["0001", "0002"]


DROP_WORKER = """
import os, signal, sys
from pathlib import Path
from pyiceberg.catalog.sql import SqlCatalog
from iceberg_ops_provider.catalogs import CatalogFactory
from iceberg_ops_provider.runner import MigrationRunner

original = SqlCatalog.drop_table
def drop_then_die(self, identifier):
    original(self, identifier)
    os.kill(os.getpid(), signal.SIGKILL)  # killed right after the drop, before anything is recorded
SqlCatalog.drop_table = drop_then_die
root = Path(sys.argv[1])
catalog = CatalogFactory.build("sqlite", db_path=root / "catalog.db", warehouse_dir=root / "warehouse")
MigrationRunner(catalog, "sales", root / "migrations").upgrade()
"""


def test_a_run_killed_right_after_a_drop_is_recorded_not_reported_partial(tmp_path: Path):
    migrations = tmp_path / "migrations"
    write_migration(migrations, "0001_tables.py", TWO_TABLES)
    write_migration(migrations, "0002_drop.py", 'ctx.drop_table("items")')
    catalog = Lake(tmp_path).catalog()
    MigrationRunner(catalog, "sales", migrations).upgrade("0001")
    result = subprocess.run([sys.executable, "-c", DROP_WORKER, str(tmp_path)], timeout=120)
    assert result.returncode == -signal.SIGKILL
    runner = MigrationRunner(catalog, "sales", migrations)
    assert runner.upgrade() == []  # the drop is recorded, not repeated and not called partial
    assert _statuses(runner) == {"0001": "applied", "0002": "applied"}


def test_a_run_whose_lock_was_taken_over_commits_nothing_more(catalog, runner, migrations_dir):
    write_migration(migrations_dir, "0001_tables.py", TWO_TABLES)

    def take_over() -> None:  # what a run that found this one's lease expired does
        rival = NamespaceLock(catalog, "_iceberg_ops", "sales")
        rival.force_unlock()
        rival.acquire("rival-run")

    builtins._iceberg_ops_take_over = take_over  # type: ignore[attr-defined]
    write_migration(
        migrations_dir,
        "0002_slow.py",
        'ctx.add_column("orders", "late", "string")\nimport builtins\nbuiltins._iceberg_ops_take_over()',
    )
    with pytest.raises(ConcurrentMigrationError, match="lost the migration lock"):
        runner.upgrade()
    assert "late" not in catalog.load_table("sales.orders").schema().column_names
    assert runner.lock.info().run_id == "rival-run"


def test_a_lock_left_by_an_ended_run_of_this_process_is_taken_over_at_once(catalog, runner, migrations_dir):
    write_migration(migrations_dir, "0001_tables.py", TWO_TABLES)
    runner.lock.acquire("ended-run")
    NamespaceLock.forget_run("ended-run")  # as when its commit's answer was lost and the run gave up
    assert [r.version for r in runner.upgrade()] == ["0001"]
    assert [event.event for event in runner.events()] == ["lock_taken_over", "applied"]


# Another process looking at the namespace (as ``iceberg-ops status`` would) while a run is in a migration.
OBSERVE = """
import json, sys
from iceberg_ops_provider.catalogs import CatalogFactory
from iceberg_ops_provider.runner import MigrationRunner

catalog = CatalogFactory.build("sqlite", db_path=sys.argv[1] + "/catalog.db", warehouse_dir=sys.argv[1] + "/warehouse")
observer = MigrationRunner(catalog, "sales", sys.argv[2])
status = observer.status()
print(json.dumps({
    "interrupted": repr(observer.interrupted()),
    "status_interrupted": repr(status.interrupted),
    "locked": status.lock is not None,
    "applied": [row.version for row in status.applied],
}))
"""


def test_a_live_run_is_not_reported_as_interrupted(catalog, migrations_dir, tmp_path):
    started, release = threading.Event(), threading.Event()
    builtins._iceberg_ops_started, builtins._iceberg_ops_release = started, release  # type: ignore[attr-defined]
    write_migration(migrations_dir, "0001_tables.py", TWO_TABLES)
    write_migration(
        migrations_dir,
        "0002_wait.py",
        'ctx.add_column("orders", "c2", "string")\nctx.commit()\nimport builtins\n'
        "builtins._iceberg_ops_started.set()\nbuiltins._iceberg_ops_release.wait(300)",
    )
    runner = MigrationRunner(catalog, "sales", migrations_dir)
    worker = threading.Thread(target=runner.upgrade)
    worker.start()
    try:
        assert started.wait(30)
        # In this process: interrupted() reads the lock and the intent record only.
        observer = MigrationRunner(catalog, "sales", migrations_dir)
        assert observer.interrupted() is None
        # status() loads the migration files, and a process loads them one thread at a time (the
        # running migration holds its turn until it ends): a second process asks while 0002 still runs.
        seen = subprocess.run(
            [sys.executable, "-c", OBSERVE, str(tmp_path), str(migrations_dir)],
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert seen.returncode == 0, seen.stderr[-3000:]
        assert worker.is_alive()  # still in 0002, which ends only once released: live all the while
        assert json.loads(seen.stdout) == {
            "interrupted": "None",
            "status_interrupted": "None",
            "locked": True,
            "applied": ["0001"],
        }
    finally:
        release.set()
        worker.join(30)
    assert not worker.is_alive()
    assert observer.status().is_clean


def test_a_damaged_intent_record_stops_runs_until_a_stamp_clears_it(catalog, runner, migrations_dir):
    write_migration(migrations_dir, "0001_tables.py", TWO_TABLES)
    runner.upgrade()
    table = catalog.load_table(runner.lock.identifier)
    with table.transaction() as transaction:
        transaction.set_properties({INTENT_PROPERTY: '{"version": "x", "oops'})
    write_migration(migrations_dir, "0002_more.py", 'ctx.add_column("orders", "c2", "string")')
    with pytest.raises(IntentRecordError, match=r"cannot be read.*MigrationRunner\.stamp\('<version>'\)") as damaged:
        runner.upgrade()
    assert "records the outcome with `iceberg-ops stamp <version>`" in cli_message(damaged.value)
    assert "c2" not in catalog.load_table("sales.orders").schema().column_names
    runner.stamp("0001")
    assert [r.version for r in runner.upgrade()] == ["0002"]


@pytest.mark.parametrize("bad", [0, 0.1, -1, float("nan"), float("inf"), 10**400, "60", True])
def test_bad_lease_lengths_are_refused_up_front(catalog, migrations_dir, bad):
    with pytest.raises(ValueError, match="stale_after must be a number of seconds"):
        MigrationRunner(catalog, "sales", migrations_dir, stale_after=bad)


def test_hand_edited_lock_properties_do_not_break_status_or_unlock(catalog, runner, migrations_dir):
    write_migration(migrations_dir, "0001_tables.py", TWO_TABLES)
    runner.lock.acquire("some-run")
    table = catalog.load_table(runner.lock.identifier)
    with table.transaction() as transaction:
        transaction.set_properties(
            {
                "iceberg-ops.lock.pid": "abc",
                "iceberg-ops.lock.acquired-at": "2026-01-01T00:00:00",
                "iceberg-ops.lock.stale-after": "nan",
            }
        )
    holder = runner.status().lock
    assert holder.pid == 0 and holder.acquired_at.tzinfo is not None and holder.stale_after == 180.0
    assert runner.force_unlock().run_id == "some-run"


def test_a_failure_that_could_not_be_recorded_does_not_claim_it_was(catalog, runner, migrations_dir, monkeypatch):
    write_migration(migrations_dir, "0001_boom.py", 'raise RuntimeError("boom")')

    def unreachable(*args, **kwargs):  # the history is unreachable exactly when the failure is recorded
        raise OSError("history unreachable")

    monkeypatch.setattr(runner.history_store, "record", unreachable)
    with pytest.raises(MigrationFailedError) as info:
        runner.upgrade()
    assert "It could not be recorded" in str(info.value) and "recorded as failed" not in str(info.value)


EXPIRY_KILLED = """
import os, sys
from pathlib import Path
import iceberg_ops_provider.maintenance.expire as expire
from iceberg_ops_provider.runner import MigrationRunner
from tests.support.lake import Lake

real = expire._commit


def commit_then_die(*args, **kwargs):
    real(*args, **kwargs)
    os._exit(9)  # as a SIGKILL there: the history's expiry committed, the files it expired not deleted yet


expire._commit = commit_then_die
root = Path(sys.argv[1])
runner = MigrationRunner(Lake(root).catalog(), "sales", root / "migrations", keep_history_snapshots=2, stale_after=1)
runner.upgrade()
"""


def test_a_run_killed_between_an_expiry_and_its_deletes_leaves_nothing_once_the_lock_is_taken_over(tmp_path):
    from tests.history.test_events import _unreachable_history_files

    migrations = tmp_path / "migrations"
    migrations.mkdir()
    for number in range(1, 25):
        write_migration(migrations, f"{number:04d}_step.py", f'ctx.set_properties("orders", step="{number}")')
    catalog = Lake(tmp_path).catalog()
    catalog.create_namespace("sales")
    catalog.create_table("sales.orders", pa.schema([pa.field("id", pa.int64())]))
    killed = subprocess.run([sys.executable, "-c", EXPIRY_KILLED, str(tmp_path)], timeout=120, cwd=Path.cwd())
    assert killed.returncode == 9
    history = catalog.load_table(("_iceberg_ops", "migration_history"))
    root = tmp_path / "warehouse" / "_iceberg_ops" / "migration_history"
    assert _unreachable_history_files(history, root)  # what the killed run left
    runner = MigrationRunner(catalog, "sales", migrations, keep_history_snapshots=2, stale_after=1)
    holder, _ = runner.lock.read()
    assert holder is not None
    while runner.lock.clock() <= holder.expires_at():
        time.sleep(0.1)  # the killed holder's lease runs out: a second at most
    assert runner.upgrade()  # takes the lock over, sweeps, runs the rest
    history = catalog.load_table(("_iceberg_ops", "migration_history"))
    assert _unreachable_history_files(history, root) == set()
    assert runner.current() == "0024"
