"""The catalogs the pages show: connections of type ``iceberg_ops`` or ``iceberg``, described as the hook does.

An id from a URL is checked against this list, so no other connection is ever read; catalogs are opened to
read only (docs/ui.md).
"""

from __future__ import annotations

import os
import re
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from iceberg_ops_provider.catalogs import CatalogSpec, Source, open_catalog, without_classes
from iceberg_ops_provider.hooks.catalog import CONN_TYPE, OFFICIAL_CONN_TYPE, connection_meta_namespace, connection_spec

__all__ = ["CONN_ID", "CatalogConnection", "describe_connection", "find_connection", "list_connections"]

CONN_TYPES = (CONN_TYPE, OFFICIAL_CONN_TYPE)

CONN_ID = re.compile(r"^[\w.-]{1,250}$", re.ASCII)
"""Airflow's rule for connection ids: letters, digits, ``_``, ``.`` and ``-``, at most 250."""

_ENV_PREFIX = "AIRFLOW_CONN_"


@dataclass(frozen=True)
class CatalogConnection:
    """An Airflow connection (``iceberg_ops`` or ``iceberg``) the pages can open, described by its catalog's spec.

    Attributes:
        spec: The catalog (secrets held apart, problems as values).
    """

    conn_id: str
    conn_type: str
    spec: CatalogSpec
    meta_namespace: str | None = None

    @property
    def timeout(self) -> float:
        """Seconds one request to the catalog may take."""
        return self.spec.timeout

    @property
    def fingerprint(self) -> str:
        """Changes when anything that opens the catalog changes (a cached catalog is then opened again)."""
        return self.spec.fingerprint()

    def describe(self) -> dict[str, Any]:
        """What a page shows of it: no option, no secret."""
        return {
            "conn_id": self.conn_id,
            "conn_type": self.conn_type,
            "kind": (self.spec.catalog_type or self.spec.kind) if self.spec.kind == "pyiceberg" else self.spec.kind,
            "endpoint": self.spec.endpoint(),
            "timeout": self.timeout,
            "meta_namespace": self.meta_namespace,
        }

    def open(self) -> Any:
        """The catalog, opened to read: nothing is created or written, every request bounded by the timeout."""
        return open_catalog(self.spec, access="read")


def describe_connection(conn: Any) -> CatalogConnection:
    """A connection as the pages use it; never raises (what cannot be read is the spec's problem)."""
    try:
        spec = without_classes(connection_spec(conn))
        meta_namespace = connection_meta_namespace(conn)
    except Exception as exc:  # a connection Airflow itself cannot read (its extra, its port): listed, not opened
        spec = CatalogSpec(kind="unknown", source=Source("connection", conn.conn_id)).with_problem(
            "extra", f"Airflow could not read connection {conn.conn_id!r} ({type(exc).__name__})"
        )
        meta_namespace = None
    return CatalogConnection(conn_id=conn.conn_id, conn_type=conn.conn_type, spec=spec, meta_namespace=meta_namespace)


def _database_connections() -> list[Any]:
    from airflow.models import Connection
    from airflow.utils.session import create_session
    from sqlalchemy import select

    with create_session() as session:
        found = list(session.scalars(select(Connection).where(Connection.conn_type.in_(CONN_TYPES))))
        for conn in found:
            session.expunge(conn)  # readable after the session closes (password decrypted on access)
        return found


def _ours(get: Callable[[str], Any], conn_id: str) -> Any | None:
    """The connection ``get`` finds when it is a catalog connection; ``None`` for any other, or none."""
    try:
        conn = get(conn_id)
    except Exception:  # not a connection (a variable of another kind, an unknown id): not ours to judge
        return None
    return conn if conn is not None and conn.conn_type in CONN_TYPES else None


def _environment_connections() -> list[Any]:
    from airflow.secrets.environment_variables import EnvironmentVariablesBackend

    get = EnvironmentVariablesBackend().get_connection
    ids = [name.removeprefix(_ENV_PREFIX).lower() for name in sorted(os.environ) if name.startswith(_ENV_PREFIX)]
    return [conn for conn in (_ours(get, conn_id) for conn_id in ids if conn_id) if conn is not None]


class _Listing:
    """The connections, listed at most once every ``ttl`` seconds."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._at = -1e9
        self._key: tuple[str, ...] = ()
        self._found: dict[str, CatalogConnection] = {}

    def get(self, named: tuple[str, ...], ttl: float) -> dict[str, CatalogConnection]:
        from airflow.sdk import BaseHook

        with self._lock:
            if time.monotonic() - self._at <= ttl and named == self._key:
                return self._found
            conns: dict[str, Any] = {}
            for conn in [*_environment_connections(), *_database_connections()]:  # the environment wins, as in Airflow
                conns.setdefault(conn.conn_id, conn)
            for conn_id in (conn_id for conn_id in named if conn_id not in conns and CONN_ID.match(conn_id)):
                if (conn := _ours(BaseHook.get_connection, conn_id)) is not None:
                    conns[conn_id] = conn
            self._found = {conn_id: describe_connection(conns[conn_id]) for conn_id in sorted(conns)}
            self._at, self._key = time.monotonic(), named
            return self._found

    def clear(self) -> None:
        with self._lock:
            self._at = -1e9


LISTING = _Listing()


def list_connections(named: tuple[str, ...] = (), ttl: float = 5.0) -> list[CatalogConnection]:
    """Every catalog connection, by id (listed again after ``ttl`` seconds)."""
    return list(LISTING.get(named, ttl).values())


def find_connection(conn_id: str, named: tuple[str, ...] = (), ttl: float = 5.0) -> CatalogConnection | None:
    """The catalog connection ``conn_id``, or ``None`` when it is not one (its id is checked first)."""
    return LISTING.get(named, ttl).get(conn_id) if CONN_ID.match(conn_id) else None
