"""The remote kinds against real servers on loopback: REST and S3 Tables on SeaweedFS, Glue on moto.

Each test writes real data through the catalog and checks that the Parquet files landed in the
server's S3 store.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import boto3
import pyarrow as pa
import pytest
from pyiceberg.catalog.glue import GlueCatalog
from pyiceberg.catalog.rest import RestCatalog

from iceberg_ops_provider.catalogs import CatalogFactory, from_options
from tests.support.servers import ACCESS_KEY, REGION, SECRET_KEY, boto_kwargs

pytestmark = pytest.mark.backends

ROWS = pa.table({"id": pa.array([1, 2, 3], pa.int64()), "name": ["a", "b", "c"]})


def _round_trip(catalog, namespace: str) -> str:
    catalog.create_namespace(namespace)
    table = catalog.create_table(f"{namespace}.items", ROWS.schema)
    table.append(ROWS)
    reloaded = catalog.load_table(f"{namespace}.items")
    assert sorted(reloaded.scan().to_arrow().column("id").to_pylist()) == [1, 2, 3]
    return reloaded.location()


def _s3_keys(endpoint: str, bucket: str, prefix: str = "") -> list[str]:
    client = boto3.client("s3", **boto_kwargs(endpoint))
    pages = client.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix)
    return [item["Key"] for page in pages for item in page.get("Contents", [])]


def test_rest_kind_against_seaweedfs(seaweedfs, unique_name):
    seaweedfs.create_table_bucket(unique_name)
    catalog = seaweedfs.rest_catalog(unique_name)  # CatalogFactory.build("rest", ...) with SigV4
    assert isinstance(catalog, RestCatalog)
    assert catalog.name == "rest"
    location = _round_trip(catalog, "rest_ns")
    assert location.startswith("s3://")
    bucket, _, prefix = location.removeprefix("s3://").partition("/")
    keys = _s3_keys(seaweedfs.s3_endpoint, bucket, prefix)
    assert any(key.endswith(".parquet") for key in keys), keys


def test_s3tables_kind_presets_sigv4_and_takes_the_table_bucket_arn(seaweedfs, unique_name):
    arn = seaweedfs.create_table_bucket(unique_name)
    assert arn.startswith("arn:aws:s3tables:")
    catalog = CatalogFactory.build(
        "s3tables",
        uri=seaweedfs.iceberg_uri,  # explicit wins over the AWS endpoint derived from the region
        warehouse=arn,
        region=REGION,
        **{"client.access-key-id": ACCESS_KEY, "client.secret-access-key": SECRET_KEY},
        **seaweedfs.s3_properties(),
    )
    assert catalog.name == "s3tables"
    assert catalog.properties["rest.sigv4-enabled"] == "true"
    assert catalog.properties["rest.signing-name"] == "s3tables"
    assert catalog.properties["rest.signing-region"] == REGION
    location = _round_trip(catalog, "tables_ns")
    bucket, _, prefix = location.removeprefix("s3://").partition("/")
    assert any(key.endswith(".parquet") for key in _s3_keys(seaweedfs.s3_endpoint, bucket, prefix))


def test_s3tables_without_uri_targets_the_aws_endpoint_of_the_region():
    # Only the preset is checked here: the AWS endpoint itself is not reachable from this machine,
    # so the catalog is not contacted (building a REST catalog fetches /v1/config).
    spec = from_options("s3tables", warehouse="arn:aws:s3tables:eu-west-1:1:bucket/b", region="eu-west-1")
    assert not spec.problems and spec.catalog_type == "rest"
    assert spec.properties["uri"] == "https://s3tables.eu-west-1.amazonaws.com/iceberg"
    assert spec.properties["rest.signing-region"] == "eu-west-1"
    assert spec.properties["rest.sigv4-enabled"] == "true" and spec.properties["rest.signing-name"] == "s3tables"


def test_glue_kind_against_moto_with_data_on_its_s3(moto_server, unique_name):
    moto_server.create_bucket(unique_name)
    catalog = CatalogFactory.build(
        "glue",
        warehouse=f"s3://{unique_name}/warehouse",
        **moto_server.glue_properties(),
        **moto_server.s3_properties(),
    )
    assert isinstance(catalog, GlueCatalog)
    location = _round_trip(catalog, f"glue_{unique_name}")
    assert location.startswith(f"s3://{unique_name}/")
    keys = _s3_keys(moto_server.endpoint, unique_name)
    assert any(key.endswith(".parquet") for key in keys), keys
    glue = boto3.client("glue", **boto_kwargs(moto_server.endpoint))
    assert (
        glue.get_table(DatabaseName=f"glue_{unique_name}", Name="items")["Table"]["Parameters"]["table_type"]
        == "ICEBERG"
    )


def test_remote_kind_reads_pyiceberg_environment_config_and_keywords_win(seaweedfs, unique_name, tmp_path):
    # PyIceberg reads PYICEBERG_CATALOG__* once at import, so this runs in a fresh interpreter.
    seaweedfs.create_table_bucket(unique_name)
    env = {
        **os.environ,
        "PYICEBERG_HOME": str(tmp_path),  # no .pyiceberg.yaml there
        "PYICEBERG_CATALOG__LAKE__URI": seaweedfs.iceberg_uri,
        "PYICEBERG_CATALOG__LAKE__WAREHOUSE": "s3://this-bucket-does-not-exist",
        "PYICEBERG_CATALOG__LAKE__REST__SIGV4_ENABLED": "true",
        "PYICEBERG_CATALOG__LAKE__REST__SIGNING_NAME": "s3tables",
        "PYICEBERG_CATALOG__LAKE__REST__SIGNING_REGION": REGION,
        "AWS_ACCESS_KEY_ID": ACCESS_KEY,
        "AWS_SECRET_ACCESS_KEY": SECRET_KEY,
        "AWS_DEFAULT_REGION": REGION,
    }
    code = f"""
import json
from iceberg_ops_provider.catalogs import CatalogFactory, from_options
catalog = CatalogFactory.build("rest", name="lake", warehouse="s3://{unique_name}")
catalog.create_namespace("from_env")
print(json.dumps({{"uri": catalog.properties["uri"], "warehouse": catalog.properties["warehouse"],
                   "namespaces": [list(n) for n in catalog.list_namespaces()]}}))
"""
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120)
    assert result.returncode == 0, result.stderr
    seen = json.loads(result.stdout.strip().splitlines()[-1])
    assert seen["uri"] == seaweedfs.iceberg_uri
    assert seen["warehouse"] == f"s3://{unique_name}"
    assert ["from_env"] in seen["namespaces"]


def test_sqlite_catalog_with_its_warehouse_on_seaweedfs_s3(seaweedfs, unique_name, tmp_path):
    client = boto3.client("s3", **boto_kwargs(seaweedfs.s3_endpoint))
    client.create_bucket(Bucket=unique_name)
    catalog = CatalogFactory.build(
        "sqlite", db_path=tmp_path / "c.db", warehouse_dir=f"s3://{unique_name}/wh", **seaweedfs.s3_properties()
    )
    _round_trip(catalog, "local_meta")
    assert any(key.endswith(".parquet") for key in _s3_keys(seaweedfs.s3_endpoint, unique_name, "wh/"))


def test_s3tables_requests_are_really_signed(seaweedfs, unique_name):
    # SeaweedFS checks SigV4 signatures: a wrong secret must be refused, so the right one above
    # succeeded because the preset signs requests, not because the server accepts anything.
    from pyiceberg.exceptions import ForbiddenError

    arn = seaweedfs.create_table_bucket(unique_name)
    catalog = CatalogFactory.build(
        "s3tables",
        uri=seaweedfs.iceberg_uri,
        warehouse=arn,
        region=REGION,
        **{"client.access-key-id": ACCESS_KEY, "client.secret-access-key": "not-the-secret"},
    )
    with pytest.raises(ForbiddenError, match="signature"):
        catalog.create_namespace("never_created")
