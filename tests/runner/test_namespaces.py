"""Namespace names checked up front: shape, length, characters, and what the catalog can hold."""

from __future__ import annotations

import pyarrow as pa
import pytest
from pyiceberg.catalog.glue import GlueCatalog

from iceberg_ops_provider.catalogs import CatalogFactory
from iceberg_ops_provider.errors import CatalogConfigError
from iceberg_ops_provider.history.lock import lock_table_name
from iceberg_ops_provider.runner import MigrationRunner
from iceberg_ops_provider.runner.namespaces import MAX_PART_LENGTH, check_namespace, check_runner_namespaces
from tests.support.migrations import ORDERS, write_migration

SHAPE = r"use a name such as 'sales' or dotted parts such as 'lake\.sales'"


@pytest.fixture
def glue_catalog() -> GlueCatalog:
    """A real Glue catalog object; building it contacts nothing, and neither do the checks."""
    return GlueCatalog("glue", **{"glue.region": "eu-west-1", "glue.access-key-id": "x", "glue.secret-access-key": "y"})


@pytest.mark.parametrize("value", ["sales", "lake.sales", "a.b.c", "x" * MAX_PART_LENGTH, "ventes_été", "my sales"])
def test_valid_names(value):
    check_namespace("namespace", value)


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ("", SHAPE),
        (None, SHAPE),
        (3, SHAPE),
        (("lake", "sales"), SHAPE),
        (".sales", SHAPE),
        ("sales.", SHAPE),
        ("lake..sales", SHAPE),
        (" sales", SHAPE),
        ("sales\t", SHAPE),
        ("lake. sales", SHAPE),
        ("sa\nles", r"control character '\\n'"),
        ("sa\x00les", r"control character '\\x00'"),
        ("sa\x7fles", r"control character '\\x7f'"),
        ("lake/sales", r"'/'.*path separator"),
        ("lake\\sales", r"'\\\\'.*path separator"),
        ("x" * (MAX_PART_LENGTH + 1), r"129 characters long; use at most 128 characters per part"),
        ("lake." + "x" * 300, r"300 characters long; use at most 128 characters per part"),
    ],
)
def test_invalid_names_say_what_and_how_to_fix(value, message):
    with pytest.raises(CatalogConfigError, match=message) as info:
        check_namespace("meta_namespace", value)
    assert isinstance(info.value, ValueError)
    assert str(info.value).startswith("meta_namespace ")
    assert "not a valid namespace" in str(info.value)


def test_a_very_long_value_is_shortened_in_the_message():
    with pytest.raises(CatalogConfigError) as info:
        check_namespace("namespace", "x" * 300)
    message = str(info.value)
    assert "x" * 300 not in message and "x" * 40 in message
    assert "it is 300 characters long" in message
    assert len(message) < 250


def test_a_128_character_namespace_migrates_and_its_lock_table_name_fits(catalog, migrations_dir):
    namespace = "n" * MAX_PART_LENGTH
    check_runner_namespaces(catalog, namespace, "_iceberg_ops")
    assert len(lock_table_name(namespace)) < 255
    assert len(lock_table_name("N" * MAX_PART_LENGTH)) < 255  # sanitised, so with a hash suffix
    write_migration(migrations_dir, "0001_create_orders.py", ORDERS, 'ctx.drop_table("orders")')
    runner = MigrationRunner(catalog, namespace, migrations_dir)
    assert [result.version for result in runner.upgrade()] == ["0001"]
    assert catalog.table_exists((namespace, "orders"))
    assert [result.version for result in runner.downgrade("base")] == ["0001"]


@pytest.mark.parametrize("namespace", ["é" * 100, "a," * 63 + "a", "\u540d" * 30])
def test_a_namespace_too_long_for_the_history_partition_folder_is_refused(catalog, namespace):
    # The history table is partitioned by namespace: its rows go to a folder named
    # "namespace=<percent-encoded name>", which must fit in a 255-byte file name.
    with pytest.raises(CatalogConfigError, match=r"percent-encoded.*use a shorter name") as info:
        check_runner_namespaces(catalog, namespace, "_iceberg_ops")
    assert "namespace=" in str(info.value)


def test_the_longest_accepted_encoded_name_migrates(catalog, migrations_dir):
    namespace = "a," * 59 + "a" * 9  # 127 characters, 245 once percent-encoded (',' is '%2C')
    check_runner_namespaces(catalog, namespace, "_iceberg_ops")
    write_migration(migrations_dir, "0001_create_orders.py", ORDERS)
    assert [result.version for result in MigrationRunner(catalog, namespace, migrations_dir).upgrade()] == ["0001"]
    with pytest.raises(CatalogConfigError, match="percent-encoded"):
        check_runner_namespaces(catalog, namespace + "a", "_iceberg_ops")


def test_both_names_are_checked(catalog):
    with pytest.raises(CatalogConfigError, match=r"^namespace 'lake\.\.sales'"):
        check_runner_namespaces(catalog, "lake..sales", "_iceberg_ops")
    with pytest.raises(CatalogConfigError, match=r"^meta_namespace '' "):
        check_runner_namespaces(catalog, "sales", "")


def test_the_meta_namespace_itself_is_refused(catalog):
    with pytest.raises(CatalogConfigError, match="is the meta-namespace that holds the history; migrate another"):
        check_runner_namespaces(catalog, "_iceberg_ops", "_iceberg_ops")


@pytest.mark.parametrize(("namespace", "meta"), [("_iceberg_ops.sales", "_iceberg_ops"), ("ops.meta.x", "ops.meta")])
def test_a_namespace_under_the_meta_namespace_is_refused(namespace, meta):
    catalog = CatalogFactory.build("memory")
    try:
        with pytest.raises(CatalogConfigError, match=r"inside the meta-namespace .* history and locks live"):
            check_runner_namespaces(catalog, namespace, meta)
    finally:
        catalog.close()


def test_a_name_that_only_starts_like_the_meta_namespace_is_fine(catalog):
    check_runner_namespaces(catalog, "_iceberg_ops_sales", "_iceberg_ops")


def test_sql_catalogs_cannot_stage_a_table_in_a_nested_namespace(catalog):
    # Why nested namespaces are refused on SQL catalogs: the namespace itself can be created, but
    # PyIceberg's staged creation (create_table_transaction, which ctx.create_table uses) refuses it.
    catalog.create_namespace("lake.sales")
    schema = pa.schema([pa.field("id", pa.int64())])
    with pytest.raises(ValueError, match="hierarchical namespaces are not supported"):
        catalog.create_table_transaction(("lake", "sales", "orders"), schema)


@pytest.mark.parametrize("kind", ["sqlite", "memory"])
def test_a_nested_namespace_is_refused_up_front_on_sql_catalogs(tmp_path, kind):
    options = {"db_path": tmp_path / "c.db"} if kind == "sqlite" else {}
    catalog = CatalogFactory.build(kind, warehouse_dir=tmp_path / "warehouse", **options)
    try:
        with pytest.raises(CatalogConfigError) as info:
            check_runner_namespaces(catalog, "lake.sales", "_iceberg_ops")
        message = str(info.value)
        assert "namespace 'lake.sales' is nested" in message
        assert "SqlCatalog" in message
        assert "'lake_sales'" in message and "REST catalog" in message
        assert catalog.list_namespaces() == []
    finally:
        catalog.close()


def test_a_nested_meta_namespace_works_on_sql_catalogs(catalog, migrations_dir, three_migrations):
    # The history and lock tables are created directly (not staged), which SQL catalogs allow.
    check_runner_namespaces(catalog, "sales", "ops.meta")
    runner = MigrationRunner(catalog, "sales", migrations_dir, meta_namespace="ops.meta")
    assert [result.version for result in runner.upgrade()] == ["0001", "0002", "0003"]
    assert [result.version for result in runner.downgrade("base")] == ["0003", "0002", "0001"]
    assert {row.status for row in runner.history()} == {"rolled_back"}


def test_catalogs_without_nested_namespaces_refuse_both_names(glue_catalog):
    check_runner_namespaces(glue_catalog, "sales", "_iceberg_ops")
    with pytest.raises(CatalogConfigError, match=r"namespace 'lake\.sales' is nested.*GlueCatalog.*'lake_sales'"):
        check_runner_namespaces(glue_catalog, "lake.sales", "_iceberg_ops")
    with pytest.raises(CatalogConfigError, match=r"meta_namespace 'ops\.meta' is nested.*GlueCatalog.*'ops_meta'"):
        check_runner_namespaces(glue_catalog, "sales", "ops.meta")
