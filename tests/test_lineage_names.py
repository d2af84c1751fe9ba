"""Lineage names of Iceberg tables: OpenLineage's naming of storage locations, and catalog symlink namespaces."""

from __future__ import annotations

import pytest

from iceberg_ops_provider.lineage import DatasetName, catalog_namespace, table_dataset


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
