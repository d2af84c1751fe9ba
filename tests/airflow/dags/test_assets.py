"""Assets of Iceberg tables: one name and URI per table, and the metadata operators attach to their events."""

from __future__ import annotations

import pyarrow as pa
import pytest
from airflow.sdk import Asset
from airflow.sdk.execution_time.context import OutletEventAccessors

from iceberg_ops_provider.assets import asset_table, iceberg_asset
from tests.airflow.conftest import catalog_at


def test_an_iceberg_asset_has_one_name_and_uri_per_table():
    asset = iceberg_asset("lake", "sales.orders")
    assert (asset.name, asset.uri) == ("lake.sales.orders", "iceberg://lake/sales/orders")
    assert asset == iceberg_asset("lake", "sales.orders")  # built twice, the same asset
    nested = iceberg_asset("lake", "a.b.orders", group="tables")
    assert (nested.name, nested.uri, nested.group) == ("lake.a.b.orders", "iceberg://lake/a.b/orders", "tables")


def test_the_table_of_an_asset_is_read_back_and_other_assets_name_none():
    assert asset_table(iceberg_asset("lake", "sales.orders")) == ("lake", "sales.orders")
    assert asset_table(iceberg_asset("lake", "a.b.orders")) == ("lake", "a.b.orders")
    assert asset_table(Asset(name="orders", uri="s3://bucket/orders")) is None
    assert asset_table(Asset(name="x", uri="iceberg://lake/only-two")) is None
    assert asset_table("iceberg://lake/sales/orders") is None  # not an asset


@pytest.mark.parametrize(
    ("catalog", "table", "message"),
    [
        ("lake", "orders", "with its namespace"),
        ("", "sales.orders", "non-empty string"),
        (None, "sales.orders", "non-empty string"),
        ("my.lake", "sales.orders", "one word"),
        ("lake/x", "sales.orders", "one word"),
        ("lake", "sales..orders", "malformed part"),
        ("lake", "sales.orders ", "malformed part"),
        ("lake", "sales/x.orders", "malformed part"),
        ("lake", ["sales", "orders"], "with its namespace"),
    ],
)
def test_bad_catalog_or_table_names_are_refused_with_the_fix(catalog, table, message):
    with pytest.raises(ValueError, match=message):
        iceberg_asset(catalog, table)


@pytest.mark.parametrize(
    ("catalog", "table", "refused"),
    [
        ("lake", "sales.ord<ers>", "'<' '>'"),
        ("lake", 'sales."orders"', "'\"'"),
        ("lake", "sales.o\\x", "'\\\\'"),
        ("lake", "sales.orders\x00", "'\\x00'"),
        ("lake", "sales.[orders]", "'[' ']'"),
        ("lake", "sales.or ders", "' '"),
        ("la{ke}", "sales.orders", "'{' '}'"),
        ("lake\t", "sales.orders", "'\\t'"),
    ],
)
def test_what_the_rule_refuses_is_refused_and_named(catalog, table, refused):
    with pytest.raises(ValueError) as error:
        iceberg_asset(catalog, table)
    assert f"contains {refused}" in str(error.value)
    assert 'whitespace, control characters and / : @ ? # % < > " \\ ^ ` { } | [ ] are not' in str(error.value)


@pytest.mark.parametrize("table", ["ventes.données", "Sales.Orders", "sales.orders+v2", "sales.o&x=1", "a.b.c.orders"])
def test_what_the_rule_allows_is_allowed_and_read_back(table):
    assert asset_table(iceberg_asset("lake", table)) == ("lake", table)


def test_name_and_uri_cannot_be_overridden():
    with pytest.raises(ValueError, match="do not pass uri"):
        iceberg_asset("lake", "sales.orders", uri="s3://x/y")


# -- extras the operators attach ------------------------------------------------------------------


@pytest.fixture
def clicks(iceberg_connection):
    catalog = catalog_at(iceberg_connection)
    catalog.create_namespace("shop")
    table = catalog.create_table("shop.clicks", pa.schema([pa.field("id", pa.int64())]))
    for n in range(6):
        table.append(pa.table({"id": pa.array([n], pa.int64())}))
    return catalog


def test_a_compaction_attaches_its_table_snapshot_and_rows_to_the_asset_naming_it(clicks):
    from iceberg_ops_provider.operators.maintenance import IcebergCompactOperator

    named, other, wrong_table = (
        iceberg_asset("lake", "shop.clicks"),
        Asset(name="dashboards", uri="s3://bucket/dashboards"),
        iceberg_asset("lake", "shop.views"),
    )
    operator = IcebergCompactOperator(
        task_id="compact", table="shop.clicks", min_input_files=2, outlets=[named, other, wrong_table]
    )
    events = OutletEventAccessors()
    payload = operator.execute(context={"outlet_events": events})

    snapshot_id = clicks.load_table("shop.clicks").current_snapshot().snapshot_id
    assert events[named].extra == {
        "table": "shop.clicks",
        "snapshot_id": snapshot_id,
        "rows": 6,
        "operation": "compaction",
    }
    summary = events[other].extra
    assert summary["table"] == "shop.clicks" and summary["operation"] == "compaction"
    assert summary["rewritten_data_files_count"] == payload["rewritten_data_files_count"] == 6
    assert events[wrong_table].extra == summary  # an iceberg asset of a table not written: the summary


def test_a_migration_attaches_the_version_applied_to_the_assets_of_the_tables_it_touched(iceberg_connection):
    from iceberg_ops_provider.operators.migrate import IcebergMigrateOperator
    from tests.support.migrations import ORDERS, write_migration

    write_migration(iceberg_connection / "migrations", "0001_orders.py", ORDERS)
    orders, history = iceberg_asset("lake", "sales.orders"), Asset(name="history", uri="x-docs://history")
    operator = IcebergMigrateOperator(
        task_id="migrate",
        namespace="sales",
        migrations_dir=str(iceberg_connection / "migrations"),
        outlets=[orders, history],
    )
    events = OutletEventAccessors()
    operator.execute(context={"outlet_events": events})
    assert events[orders].extra == {
        "table": "sales.orders",
        "snapshot_id": None,  # created empty
        "change": "create",
        "namespace": "sales",
        "version": "0001",
    }
    assert events[history].extra == {
        "namespace": "sales",
        "action": "upgrade",
        "version_before": None,
        "version_after": "0001",
        "tables": [{"table": "sales.orders", "snapshot_id": None, "change": "create"}],
    }


def test_an_operator_without_outlets_or_outside_a_task_attaches_nothing(clicks):
    from iceberg_ops_provider.operators.maintenance import IcebergTableHealthOperator

    operator = IcebergTableHealthOperator(task_id="health", table="shop.clicks")
    events = OutletEventAccessors()
    operator.execute(context={"outlet_events": events})
    assert not list(events)
    with_outlet = IcebergTableHealthOperator(
        task_id="health2", table="shop.clicks", outlets=[iceberg_asset("lake", "shop.clicks")]
    )
    report = with_outlet.execute(context={})  # no outlet_events (execute called directly): nothing to attach to
    assert "needs" in report
