"""Catalogs whose data lives on real object stores on loopback (SeaweedFS, moto's S3)."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import boto3
import pytest
from pyiceberg.catalog.sql import SqlCatalog

from tests.support.lake import Lake
from tests.support.servers import boto_kwargs


@dataclass
class S3Catalog:
    """An SQL catalog (SQLite) whose warehouse is an S3 bucket of a real server on loopback."""

    catalog: SqlCatalog
    endpoint: str
    bucket: str

    def keys(self, prefix: str = "") -> set[str]:
        """The object keys under ``prefix`` in the bucket."""
        client = boto3.client("s3", **boto_kwargs(self.endpoint))
        pages = client.get_paginator("list_objects_v2").paginate(Bucket=self.bucket, Prefix=prefix)
        return {item["Key"] for page in pages for item in page.get("Contents", [])}


@pytest.fixture(params=["seaweedfs", "moto"])
def s3_catalog(request, tmp_path: Path, unique_name: str) -> Iterator[S3Catalog]:
    """An S3-backed catalog on SeaweedFS, then on moto (tests using it are marked ``backends``)."""
    server = request.getfixturevalue("seaweedfs" if request.param == "seaweedfs" else "moto_server")
    endpoint = server.s3_endpoint if request.param == "seaweedfs" else server.endpoint
    boto3.client("s3", **boto_kwargs(endpoint)).create_bucket(Bucket=unique_name)
    catalog = SqlCatalog(
        "s3",
        uri=f"sqlite:///{tmp_path / 'catalog.db'}",
        warehouse=f"s3://{unique_name}/warehouse",
        **server.s3_properties(),
    )
    yield S3Catalog(catalog, endpoint, unique_name)
    catalog.close()


@pytest.fixture
def other(tmp_path: Path) -> Iterator[object]:
    """A second, independent catalog handle on the ``catalog`` fixture's database and warehouse."""
    handle = Lake(tmp_path).catalog()
    yield handle
    handle.close()
