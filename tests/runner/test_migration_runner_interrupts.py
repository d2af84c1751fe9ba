"""Failures that are not ordinary exceptions, races on a fresh namespace, namespaces created by failed migrations."""

from __future__ import annotations

import subprocess
import sys
import threading
from pathlib import Path

import pytest

from iceberg_ops_provider.catalogs import CatalogFactory
from iceberg_ops_provider.errors import ConcurrentMigrationError, MigrationFailedError
from iceberg_ops_provider.history.lock import NamespaceLock
from iceberg_ops_provider.runner import MigrationRunner
from tests.support.migrations import write_migration


class TaskTimeout(BaseException):
    """Stands in for Airflow's AirflowTaskTimeout / AirflowTaskTerminated, which derive from BaseException."""


def _statuses(runner: MigrationRunner) -> dict[str, tuple[str, str | None]]:
    return {row.version: (row.status, row.error) for row in runner.history()}


@pytest.mark.parametrize(
    ("raise_it", "kind"),
    [("raise KeyboardInterrupt()", KeyboardInterrupt), ("raise TaskTimeout('execution_timeout')", TaskTimeout)],
)
def test_interrupts_and_task_timeouts_are_recorded_and_keep_their_type(runner, migrations_dir, raise_it, kind):
    import builtins

    builtins.TaskTimeout = TaskTimeout  # type: ignore[attr-defined]
    write_migration(migrations_dir, "0001_t.py", 'ctx.create_table("t", pa.schema([("n", pa.int64())]))')
    write_migration(migrations_dir, "0002_slow.py", f'ctx.set_properties("t", a="1")\n{raise_it}')
    with pytest.raises(kind):
        runner.upgrade()
    statuses = _statuses(runner)
    assert statuses["0001"] == ("applied", None)
    assert statuses["0002"][0] == "failed" and kind.__name__ in statuses["0002"][1]
    assert not statuses["0002"][1].rstrip().endswith(":")  # a bare Ctrl-C is named, not followed by an empty text
    assert runner.lock.info() is None
    assert "a" not in runner.catalog.load_table("sales.t").properties  # staged, never committed


def test_a_migration_that_exits_is_a_failed_migration(runner, migrations_dir):
    write_migration(migrations_dir, "0001_exit.py", "import sys\nsys.exit(0)")
    with pytest.raises(MigrationFailedError, match=r"Migration 0001 failed during upgrade.*SystemExit"):
        runner.upgrade()
    assert _statuses(runner)["0001"][0] == "failed"


def test_the_cli_exits_1_when_a_migration_calls_sys_exit_0(tmp_path: Path):
    cli = str(Path(sys.executable).parent / "iceberg-ops")
    subprocess.run([cli, "--namespace", "sales", "init"], cwd=tmp_path, check=True, capture_output=True, timeout=120)
    write_migration(tmp_path / "migrations", "0001_exit.py", "import sys\nsys.exit(0)")
    result = subprocess.run([cli, "upgrade"], cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert result.returncode == 1, result.stderr
    assert "0001 failed during upgrade(): SystemExit: 0" in result.stderr


def test_a_failed_migration_leaves_no_namespace_behind(catalog, runner, migrations_dir):
    write_migration(
        migrations_dir,
        "0001_new_namespace.py",
        'ctx.create_table("brandnew.t", pa.schema([("n", pa.int64())]))\n'
        'ctx.add_column("brandnew.t", "extra", "string")\n'
        'raise RuntimeError("changed my mind")',
    )
    with pytest.raises(MigrationFailedError, match="None of its changes were committed"):
        runner.upgrade()
    assert not catalog.namespace_exists("brandnew")


def test_a_new_namespace_is_created_at_commit_with_everything_staged_for_its_table(catalog, runner, migrations_dir):
    write_migration(
        migrations_dir,
        "0001_new_namespace.py",
        'ctx.create_table("brandnew.t", pa.schema([("n", pa.int64())]), partition_by=["n"])\n'
        'ctx.add_column("brandnew.t", "extra", "string")\n'
        'ctx.set_properties("brandnew.t", owner="ops")',
    )
    runner.upgrade()
    table = catalog.load_table("brandnew.t")
    assert table.schema().column_names == ["n", "extra"]
    assert [field.name for field in table.spec().fields] == ["n"]
    assert table.properties["owner"] == "ops"
    assert table.properties["iceberg-ops.last-migration"].startswith("namespace=sales version=0001 direction=upgrade")


def test_simultaneous_first_runs_on_a_fresh_namespace_only_ever_see_the_lock_error(tmp_path: Path):
    # Each thread has its own catalog object (its own database connections), as separate workers would.
    CatalogFactory.build("sqlite", db_path=tmp_path / "c.db", warehouse_dir=tmp_path / "w")  # the catalog's own tables
    for attempt in range(3):
        namespace = f"fresh{attempt}"
        barrier = threading.Barrier(8, timeout=60)
        outcomes: list[str] = []

        def contend(
            index: int, namespace: str = namespace, barrier: threading.Barrier = barrier, outcomes: list = outcomes
        ) -> None:
            catalog = CatalogFactory.build("sqlite", db_path=tmp_path / "c.db", warehouse_dir=tmp_path / "w")
            lock = NamespaceLock(catalog, "_iceberg_ops", namespace)
            barrier.wait()
            try:
                lock.acquire(f"run-{index}")
                outcomes.append("acquired")
            except ConcurrentMigrationError:
                outcomes.append("refused")
            except BaseException as exc:  # anything else is the bug
                outcomes.append(f"{type(exc).__name__}: {exc}")

        threads = [threading.Thread(target=contend, args=(index,)) for index in range(8)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(60)
        assert sorted(set(outcomes)) == ["acquired", "refused"], outcomes
        assert outcomes.count("acquired") == 1
