"""The catalogs the pages show: connections of type ``iceberg_ops`` or ``iceberg``, opened as the hook opens them.

Which connections: those of the two types in the metadata database, those in ``AIRFLOW_CONN_*``
variables of the api-server, and the ids ``[iceberg_ops] ui_connections`` names (a secrets backend
cannot be listed). A connection id from a URL is first checked against Airflow's rule for ids and
then against this list, so no other connection (of another type, or unknown) is ever read.

Every secret of a connection read here is registered with :data:`SECRETS`, which the application
removes from every response (:mod:`.app`), and with Airflow's own secrets masker (by the hook's
mapping) for the logs.
"""

from __future__ import annotations

import contextlib
import html
import json
import os
import re
import threading
import time
from dataclasses import dataclass
from typing import Any
from urllib.parse import parse_qsl, quote, quote_plus, unquote, urlsplit, urlunsplit

from iceberg_ops_provider.core.catalog_messages import without_password
from iceberg_ops_provider.core.timeouts import DEFAULT_CATALOG_TIMEOUT
from iceberg_ops_provider.hooks.catalog import (
    _SECRET_WORDS,
    CONN_TYPE,
    OFFICIAL_CONN_TYPE,
    catalog_options,
    connection_meta_namespace,
)

__all__ = ["CONN_ID", "SECRETS", "CatalogConnection", "SecretRegistry", "find_connection", "list_connections"]

CONN_TYPES = (CONN_TYPE, OFFICIAL_CONN_TYPE)

CONN_ID = re.compile(r"^[\w.-]{1,250}$", re.ASCII)
"""Airflow's rule for connection ids: letters, digits, ``_``, ``.`` and ``-``, at most 250."""

_ENV_PREFIX = "AIRFLOW_CONN_"
_MIN_SECRET = 6  # Airflow never masks values of 5 characters or fewer: replacing them would garble pages


class SecretRegistry:
    """Secrets of the connections read so far, in every form a response could carry them."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._forms: set[str] = set()
        self._ordered: tuple[str, ...] = ()

    def add(self, secret: Any) -> None:
        """Remember ``secret`` (text of 6 characters or more; shorter values are never secret enough to find)."""
        if not isinstance(secret, str) or len(secret) < _MIN_SECRET:
            return
        forms = {
            secret,
            html.escape(secret),
            html.escape(secret, quote=False),
            json.dumps(secret)[1:-1],
            json.dumps(secret, ensure_ascii=False)[1:-1],
            quote(secret, safe=""),
            quote_plus(secret),
        }
        with self._lock:
            if forms <= self._forms:
                return
            self._forms |= {form for form in forms if len(form) >= _MIN_SECRET}
            self._ordered = tuple(sorted(self._forms, key=len, reverse=True))

    def redact(self, text: str) -> str:
        """``text`` with every known secret replaced by ``***``."""
        for form in self._ordered:
            if form in text:
                text = text.replace(form, "***")
        return text

    def __len__(self) -> int:
        return len(self._forms)


SECRETS = SecretRegistry()
"""The secrets of every connection this process's pages read."""


def _register_secrets(conn: Any, options: dict[str, Any]) -> None:
    SECRETS.add(conn.password)
    if conn.login and conn.password:
        SECRETS.add(f"{conn.login}:{conn.password}")

    def walk(values: Any, path: str = "") -> None:
        if isinstance(values, dict):
            for key, value in values.items():
                walk(value, f"{path}.{key}" if path else str(key))
        elif isinstance(values, str):
            if any(word in path.lower() for word in _SECRET_WORDS):
                SECRETS.add(values)
            if "://" in values:
                try:
                    password = urlsplit(values.strip()).password
                except ValueError:
                    password = None
                if password:
                    SECRETS.add(password)
                    SECRETS.add(unquote(password))
                with contextlib.suppress(ValueError):
                    for _, query_value in parse_qsl(urlsplit(values.strip()).query):
                        SECRETS.add(query_value)  # ?apikey=...: never shown, in any error either

    walk(options)
    walk(dict(conn.extra_dejson or {}))
    if conn.host and "://" in conn.host:
        walk({"host": conn.host})


@dataclass(frozen=True)
class CatalogConnection:
    """An Airflow connection the pages can open, described without its secrets.

    Attributes:
        conn_id: The connection id.
        conn_type: ``iceberg_ops`` or ``iceberg``.
        kind: The ``CatalogFactory`` kind (``pyiceberg`` for an ``iceberg`` connection, whose
            PyIceberg ``type`` is ``catalog_type``).
        catalog_type: PyIceberg's catalog type of an ``iceberg`` connection, else the kind.
        endpoint: Where the catalog lives, without any password (empty for embedded kinds).
        timeout: Seconds each catalog call may take (the connection's ``timeout``, default 60).
        meta_namespace: The ``meta_namespace`` of its extra, if any.
        options: The ``CatalogFactory`` options (secrets included: never shown).
        problem: Why the connection cannot be opened (a bad extra), else ``None``.
    """

    conn_id: str
    conn_type: str
    kind: str
    catalog_type: str
    endpoint: str
    timeout: float
    meta_namespace: str | None
    options: dict[str, Any]
    problem: str | None = None

    def describe(self) -> dict[str, Any]:
        """What a page shows of it: no option, no secret."""
        return {
            "conn_id": self.conn_id,
            "conn_type": self.conn_type,
            "kind": self.catalog_type,
            "endpoint": self.endpoint,
            "timeout": self.timeout,
            "meta_namespace": self.meta_namespace,
        }

    def build_catalog(self) -> Any:
        """The PyIceberg catalog (``CatalogFactory`` bounds building by the timeout)."""
        from iceberg_ops_provider.core.catalog import CatalogFactory

        return CatalogFactory.build(self.kind, **self.options)

    @property
    def fingerprint(self) -> str:
        """Changes when the connection's catalog options change (a cached catalog is then built again)."""
        return json.dumps([self.kind, self.options], sort_keys=True, default=str)


def _endpoint(kind: str, options: dict[str, Any]) -> str:
    for key in ("uri", "db_path"):
        value = options.get(key)
        if value:
            return _without_query(without_password(str(value)))
    if kind in ("glue", "s3tables"):
        return str(options.get("region") or options.get("glue.region") or "")
    return ""


def _without_query(url: str) -> str:
    """``url`` without its query and fragment, which may carry keys (``?apikey=...``): a page shows where, not how."""
    try:
        parts = urlsplit(url)
    except ValueError:
        return url.split("?", 1)[0].split("#", 1)[0]
    if not parts.scheme:
        return url
    return urlunsplit(parts._replace(query="", fragment=""))


def _timeout(options: dict[str, Any]) -> float:
    value = options.get("timeout")
    if isinstance(value, int | float) and not isinstance(value, bool) and value > 0:
        return float(value)
    return DEFAULT_CATALOG_TIMEOUT


def describe_connection(conn: Any) -> CatalogConnection:
    """A connection as the pages use it; its secrets are registered for redaction first."""
    try:
        kind, options = catalog_options(conn)
        problem = None
    except Exception as exc:  # a bad extra: listed, with why it cannot be opened
        kind, options, problem = "unknown", {}, f"{type(exc).__name__}: {exc}"
    _register_secrets(conn, options)
    catalog_type = str(options.get("type") or kind) if kind == "pyiceberg" else kind
    return CatalogConnection(
        conn_id=conn.conn_id,
        conn_type=conn.conn_type,
        kind=kind,
        catalog_type=catalog_type,
        endpoint=_endpoint(catalog_type, options),
        timeout=_timeout(options),
        meta_namespace=connection_meta_namespace(conn),
        options=options,
        problem=problem,
    )


def _database_connections() -> list[Any]:
    from airflow.models import Connection
    from airflow.utils.session import create_session
    from sqlalchemy import select

    with create_session() as session:
        found = list(session.scalars(select(Connection).where(Connection.conn_type.in_(CONN_TYPES))))
        for conn in found:
            session.expunge(conn)  # readable after the session closes (password decrypted on access)
        return found


def _environment_connections() -> list[Any]:
    from airflow.secrets.environment_variables import EnvironmentVariablesBackend

    backend = EnvironmentVariablesBackend()
    found = []
    for name in sorted(os.environ):
        if not name.startswith(_ENV_PREFIX) or len(name) == len(_ENV_PREFIX):
            continue
        conn_id = name[len(_ENV_PREFIX) :].lower()
        try:
            conn = backend.get_connection(conn_id)
        except Exception:  # a variable that is not a connection: not ours to judge
            continue
        if conn is not None and conn.conn_type in CONN_TYPES:
            found.append(conn)
    return found


def _named_connection(conn_id: str) -> Any | None:
    from airflow.sdk import BaseHook

    try:
        return BaseHook.get_connection(conn_id)
    except Exception:
        return None


class _Listing:
    """The connections, listed at most once every ``ttl`` seconds."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._at = -1e9
        self._key: tuple[str, ...] = ()
        self._found: dict[str, CatalogConnection] = {}

    def get(self, named: tuple[str, ...], ttl: float) -> dict[str, CatalogConnection]:
        with self._lock:
            if time.monotonic() - self._at <= ttl and named == self._key:
                return self._found
            conns: dict[str, Any] = {}
            for conn in _environment_connections():
                conns.setdefault(conn.conn_id, conn)
            for conn in _database_connections():  # the environment wins, as Airflow's own lookup order says
                conns.setdefault(conn.conn_id, conn)
            for conn_id in named:
                if conn_id not in conns and CONN_ID.match(conn_id):
                    conn = _named_connection(conn_id)
                    if conn is not None and conn.conn_type in CONN_TYPES:
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
    if not CONN_ID.match(conn_id):
        return None
    return LISTING.get(named, ttl).get(conn_id)
