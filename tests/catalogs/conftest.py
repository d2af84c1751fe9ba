"""Catalogs that stall, shared by the catalogs package's tests."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.support.hostile import half_stalled, never, raw_server


@pytest.fixture
def stalled_uri() -> Iterator[str]:
    """A server on loopback that reads every request and never answers."""
    with raw_server(never) as server:
        yield server.uri


@pytest.fixture
def half_stalled_uri() -> Iterator[str]:
    """A REST catalog that answers ``GET /v1/config``, then stalls on every other request."""
    with half_stalled() as uri:
        yield uri
