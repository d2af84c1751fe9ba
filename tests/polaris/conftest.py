"""A Polaris policy server on loopback per test, a client for it, and TLS material for https."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from iceberg_ops_provider.polaris import PolarisPolicyClient
from tests.polaris.server import PolarisServer
from tests.polaris.tls import TlsFiles, make_tls_files

CATALOG = "prod"
CLIENT_ID = "root"
CLIENT_SECRET = "s3cr3t-Value-9f8e"


@pytest.fixture
def polaris() -> Iterator[PolarisServer]:
    """A fresh Polaris policy server with the catalog ``prod`` and the principal ``root``."""
    with PolarisServer() as server:
        server.add_catalog(CATALOG)
        server.add_client(CLIENT_ID, CLIENT_SECRET)
        yield server


@pytest.fixture
def client(polaris: PolarisServer) -> Iterator[PolarisPolicyClient]:
    """A client of ``polaris`` with client credentials and short retry waits."""
    with PolarisPolicyClient(
        polaris.base_url, CATALOG, credential=f"{CLIENT_ID}:{CLIENT_SECRET}", backoff=0.01, timeout=5
    ) as built:
        yield built


@pytest.fixture(scope="session")
def tls_files(tmp_path_factory: pytest.TempPathFactory) -> TlsFiles:
    """A CA and a certificate for 127.0.0.1 it signed (skips when neither cryptography nor openssl exists)."""
    files = make_tls_files(tmp_path_factory.mktemp("tls"))
    if files is None:
        pytest.skip("neither the cryptography package nor the openssl command is available to make a certificate")
    return files
