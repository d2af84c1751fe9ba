"""The lineage of a table, built from a real SQLite catalog: names, catalog, schema, snapshot, what was written."""

from __future__ import annotations

from dataclasses import replace

import pyarrow as pa
import pytest

from iceberg_ops_provider.lineage import (
    DatasetName,
    SchemaField,
    TableLineage,
    catalog_namespace,
    catalog_table_name,
    catalog_type,
    dropped_table_lineage,
    public_uri,
    table_dataset,
    table_lineage,
    touched_lineage,
    written_statistics,
)
from iceberg_ops_provider.migration.touched import TouchedTable

SCHEMA = pa.schema([pa.field("id", pa.int64(), nullable=False), pa.field("where", pa.struct([("city", pa.string())]))])


def _rows(start: int, count: int) -> pa.Table:
    return pa.table(
        {
            "id": pa.array(range(start, start + count), pa.int64()),
            "where": [{"city": f"c{n}"} for n in range(count)],
        },
        schema=SCHEMA,
    )


@pytest.fixture
def orders(catalog, namespace):
    table = catalog.create_table("sales.orders", SCHEMA)
    table.append(_rows(0, 3))
    return catalog.load_table("sales.orders")


def test_a_table_is_described_by_its_location_catalog_schema_and_current_snapshot(catalog, orders, tmp_path):
    lineage = table_lineage(catalog, orders)
    assert lineage.table == "sales.orders"
    assert lineage.dataset == DatasetName("file", str(tmp_path / "warehouse" / "sales" / "orders"))
    assert lineage.symlink == DatasetName(f"sqlite:///{tmp_path / 'catalog.db'}", "sales.orders")
    assert (lineage.catalog_name, lineage.catalog_type) == ("sqlite", "sql")
    assert lineage.catalog_uri == f"sqlite:///{tmp_path / 'catalog.db'}"
    assert lineage.warehouse == (tmp_path / "warehouse").as_uri()
    assert lineage.snapshot_id == orders.current_snapshot().snapshot_id
    assert lineage.schema == (
        SchemaField("id", "long"),
        SchemaField("where", "struct", fields=(SchemaField("city", "string"),)),
    )
    assert lineage.file_format == "parquet"
    assert (lineage.rows, lineage.bytes, lineage.files, lineage.change) == (None, None, None, None)


def test_nested_types_are_named_plainly_and_their_content_nested(catalog, namespace):
    nested = pa.schema(
        [
            pa.field("place", pa.struct([("city", pa.string()), ("geo", pa.struct([("lat", pa.decimal128(9, 6))]))])),
            pa.field("tags", pa.list_(pa.string())),
            pa.field("lines", pa.list_(pa.struct([("sku", pa.string())]))),
            pa.field("attrs", pa.map_(pa.string(), pa.int64())),
            pa.field("h", pa.binary(16)),
        ]
    )
    lineage = table_lineage(catalog, catalog.create_table("sales.nested", nested))
    assert lineage.schema == (
        SchemaField(
            "place",
            "struct",
            fields=(
                SchemaField("city", "string"),
                SchemaField("geo", "struct", fields=(SchemaField("lat", "decimal(9, 6)"),)),
            ),
        ),
        SchemaField("tags", "list", fields=(SchemaField("_element", "string"),)),
        SchemaField(
            "lines", "list", fields=(SchemaField("_element", "struct", fields=(SchemaField("sku", "string"),)),)
        ),
        SchemaField("attrs", "map", fields=(SchemaField("key", "string"), SchemaField("value", "long"))),
        SchemaField("h", "fixed[16]"),
    )


def test_an_older_snapshot_is_described_with_the_schema_it_was_written_with(catalog, orders):
    first = orders.current_snapshot().snapshot_id
    from pyiceberg.types import StringType

    with orders.update_schema() as update:
        update.add_column("note", StringType())
    orders = catalog.load_table("sales.orders")
    orders.append(orders.scan().to_arrow().slice(0, 1))
    then = table_lineage(catalog, orders, snapshot_id=first)
    now = table_lineage(catalog, orders)
    assert then.snapshot_id == first and [f.name for f in then.schema] == ["id", "where"]
    assert now.snapshot_id != first and [f.name for f in now.schema] == ["id", "where", "note"]


def test_a_table_without_a_snapshot_has_no_version(catalog, namespace):
    empty = catalog.create_table("sales.empty", SCHEMA)
    assert table_lineage(catalog, empty).snapshot_id is None


def test_what_snapshots_added_is_read_from_their_summaries(catalog, orders):
    first_files = {task.file.file_path for task in orders.scan().plan_files()}
    orders.append(_rows(10, 4))
    orders.append(_rows(20, 5))
    orders = catalog.load_table("sales.orders")
    last_two = [snapshot.snapshot_id for snapshot in orders.snapshots()][-2:]
    rows, size, files = written_statistics(orders, last_two)
    added = [f for f in orders.inspect.files().to_pylist() if f["file_path"] not in first_files]
    assert (rows, files, size) == (9, 2, sum(f["file_size_in_bytes"] for f in added))
    assert written_statistics(orders, []) == (0, 0, 0)


def test_a_dropped_table_is_named_by_the_location_it_had(catalog):
    gone = dropped_table_lineage(catalog, "sales.old", "s3://lake/warehouse/sales/old")
    assert gone.dataset == DatasetName("s3://lake", "warehouse/sales/old")
    assert (gone.change, gone.schema, gone.snapshot_id) == ("drop", (), None)
    unknown = dropped_table_lineage(catalog, "sales.older", None)
    assert unknown.dataset is None and unknown.symlink.name == "sales.older"


def test_the_tables_a_migration_touched_are_described_as_they_are_now(catalog, orders, namespace):
    catalog.rename_table("sales.orders", "sales.orders_v2")
    described = touched_lineage(
        catalog,
        [
            TouchedTable("sales.orders_v2", "rename", previous="sales.orders"),
            TouchedTable("sales.old", "drop", location="file:///w/sales/old"),
            TouchedTable("sales.vanished", "create"),  # dropped by someone else since: left out
            TouchedTable("sales.orders_v2", "write"),
        ],
    )
    assert [(t.table, t.change, t.previous_table) for t in described] == [
        ("sales.orders_v2", "rename", "sales.orders"),
        ("sales.old", "drop", None),
        ("sales.orders_v2", None, None),  # loaded to write: no change of the table itself
    ]
    assert described[0].snapshot_id == catalog.load_table("sales.orders_v2").current_snapshot().snapshot_id
    assert described[1].dataset == DatasetName("file", "/w/sales/old")


def test_catalog_types_come_from_the_catalog_class(catalog):
    from iceberg_ops_provider.catalogs import CatalogFactory

    assert catalog_type(catalog) == "sql"
    assert catalog_type(CatalogFactory.build("memory")) == "sql"  # a subclass of the SQL catalog

    from types import SimpleNamespace

    assert catalog_type(SimpleNamespace(properties={"type": "nessie"})) == "nessie"


@pytest.mark.parametrize(
    ("uri", "published"),
    [
        ("sqlite:////tmp/lake/catalog.db", "sqlite:////tmp/lake/catalog.db"),
        ("postgresql://ops:Pa55@db:5432/lake?sslmode=require", "postgresql://db:5432/lake"),
        ("https://polaris:8181/api/catalog/#x", "https://polaris:8181/api/catalog"),
        ("https://h/x?Signature=s1&X-Amz-Credential=c2&token=t3&region=eu", "https://h/x?region=eu"),
        ("", None),
    ],
)
def test_uris_are_published_without_credentials(uri, published):
    assert public_uri(uri) == published


def test_table_lineage_is_plain_frozen_data(catalog, orders):
    lineage = table_lineage(catalog, orders, rows=3, bytes=10, files=1, change="create")
    assert isinstance(lineage, TableLineage) and (lineage.rows, lineage.bytes, lineage.files) == (3, 10, 1)
    with pytest.raises(AttributeError):
        lineage.table = "other"  # type: ignore[misc]


@pytest.mark.parametrize(
    ("kind", "properties", "namespace"),
    [
        ("hive", {"uri": "thrift://metastore.example:9083"}, "hive://metastore.example:9083"),
        ("hive", {"uri": "thrift://hms-a:9083,thrift://hms-b:9083"}, "hive://hms-a:9083"),
        ("glue", {"glue.region": "eu-west-1", "glue.id": "123456789012"}, "arn:aws:glue:eu-west-1:123456789012"),
        ("glue", {"glue.region": "eu-west-1"}, "arn:aws:glue:eu-west-1"),  # the account needs a call to AWS
        ("rest", {"uri": "https://polaris.example/api/catalog"}, "https://polaris.example/api/catalog"),
    ],
)
def test_symlink_namespaces_follow_the_openlineage_naming_of_each_catalog(kind, properties, namespace):
    assert catalog_namespace(kind, properties, "c") == namespace


def test_glue_names_tables_as_openlineage_does_and_a_rename_names_both(catalog, orders):
    lineage = table_lineage(catalog, orders, change="rename", previous_table="sales.old")
    glue = replace(lineage, catalog_type="glue", catalog_namespace="arn:aws:glue:eu-west-1:123456789012")
    assert glue.symlink == DatasetName("arn:aws:glue:eu-west-1:123456789012", "table/sales/orders")
    assert glue.previous_symlink == DatasetName("arn:aws:glue:eu-west-1:123456789012", "table/sales/old")
    assert lineage.symlink.name == "sales.orders" and lineage.previous_symlink.name == "sales.old"
    assert catalog_table_name("glue", "orders") == "table/orders"


# --- Lineage names of Iceberg tables: OpenLineage's naming of storage locations, and catalog symlink namespaces.


@pytest.mark.parametrize(
    ("location", "expected"),
    [
        ("s3://lake/warehouse/sales/orders", ("s3://lake", "warehouse/sales/orders")),
        ("s3a://lake/warehouse/sales/orders/", ("s3://lake", "warehouse/sales/orders")),
        ("s3://key:secret@lake/w/t", ("s3://lake", "w/t")),
        ("gs://lake/w/t", ("gs://lake", "w/t")),
        ("abfss://data@acct.dfs.core.windows.net/w/t", ("abfss://data@acct.dfs.core.windows.net", "w/t")),
        ("hdfs://namenode:8020/warehouse/t", ("hdfs://namenode:8020", "/warehouse/t")),
        ("file:///tmp/warehouse/sales/orders", ("file", "/tmp/warehouse/sales/orders")),
        ("/tmp/warehouse//sales/./orders/", ("file", "/tmp/warehouse/sales/orders")),
    ],
)
def test_a_table_is_named_by_its_location_as_openlineage_names_storage(location, expected):
    assert table_dataset(location) == DatasetName(*expected)


def test_a_table_without_a_location_cannot_be_named():
    with pytest.raises(ValueError, match="table location is needed"):
        table_dataset(" ")


@pytest.mark.parametrize(
    ("kind", "properties", "name", "expected"),
    [
        (
            "rest",
            {"uri": "https://polaris.example:8181/api/catalog/"},
            "prod",
            "https://polaris.example:8181/api/catalog",
        ),
        ("sql", {"uri": "postgresql+psycopg://ops:Pa55@db:5432/lake"}, "lake", "postgresql+psycopg://db:5432/lake"),
        ("hive", {"uri": "thrift://metastore:9083"}, "hive", "hive://metastore:9083"),
        ("glue", {"glue.region": "eu-west-1"}, "glue", "arn:aws:glue:eu-west-1"),
        ("in-memory", {}, "scratch", "in-memory://scratch"),
    ],
)
def test_the_catalog_symlink_namespace_is_its_uri_without_credentials(kind, properties, name, expected):
    namespace = catalog_namespace(kind, properties, name)
    assert namespace == expected and "Pa55" not in namespace
