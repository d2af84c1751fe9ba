"""The runner against a real REST catalog speaking the S3 Tables protocol (SeaweedFS, SigV4)."""

from __future__ import annotations

import pytest

from iceberg_ops_provider.catalogs import CatalogFactory
from iceberg_ops_provider.cli.wording import cli_message
from iceberg_ops_provider.errors import ConcurrentMigrationError
from iceberg_ops_provider.runner import MigrationRunner
from tests.support.servers import ACCESS_KEY, REGION, SECRET_KEY

pytestmark = pytest.mark.backends


@pytest.fixture
def rest_catalog(seaweedfs, unique_name):
    arn = seaweedfs.create_table_bucket(unique_name)
    return CatalogFactory.build(
        "s3tables",
        uri=seaweedfs.iceberg_uri,
        warehouse=arn,
        region=REGION,
        **{"client.access-key-id": ACCESS_KEY, "client.secret-access-key": SECRET_KEY},
        **seaweedfs.s3_properties(),
    )


def test_full_cycle_on_s3_tables_with_its_own_meta_namespace(rest_catalog, migrations_dir, three_migrations):
    # S3 Tables refuses namespaces that start with "_", so its users pick another meta-namespace.
    runner = MigrationRunner(rest_catalog, "sales", migrations_dir, meta_namespace="iceberg_ops_meta")
    assert [r.version for r in runner.upgrade()] == ["0001", "0002", "0003"]
    table = rest_catalog.load_table("sales.orders")
    assert "email" in table.schema().column_names and table.properties["owner"] == "sales"
    runner.lock.acquire("other-run")
    with pytest.raises(ConcurrentMigrationError, match="other-run"):
        runner.downgrade("base")
    runner.force_unlock()
    assert [r.version for r in runner.downgrade("base")] == ["0003", "0002", "0001"]
    assert not rest_catalog.table_exists("sales.orders")
    assert {row.status for row in runner.history()} == {"rolled_back"}


def test_nested_namespace_on_a_rest_catalog(rest_catalog, migrations_dir, three_migrations):
    runner = MigrationRunner(rest_catalog, "lake.sales", migrations_dir, meta_namespace="iceberg_ops_meta")
    assert len(runner.upgrade()) == 3
    assert rest_catalog.table_exists(("lake", "sales", "orders"))
    assert runner.current() == "0003"
    assert [r.version for r in runner.downgrade("base")] == ["0003", "0002", "0001"]


def test_s3_tables_gets_a_meta_namespace_it_accepts_by_default(rest_catalog, migrations_dir, three_migrations):
    runner = MigrationRunner(rest_catalog, "sales", migrations_dir)
    assert runner.meta_namespace == "iceberg_ops"
    assert [r.version for r in runner.upgrade()] == ["0001", "0002", "0003"]
    assert rest_catalog.table_exists("iceberg_ops.migration_history")


def test_a_meta_namespace_the_catalog_refuses_names_the_setting(rest_catalog, migrations_dir, three_migrations):
    from iceberg_ops_provider.errors import CatalogConfigError

    runner = MigrationRunner(rest_catalog, "sales", migrations_dir, meta_namespace="_iceberg_ops")
    refused_name = r"refused the meta-namespace '_iceberg_ops'.*meta_namespace=,"
    with pytest.raises(CatalogConfigError, match=refused_name) as refused:
        runner.upgrade()
    assert "--meta-namespace" in cli_message(refused.value) and "meta_namespace=" not in cli_message(refused.value)
    assert not rest_catalog.table_exists("sales.orders")
