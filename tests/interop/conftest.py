"""The interop suite's fixtures: one Spark session per test process, on one PostgreSQL catalog shared with PyIceberg.

Each fixture skips with one line saying why when its part is missing: Java, the Spark peer (``make
spark-peer`` installs it), PostgreSQL. Tests get a fresh namespace each, in the one shared catalog.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import _postgres_database
from tests.interop.spark_peer import Peer, locate
from tests.interop.spark_session import SharedCatalog, start_spark


@pytest.fixture(scope="session")
def spark_peer() -> Peer:
    """The installed Spark peer, or a skip naming what is missing and the command that installs it."""
    found = locate()
    if not isinstance(found, Peer):
        pytest.skip(f"Spark interop: {found}")
    return found


@pytest.fixture(scope="session")
def shared_catalog(spark_peer: Peer, tmp_path_factory: pytest.TempPathFactory) -> Iterator[SharedCatalog]:
    """A PostgreSQL database of this test run (dropped at its end) and a warehouse folder, for both engines."""
    with _postgres_database("iceberg_ops_interop") as url:
        yield SharedCatalog(url, tmp_path_factory.mktemp("interop") / "warehouse")


@pytest.fixture(scope="session")
def spark(spark_peer: Peer, shared_catalog: SharedCatalog, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    """The one Spark session of the test session (``local[2]``), its catalog ``lake`` on the shared database."""
    started = time.monotonic()
    session = start_spark(spark_peer, shared_catalog, tmp_path_factory.mktemp("spark"))
    print(f"Spark {session.version} with Iceberg {spark_peer.iceberg_version} up in {time.monotonic() - started:.1f}s")
    yield session
    session.stop()


@pytest.fixture
def lake(spark: Any, shared_catalog: SharedCatalog) -> Iterator[Any]:
    """PyIceberg's catalog ``lake`` on the database Spark's catalog ``lake`` uses."""
    catalog = shared_catalog.pyiceberg()
    yield catalog
    catalog.close()


@pytest.fixture
def ns(spark: Any) -> str:
    """A namespace of this test alone, created by Spark."""
    name = f"t_{uuid.uuid4().hex[:10]}"
    spark.sql(f"CREATE NAMESPACE lake.{name}")
    return name


@pytest.fixture
def run_dir(tmp_path: Path) -> Path:
    return tmp_path
