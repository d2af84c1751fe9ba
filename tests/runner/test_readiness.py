"""Readiness checks on real catalogs: migration versions from the history, and how checks treat catalog errors.

The partition checks are in ``test_partition_probe.py``.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pyarrow as pa
import pytest
from pyiceberg.exceptions import NoSuchTableError, TooManyRequestsError
from sqlalchemy.engine import make_url
from sqlalchemy.exc import OperationalError

from iceberg_ops_provider.catalogs import CatalogFactory
from iceberg_ops_provider.core.polling import is_transient, timeout_message
from iceberg_ops_provider.errors import CatalogUnavailableError, MigrationFailedError
from iceberg_ops_provider.partitions.probe import PartitionProbe, describe_partition_wait, probe_partition
from iceberg_ops_provider.runner import MigrationRunner
from iceberg_ops_provider.runner.readiness import (
    NamespaceVersion,
    check_wanted_version,
    describe_version_wait,
    namespace_version,
    newest_version,
    resolve_version,
    version_reached,
)
from tests.support.migrations import ORDERS, write_migration
from tests.support.proxy import TcpProxy

# -- migrations ---------------------------------------------------------------------------------


@pytest.fixture
def migrations(tmp_path: Path) -> Path:
    folder = tmp_path / "migrations"
    write_migration(folder, "0001_create_orders.py", ORDERS, 'ctx.drop_table("orders")')
    write_migration(
        folder, "0002_add_email.py", 'ctx.add_column("orders", "email", "string")', 'ctx.drop_column("orders", "email")'
    )
    write_migration(
        folder, "0003_owner.py", 'ctx.set_properties("orders", owner="x")', 'ctx.remove_properties("orders", "owner")'
    )
    return folder


def test_a_namespace_never_migrated_is_at_base_and_reading_creates_nothing(catalog):
    catalog.create_namespace("sales")
    seen = namespace_version(catalog, "sales")
    note = "no migration history of it in '_iceberg_ops'"
    assert seen == NamespaceVersion("sales", None, (), note)
    assert not version_reached(seen.current, "0001")
    assert version_reached(seen.current, None)  # base is always reached
    assert catalog.list_namespaces() == [("sales",)]  # no meta-namespace, no history table
    assert seen.describe() == f"namespace 'sales' at base ({note})"


def test_versions_are_reached_numerically_as_the_runner_orders_them(catalog, migrations):
    catalog.create_namespace("sales")
    runner = MigrationRunner(catalog, "sales", migrations)
    runner.upgrade("0002")

    seen = namespace_version(catalog, "sales")
    assert seen.current == "0002"
    assert [version_reached(seen.current, v) for v in ("0001", "0002", "2", "00002", "0003", "10")] == [
        True,
        True,
        True,
        True,
        False,
        False,
    ]
    assert resolve_version("head", migrations, "sales") == "0003"
    assert resolve_version("0002", None, "sales") == "0002"  # an explicit version needs no folder

    runner.upgrade()
    assert version_reached(namespace_version(catalog, "sales").current, "0003")
    runner.downgrade("base")
    assert namespace_version(catalog, "sales").current is None


def test_reading_the_version_neither_takes_nor_waits_for_the_lock(catalog, migrations):
    catalog.create_namespace("sales")
    runner = MigrationRunner(catalog, "sales", migrations)
    runner.upgrade("0001")
    runner.lock.acquire_run("another-run")  # a migration in progress elsewhere

    assert namespace_version(catalog, "sales").current == "0001"
    holder, _ = runner.lock.read()
    assert holder is not None and holder.run_id == "another-run"


def test_a_failed_attempt_is_reported_and_not_counted(catalog, tmp_path):
    catalog.create_namespace("sales")
    folder = tmp_path / "migrations"
    write_migration(folder, "0001_create_orders.py", ORDERS)
    write_migration(folder, "0002_broken.py", 'raise RuntimeError("boom")')
    with pytest.raises(MigrationFailedError):
        MigrationRunner(catalog, "sales", folder).upgrade()

    seen = namespace_version(catalog, "sales")
    assert (seen.current, seen.failed) == ("0001", ("0002",))
    assert not version_reached(seen.current, "0002")
    assert "0002 failed" in seen.describe()
    assert seen.to_json() == {"namespace": "sales", "version": "0001", "failed": ["0002"]}


def test_a_history_in_another_meta_namespace(catalog, migrations):
    catalog.create_namespace("sales")
    MigrationRunner(catalog, "sales", migrations, meta_namespace="ops_meta").upgrade("0001")
    assert namespace_version(catalog, "sales", "ops_meta").current == "0001"
    assert namespace_version(catalog, "sales").current is None  # the default meta-namespace has nothing


def test_head_reads_the_namespace_folder_and_a_folder_without_migrations_is_refused(tmp_path):
    root = tmp_path / "migrations"
    write_migration(root, "0001_flat.py")
    write_migration(root / "sales", "0007_nested.py")
    assert resolve_version("head", root, "sales") == "0007"
    assert resolve_version("head", root, "other") == "0001"
    assert newest_version(root, "sales") == "0007"
    (tmp_path / "empty").mkdir()
    assert newest_version(tmp_path / "empty", "sales") is None
    # An empty folder, or the folder above the migrations (the DAGs folder), has no head: waiting for
    # "base" there would let the load run before the migration.
    for wrong in (tmp_path / "empty", tmp_path):
        with pytest.raises(ValueError, match="holds no migration file"):
            resolve_version("head", wrong, "sales")


def test_a_namespace_at_base_says_why_when_that_may_be_a_mistake(catalog, migrations):
    catalog.create_namespace("sales")
    catalog.create_namespace("other")
    MigrationRunner(catalog, "sales", migrations).upgrade("0001")

    assert namespace_version(catalog, "sales").note is None
    missing = namespace_version(catalog, "slaes")  # a typo
    assert (missing.current, missing.note) == (None, "the namespace does not exist")
    assert missing.describe() == "namespace 'slaes' at base (the namespace does not exist)"
    assert namespace_version(catalog, "other").note == "no migration history of it in '_iceberg_ops'"
    assert namespace_version(catalog, "sales", "ops_meta").note == "no migration history of it in 'ops_meta'"
    assert namespace_version(catalog, "sales").to_json() == {"namespace": "sales", "version": "0001", "failed": []}


@pytest.mark.parametrize("bad", ["latest", "+1", "-1", "", " 3", "v3", None, -1, True, 1.5])
def test_malformed_versions_are_refused(bad):
    with pytest.raises(ValueError, match="'head' or a migration version"):
        check_wanted_version(bad)


def test_head_without_a_folder_is_refused():
    with pytest.raises(ValueError, match="needs migrations_dir"):
        resolve_version("head", None, "sales")


def test_a_malformed_namespace_is_refused(catalog):
    with pytest.raises(ValueError, match="not a valid namespace"):
        namespace_version(catalog, "sales/2026")


# -- waiting --------------------------------------------------------------------------------------


def test_transient_and_permanent_errors():
    assert is_transient(CatalogUnavailableError("no answer"))
    assert is_transient(ConnectionRefusedError()) and is_transient(TimeoutError()) and is_transient(OSError("io"))
    assert is_transient(FileNotFoundError("manifest gone"))
    assert not is_transient(PermissionError("denied"))
    assert not is_transient(ValueError("bad key")) and not is_transient(RuntimeError("?"))


def _database_error(text: str, invalidated: bool = False) -> OperationalError:
    return OperationalError("SELECT 1", {}, Exception(text), connection_invalidated=invalidated)


def test_rate_limits_busy_databases_and_broken_connections_are_transient():
    assert is_transient(TooManyRequestsError("TooManyRequests: Slow down"))  # a REST catalog's 429
    assert is_transient(_database_error("database is locked"))  # SQLite, another writer
    assert is_transient(_database_error("consuming input failed: server closed the connection unexpectedly"))
    assert is_transient(_database_error("terminating connection due to administrator command"))
    assert is_transient(_database_error("anything", invalidated=True))  # SQLAlchemy saw the connection drop
    assert not is_transient(_database_error("no such table: iceberg_tables"))
    assert not is_transient(NoSuchTableError("Table does not exist: shop.nope"))


def _orders(catalog) -> None:
    catalog.create_namespace("shop")
    catalog.create_table("shop.orders", pa.schema([("id", pa.int64())])).append(
        pa.table({"id": pa.array([1, 2], pa.int64())})
    )


@pytest.mark.slow
def test_a_locked_sqlite_catalog_is_a_transient_error(catalog, tmp_path):
    _orders(catalog)
    holder = sqlite3.connect(tmp_path / "catalog.db", isolation_level=None, check_same_thread=False)
    holder.execute("BEGIN EXCLUSIVE")  # a writer holding the database longer than SQLite's busy timeout
    try:
        with pytest.raises(CatalogUnavailableError) as error:
            probe_partition(catalog, "shop.orders", where="id >= 0")
        assert is_transient(error.value)
        assert "database is locked" in str(error.value) and error.value.reason == "busy"
    finally:
        holder.execute("ROLLBACK")
        holder.close()
    assert probe_partition(catalog, "shop.orders", where="id >= 0").rows == 2


@pytest.mark.postgres
def test_a_postgres_catalog_that_goes_away_is_a_transient_error(postgres_url, unique_name, tmp_path):
    url = make_url(postgres_url)
    proxy = TcpProxy(url.port or 5432).start()
    behind = url.set(host="127.0.0.1", port=proxy.port).render_as_string(hide_password=False)
    catalog = CatalogFactory.build("sql", uri=behind, warehouse_dir=tmp_path, name=unique_name, timeout=3)
    try:
        _orders(catalog)
        catalog.create_namespace("sales")
        assert probe_partition(catalog, "shop.orders", where="id >= 0").rows == 2  # connections pooled

        proxy.stop()  # the server goes away: pooled connections are cut, new ones refused
        for check in (
            lambda: probe_partition(catalog, "shop.orders", where="id >= 0"),
            lambda: namespace_version(catalog, "sales"),
        ):
            with pytest.raises(CatalogUnavailableError) as error:
                check()
            assert is_transient(error.value), error.value
            assert f"127.0.0.1:{proxy.port}" in str(error.value)

        proxy.start()  # back on the same port: the next check succeeds
        assert probe_partition(catalog, "shop.orders", where="id >= 0").rows == 2
    finally:
        proxy.stop()
        catalog.close()


def test_messages_say_what_was_awaited_and_seen():
    waiting = describe_partition_wait("sales.events", {"day": "2026-01-02"}, "region = 'eu'", 10, "123")
    assert waiting == (
        "at least 10 row(s) in partition day='2026-01-02' and rows matching \"region = 'eu'\" of sales.events, "
        "committed after snapshot 123"
    )
    seen = PartitionProbe("sales.events", 5, 3, 3, 1).describe()
    assert timeout_message(waiting, 2.5, seen, "CatalogUnavailableError: no answer") == (
        f"Timed out after 2.5 s waiting for {waiting}; last seen: 3 row(s) in 1 data file(s) of sales.events at "
        "snapshot 5; last error: CatalogUnavailableError: no answer."
    )
    assert describe_version_wait("sales", "0003") == "namespace 'sales' to reach migration version 0003"
    assert "nothing (no check succeeded)" in timeout_message("x", 1, None)
