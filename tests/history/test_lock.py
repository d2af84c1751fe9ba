"""The per-namespace lock: a table created to acquire and dropped to release."""

from __future__ import annotations

import pytest

from iceberg_ops_provider.history import ConcurrentMigrationError, NamespaceLock
from iceberg_ops_provider.history.lock import lock_table_name


def test_lock_is_exclusive_and_says_who_holds_it(catalog):
    first = NamespaceLock(catalog, "_iceberg_ops", "sales")
    second = NamespaceLock(catalog, "_iceberg_ops", "sales")
    other_namespace = NamespaceLock(catalog, "_iceberg_ops", "finance")
    held = first.acquire("run-a")
    other_namespace.acquire("run-c")  # namespaces lock independently
    with pytest.raises(
        ConcurrentMigrationError, match=r"'sales' is being migrated by run run-a \(.*@.*, pid \d+\) since"
    ) as info:
        second.acquire("run-b")
    assert info.value.holder["run_id"] == "run-a" and info.value.namespace == "sales"
    assert "force_unlock()" in str(info.value)
    assert first.info() == held
    first.release("run-a")
    assert first.info() is None
    second.acquire("run-b")
    first.release("run-a")  # not ours any more: left alone
    assert second.info().run_id == "run-b"


def test_runner_fails_fast_without_executing_when_locked(catalog, runner, three_migrations):
    runner.lock.acquire("crashed-run")
    with pytest.raises(ConcurrentMigrationError, match="Nothing was executed"):
        runner.upgrade()
    assert not catalog.table_exists("sales.orders")
    assert runner.status().lock.run_id == "crashed-run"
    held = runner.force_unlock()
    assert held.run_id == "crashed-run"
    assert runner.force_unlock() is None
    assert len(runner.upgrade()) == 3


def test_lock_table_names_are_safe_and_distinct():
    assert lock_table_name("sales") == "migration_lock_sales"
    assert lock_table_name("a.b") != lock_table_name("a_b")
    assert lock_table_name("Sales-EU").startswith("migration_lock_sales_eu_")


def test_a_failed_lock_release_does_not_hide_the_runs_error(catalog, runner, migrations_dir, monkeypatch, caplog):
    # A catalog failing exactly at release time cannot be staged with a real catalog, so the release
    # is made to fail here; everything else is real.
    from iceberg_ops_provider.errors import MigrationFailedError
    from tests.support.migrations import write_migration

    write_migration(migrations_dir, "0001_fails.py", 'raise RuntimeError("the run\'s own error")')

    def broken_release(run_id: str, **_options: object) -> None:
        raise OSError("catalog unreachable")

    monkeypatch.setattr(runner.lock, "release", broken_release)
    with pytest.raises(MigrationFailedError, match="the run's own error"):
        runner.upgrade()
    assert "could not release the migration lock" in caplog.text and "catalog unreachable" in caplog.text
