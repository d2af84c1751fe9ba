"""The lock's lease and compare-and-swap: takeover of dead holders, renewal during long bodies, no stale release."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from pyiceberg.exceptions import CommitFailedException
from pyiceberg.table.update import AssertRefSnapshotId, RemoveSnapshotRefUpdate

from iceberg_ops_provider.errors import ConcurrentMigrationError
from iceberg_ops_provider.history.lock import LockLostError, NamespaceLock
from iceberg_ops_provider.history.lock_table import cas_commit
from iceberg_ops_provider.runner import MigrationRunner
from tests.support.lake import Lake
from tests.support.migrations import write_migration


def _sqlite(root: Path):
    return Lake(root).catalog()


def test_release_renew_and_intent_are_compare_and_swap_on_the_holders_own_snapshot(catalog):
    lock = NamespaceLock(catalog, "_iceberg_ops", "sales")
    held_a = lock.acquire("run-a")
    stale_view = lock._table()  # what A read before the lock changed hands
    assert lock.force_unlock().run_id == "run-a"
    held_b = NamespaceLock(catalog, "_iceberg_ops", "sales").acquire("run-b")
    assert held_b.snapshot_id != held_a.snapshot_id

    # A's release, acted on what it read earlier, is refused by the catalog itself ...
    with pytest.raises(CommitFailedException):
        cas_commit(
            stale_view,
            [RemoveSnapshotRefUpdate(ref_name="held")],
            [AssertRefSnapshotId(ref="held", snapshot_id=held_a.snapshot_id)],
        )
    # ... and through the public calls A learns it lost the lock, while B keeps it.
    with pytest.raises(LockLostError, match="lost the migration lock"):
        lock.renew(held_a)
    assert lock.release("run-a") is False
    assert lock.info().run_id == "run-b"
    assert lock.release("run-b") is True
    assert lock.info() is None


def test_a_lock_whose_lease_expired_is_taken_over_and_recorded(catalog, migrations_dir):
    write_migration(migrations_dir, "0001_t.py", 'ctx.create_table("t", pa.schema([("n", pa.int64())]))')
    abandoned = NamespaceLock(catalog, "_iceberg_ops", "sales", stale_after=1)
    abandoned.acquire("crashed-elsewhere")  # never renewed, as if its host died
    runner = MigrationRunner(catalog, "sales", migrations_dir, stale_after=1)
    with pytest.raises(ConcurrentMigrationError, match="its lease runs until"):
        runner.upgrade()
    # 1.2 s later for the runner: the abandoned lease has run out
    runner.lock.clock = lambda: datetime.now(UTC) + timedelta(seconds=1.2)
    assert [r.version for r in runner.upgrade()] == ["0001"]
    event, applied = runner.events()
    assert (applied.event, applied.version) == ("applied", "0001")
    assert event.event == "lock_taken_over" and "lease expired" in event.message
    assert event.details["previous_holder"]["run_id"] == "crashed-elsewhere"
    assert runner.lock.info() is None


def test_the_lease_is_renewed_while_a_long_migration_body_runs(catalog, migrations_dir):
    import builtins

    release = threading.Event()
    builtins._iceberg_ops_test_release = release  # type: ignore[attr-defined]
    write_migration(migrations_dir, "0001_slow.py", "import builtins\nbuiltins._iceberg_ops_test_release.wait(60)")
    runner = MigrationRunner(catalog, "sales", migrations_dir, stale_after=2)  # renewed every 0.5 s
    rival = NamespaceLock(catalog, "_iceberg_ops", "sales", stale_after=2)
    outcome: dict[str, object] = {}
    worker = threading.Thread(target=lambda: outcome.update(results=runner.upgrade()))
    worker.start()
    deadline = time.monotonic() + 30
    while rival.info() is None:  # the run has taken the lock
        assert worker.is_alive() and time.monotonic() < deadline, "the run never took the lock"
        time.sleep(0.02)
    until = time.monotonic() + 2 * rival.stale_after  # two lease lengths: the holder keeps renewing
    refusals = 0
    try:
        while refusals < 8 or time.monotonic() < until:
            with pytest.raises(ConcurrentMigrationError, match="is being migrated by"):
                rival.acquire("rival")
            refusals += 1
            time.sleep(0.25)
    finally:
        release.set()
    worker.join(60)
    assert [r.version for r in outcome["results"]] == ["0001"]
    rival.acquire("rival")  # once the run has recorded 0001 and released the lock
    assert runner.current() == "0001"
    rival.release("rival")


WORKER = """
import sys
from pathlib import Path
from iceberg_ops_provider.catalogs import CatalogFactory
from iceberg_ops_provider.runner import MigrationRunner

root = Path(sys.argv[1])
catalog = CatalogFactory.build("sqlite", db_path=root / "catalog.db", warehouse_dir=root / "warehouse")
atomic = sys.argv[2:] != ["per-table"]
MigrationRunner(catalog, "sales", root / "migrations", atomic_commits=atomic).upgrade()
"""


def _kill_in(tmp_path: Path, module: str, target: str, *, after: bool = False) -> dict[str, str]:
    """The environment of a worker that SIGKILLs itself in ``module.target`` (or right after it returns)."""
    hook = tmp_path / "sitecustomize_dir"
    hook.mkdir()
    owner, _, name = target.rpartition(".")
    (hook / "sitecustomize.py").write_text(
        "import os, signal\n"
        f"import {module} as patched\n"
        f"original = patched.{target}\n"
        "def _die(*args, **kwargs):\n"
        f"    {'original(*args, **kwargs)' if after else 'pass'}\n"
        "    os.kill(os.getpid(), signal.SIGKILL)\n"
        f"{'patched.' + owner if owner else 'patched'}.{name} = _die\n"
    )
    return {**os.environ, "PYTHONPATH": os.pathsep.join([str(hook), os.environ.get("PYTHONPATH", "")])}


def test_a_killed_run_is_taken_over_without_unlock_and_its_commit_is_recorded_not_repeated(tmp_path: Path):
    migrations = tmp_path / "migrations"
    reached = tmp_path / "reached"
    write_migration(migrations, "0001_create.py", 'ctx.create_table("orders", pa.schema([("id", pa.int64())]))')
    # 0002 commits its table change, then hangs until killed (after the commit, before the history write).
    write_migration(
        migrations,
        "0002_add.py",
        'ctx.add_column("orders", "email", "string")\n'
        'ctx.load_table("orders")  # commits what is staged\n'
        f"open({str(reached)!r}, 'w').close()\n"
        "import time\ntime.sleep(600)",
    )
    process = subprocess.Popen([sys.executable, "-c", WORKER, str(tmp_path)], start_new_session=True)
    deadline = time.monotonic() + 60
    while not reached.exists():
        assert process.poll() is None and time.monotonic() < deadline, "the worker never reached the commit"
        time.sleep(0.05)
    os.killpg(process.pid, signal.SIGKILL)
    process.wait()

    runner = MigrationRunner(_sqlite(tmp_path), "sales", migrations)
    assert runner.status().lock is not None  # the dead run's lock is still there ...
    assert runner.status().interrupted.version == "0002"
    # ... yet the next run proceeds: the holder's process is gone from this host. 0002 committed but
    # its body had not finished, so it is partial and a person decides; nothing ran twice.
    from iceberg_ops_provider.errors import PartialMigrationError

    with pytest.raises(PartialMigrationError, match=r"committed: sales\.orders \(commit\)"):
        runner.upgrade()
    trail = [(e.event, e.version) for e in runner.events()]
    assert trail == [("applied", "0001"), ("lock_taken_over", None), ("recovery_partial", "0002")]
    assert "email" in runner.catalog.load_table("sales.orders").schema().column_names
    assert runner.lock.info() is None  # the stopped run released what it took over


def test_a_killed_run_after_all_its_commits_is_recorded_as_applied_by_the_next_run(tmp_path: Path):
    """Committed but not recorded: the per-table commits that catalogs without a multi-table commit use."""
    migrations = tmp_path / "migrations"
    write_migration(migrations, "0001_create.py", 'ctx.create_table("orders", pa.schema([("id", pa.int64())]))')
    write_migration(migrations, "0002_add.py", 'ctx.add_column("orders", "email", "string")')
    catalog = _sqlite(tmp_path)
    runner = MigrationRunner(catalog, "sales", migrations, atomic_commits=False)
    runner.upgrade("0001")
    # Kill the worker right after 0002's table commit: the history write is where it dies.
    environment = _kill_in(tmp_path, "iceberg_ops_provider.history.store", "HistoryStore.record")
    result = subprocess.run([sys.executable, "-c", WORKER, str(tmp_path), "per-table"], env=environment, timeout=120)
    assert result.returncode == -signal.SIGKILL
    assert runner.status().pending[0].version == "0002"  # not recorded ...
    assert "email" in catalog.load_table("sales.orders").schema().column_names  # ... but committed

    assert runner.upgrade() == []  # recorded without running it again (a rerun would fail: column exists)
    history = {row.version: row for row in runner.history()}
    assert history["0002"].status == "applied" and history["0002"].run_id != history["0001"].run_id
    trail = [(e.event, e.version) for e in runner.events()]
    # The killed run's apply of 0002 is recorded for it (its run id, not the recovering run's).
    assert trail == [("applied", "0001"), ("lock_taken_over", None), ("applied", "0002"), ("recovered", "0002")]
    recovered = runner.events()[2]
    assert recovered.run_id == history["0002"].run_id and recovered.details["recorded_by_run"] != recovered.run_id
    assert runner.status().is_clean and runner.lock.intent() is None


def test_a_run_killed_right_after_its_all_or_nothing_commit_left_the_migration_recorded(tmp_path: Path):
    """With the history row in the migration's own commit, "committed but not recorded" cannot happen."""
    migrations = tmp_path / "migrations"
    write_migration(migrations, "0001_create.py", 'ctx.create_table("orders", pa.schema([("id", pa.int64())]))')
    write_migration(
        migrations,
        "0002_add.py",
        'ctx.add_column("orders", "email", "string")\nctx.create_table("items", pa.schema([("id", pa.int64())]))',
    )
    catalog = _sqlite(tmp_path)
    runner = MigrationRunner(catalog, "sales", migrations)
    runner.upgrade("0001")
    # Kill the worker the moment 0002's one commit returns, before anything else of the run.
    environment = _kill_in(tmp_path, "iceberg_ops_provider.runner.journal", "commit_atomically", after=True)
    result = subprocess.run([sys.executable, "-c", WORKER, str(tmp_path)], env=environment, timeout=120)
    assert result.returncode == -signal.SIGKILL
    status = runner.status()
    assert status.current == "0002" and status.pending == [] and status.interrupted is None
    assert "email" in catalog.load_table("sales.orders").schema().column_names and catalog.table_exists("sales.items")
    assert runner.lock.intent() is None  # no intent was needed for it

    assert runner.upgrade() == []  # nothing to settle, nothing to run
    trail = [(e.event, e.version) for e in runner.events()]
    # The dead run's own event batch never reached the log; the history row shows its apply all the same.
    assert trail == [("applied", "0001"), ("applied", "0002"), ("lock_taken_over", None)]
    assert runner.status().is_clean and runner.lock.info() is None


def test_stop_releases_the_lock_and_refuses_further_commits(catalog, migrations_dir):
    started = threading.Event()
    release = threading.Event()
    write_migration(migrations_dir, "0001_t.py", 'ctx.create_table("t", pa.schema([("n", pa.int64())]))')
    write_migration(
        migrations_dir,
        "0002_wait.py",
        "import builtins\nbuiltins._iceberg_ops_test_started.set()\nbuiltins._iceberg_ops_test_release.wait(30)\n"
        'ctx.set_properties("t", late="yes")',
    )
    import builtins

    builtins._iceberg_ops_test_started = started  # type: ignore[attr-defined]
    builtins._iceberg_ops_test_release = release  # type: ignore[attr-defined]
    runner = MigrationRunner(catalog, "sales", migrations_dir)
    errors: list[BaseException] = []

    def run() -> None:
        try:
            runner.upgrade()
        except BaseException as exc:
            errors.append(exc)

    worker = threading.Thread(target=run)
    worker.start()
    assert started.wait(30)
    runner.stop()  # what Airflow's on_kill does
    assert runner.lock.info() is None
    release.set()
    worker.join(30)
    assert errors and "was stopped" in str(errors[0])
    assert "late" not in catalog.load_table("sales.t").properties
    # Without the lock it writes no history either (another run may own the namespace now): 0002 is pending.
    assert {row.version: row.status for row in runner.history()} == {"0001": "applied"}
    assert [step.version for step in runner.status().pending] == ["0002"]
