"""Canonical fixtures: a real SQLite-backed PyIceberg catalog per test, and real servers for the
tests marked ``backends``."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path

import pyarrow as pa
import pytest

from tests.servers import Moto, SeaweedFS, run_moto, run_seaweedfs


@pytest.fixture
def catalog(tmp_path: Path):
    """A fresh file-backed SQL catalog in a temporary folder."""
    from iceberg_ops_provider.core.catalog import CatalogFactory

    built = CatalogFactory.build("sqlite", db_path=tmp_path / "catalog.db", warehouse_dir=tmp_path / "warehouse")
    yield built
    built.close()


@pytest.fixture
def namespace(catalog) -> str:
    """A namespace that exists in ``catalog``."""
    catalog.create_namespace("sales")
    return "sales"


@pytest.fixture
def orders_schema() -> pa.Schema:
    """A small orders schema with a required key."""
    return pa.schema(
        [
            pa.field("id", pa.int64(), nullable=False),
            pa.field("customer", pa.string()),
            pa.field("amount", pa.decimal128(12, 2)),
            pa.field("ts", pa.timestamp("us", tz="UTC")),
        ]
    )


@pytest.fixture(scope="session")
def seaweedfs(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SeaweedFS]:
    """A real SeaweedFS (S3 + Iceberg REST with SigV4) for the whole session."""
    with run_seaweedfs(tmp_path_factory.mktemp("seaweedfs")) as server:
        yield server


@pytest.fixture(scope="session")
def moto_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Moto]:
    """A real moto server (S3 + Glue over HTTP) for the whole session."""
    with run_moto(tmp_path_factory.mktemp("moto")) as server:
        yield server


@pytest.fixture
def unique_name() -> str:
    """A short unique lowercase name for buckets and namespaces on shared servers."""
    return f"t{uuid.uuid4().hex[:10]}"
