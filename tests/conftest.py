"""Canonical fixtures: a real SQLite-backed PyIceberg catalog per test, a catalog on each database the
``sql`` kind is tested on (SQLite, PostgreSQL), and real servers for the tests marked ``backends``."""

from __future__ import annotations

import contextlib
import json
import os
import socket
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

from tests.support.lake import Lake
from tests.support.servers import Moto, SeaweedFS, run_moto, run_seaweedfs

# Migration folders and a runner on a real catalog, for every folder of tests that runs migrations.
pytest_plugins = ["tests.support.migrations"]

# The PostgreSQL server the tests marked ``postgres`` use: it must let this user create databases.
POSTGRES_ADMIN_URL = os.environ.get("ICEBERG_OPS_TEST_POSTGRES", "postgresql+psycopg://root@127.0.0.1:5432/postgres")


@pytest.fixture
def lake(tmp_path: Path) -> Lake:
    """The test's lake: a SQLite catalog and its warehouse in the test's temporary folder."""
    return Lake(tmp_path)


@pytest.fixture
def catalog(tmp_path: Path):
    """A fresh catalog object on the test's lake (a module may give ``lake`` another meaning)."""
    built = Lake(tmp_path).catalog()
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


def _postgres_unavailable(admin_url: str) -> str | None:
    """Why the PostgreSQL tests cannot run here (one line), or ``None`` when they can."""
    try:
        import psycopg  # noqa: F401
    except ImportError:
        return "psycopg is not installed (pip install -e '.[postgres]')"
    from sqlalchemy.engine import make_url

    url = make_url(admin_url)
    host, port = url.host or "127.0.0.1", url.port or 5432
    try:
        socket.create_connection((host, port), timeout=1).close()
    except OSError as exc:
        return f"PostgreSQL does not answer on {host}:{port} ({exc.strerror or exc})"
    return None


@contextlib.contextmanager
def _postgres_database(prefix: str) -> Iterator[str]:
    """A new PostgreSQL database with a random name, dropped on exit (whoever is still connected)."""
    reason = _postgres_unavailable(POSTGRES_ADMIN_URL)
    if reason:
        pytest.skip(reason)
    import psycopg
    from sqlalchemy.engine import make_url

    admin = make_url(POSTGRES_ADMIN_URL)
    conninfo = admin._replace(drivername="postgresql").render_as_string(hide_password=False)
    database = f"{prefix}_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(conninfo, autocommit=True) as connection:
        connection.execute(f'CREATE DATABASE "{database}"')
    try:
        yield admin._replace(database=database).render_as_string(hide_password=False)
    finally:
        with psycopg.connect(conninfo, autocommit=True) as connection:
            connection.execute(f'DROP DATABASE IF EXISTS "{database}" WITH (FORCE)')


@pytest.fixture(scope="session")
def postgres_url() -> Iterator[str]:
    """A SQLAlchemy URL of a PostgreSQL database of this test session (created here, dropped at the end).

    Tests share it; each catalog in it gets a name of its own, which keeps its tables apart. Skips
    (one line saying why) where PostgreSQL does not answer or psycopg is missing.
    """
    with _postgres_database("iceberg_ops_test") as url:
        yield url


@pytest.fixture
def new_postgres_database() -> Iterator[str]:
    """A SQLAlchemy URL of a database of this test alone, still without catalog tables; dropped after the test."""
    with _postgres_database("iceberg_ops_test_own") as url:
        yield url


@dataclass(frozen=True)
class CatalogBackend:
    """How to open one empty catalog from any process: a ``CatalogFactory`` kind and its options."""

    kind: str
    options: dict[str, Any] = field(default_factory=dict)

    def build(self) -> Any:
        """Another catalog object on the same catalog, as another worker would have."""
        from iceberg_ops_provider.catalogs import CatalogFactory

        return CatalogFactory.build(self.kind, **self.options)

    def to_json(self) -> str:
        """The kind and options as JSON, for a worker process: ``CatalogFactory.build(kind, **options)``."""
        return json.dumps({"kind": self.kind, "options": self.options})


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def catalog_backend(request: pytest.FixtureRequest, tmp_path: Path) -> CatalogBackend:
    """An empty catalog: the test's lake (kind ``sqlite``), then on PostgreSQL (kind ``sql``) with its warehouse."""
    lake = Lake(tmp_path)
    warehouse = str(lake.warehouse)
    if request.param == "sqlite":
        return CatalogBackend("sqlite", {"db_path": str(lake.db_path), "warehouse_dir": warehouse})
    url = request.getfixturevalue("postgres_url")
    return CatalogBackend("sql", {"uri": url, "warehouse_dir": warehouse, "name": f"t{uuid.uuid4().hex[:12]}"})


@pytest.fixture
def sigint_interrupts() -> Iterator[None]:
    """SIGINT raising KeyboardInterrupt, as in an interactive shell, for tests that send it to their own process.

    pytest-xdist's workers ignore SIGINT, and the command line leaves an inherited ignored SIGINT alone.
    """
    import signal

    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)
