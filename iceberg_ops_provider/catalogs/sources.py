"""One parser per place a catalog is described; none raises.

Keyword arguments, the project file, an Airflow connection or a PyIceberg name: what cannot be parsed
becomes a problem of the spec, raised when it is opened.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from iceberg_ops_provider.catalogs.kinds import PYICEBERG_KIND, parse_options
from iceberg_ops_provider.catalogs.redact import split_url
from iceberg_ops_provider.catalogs.spec import CatalogSpec, Source

__all__ = [
    "CONN_TYPE",
    "OFFICIAL_CONN_TYPE",
    "connection_extra",
    "from_connection",
    "from_file",
    "from_name",
    "from_options",
]

log = logging.getLogger(__name__)

CONN_TYPE = "iceberg_ops"
"""The connection type of this provider: a kind and its options in the extra."""

OFFICIAL_CONN_TYPE = "iceberg"
"""The connection type of Airflow's official Iceberg provider."""

_OURS = ("timeout", "meta_namespace")  # keys of an `iceberg` connection's extra that are this project's


def from_options(kind: object, /, **options: Any) -> CatalogSpec:
    """The spec of ``CatalogFactory.build(kind, **options)``; relative paths resolve against the working folder."""
    return parse_options(kind, options, source=Source("python"))


def from_name(
    name: str | None,
    properties: Mapping[str, Any] | None = None,
    *,
    timeout: float | None = None,
    source: Source | None = None,
) -> CatalogSpec:
    """A catalog PyIceberg loads by ``name`` (``None``: its default), ``properties`` added as ``load_catalog`` does."""
    options: dict[str, Any] = {**(properties or {}), "timeout": timeout}
    if name is not None:
        options["name"] = name
    return parse_options(PYICEBERG_KIND, options, source=source or Source())


def from_file(
    catalog: Mapping[str, Any],
    *,
    file: Path | None,
    root: Path,
    flags: frozenset[str] = frozenset(),
    role: str = "catalog",
) -> CatalogSpec:
    """The catalog of a project file's ``catalog:`` mapping (``kind:``, default ``sqlite``, and options, or ``name:``).

    ``file`` is ``None`` for options given on the command line alone; relative paths resolve against ``root``.
    """
    source = Source("file" if file is not None else "flags", str(file or ""), role, frozenset(flags))
    options = dict(catalog)
    if "name" in options and "kind" not in options:
        name = options.pop("name")
        timeout = options.pop("timeout", None)
        properties = {key: value if isinstance(value, Mapping) else str(value) for key, value in options.items()}
        return from_name(str(name), properties, timeout=timeout, source=source)
    kind = str(options.pop("kind", "sqlite")).lower()
    return parse_options(kind, options, source=source, root=root)


def connection_extra(extra: Mapping[str, Any] | None) -> dict[str, Any]:
    """A connection's extra without the form's ``extra__<type>__`` prefixes and empty values."""
    ours, official = f"extra__{CONN_TYPE}__", f"extra__{OFFICIAL_CONN_TYPE}__"
    return {
        key.removeprefix(ours).removeprefix(official): value
        for key, value in (extra or {}).items()
        if value not in (None, "")
    }


def from_connection(
    conn_id: str,
    conn_type: str | None,
    *,
    host: str | None = None,
    port: int | None = None,
    login: str | None = None,
    password: str | None = None,
    extra: Mapping[str, Any] | None = None,
) -> CatalogSpec:
    """The catalog of an Airflow connection, from its fields (both types: docs/airflow.md).

    Type ``iceberg`` is opened as the official provider's ``IcebergHook`` opens it; any other type reads
    ``extra.kind`` (default ``rest``) and that kind's options, the host as ``uri`` and login:password as credential.
    """
    source = Source("connection", conn_id)
    if conn_type == OFFICIAL_CONN_TYPE:
        return _official(conn_id, host, login, password, dict(extra or {}), source)
    options = connection_extra(extra)
    kind = str(options.pop("kind", "rest")).lower()
    if kind != PYICEBERG_KIND:
        options.pop("type", None)
    options.pop("meta_namespace", None)
    problem = None
    if kind == "sql":
        options["uri"] = _sql_url(options.get("uri") or host, login, password)
    elif host and kind != "sqlite":
        uri, problem = _uri(conn_id, host, port)
        options.setdefault("uri", uri)
    if (login or password) and kind in ("rest", "s3tables"):
        options.setdefault("credential", f"{login or ''}:{password or ''}")
    spec = parse_options(kind, options, source=source)
    return spec.with_problem("uri", problem) if problem else spec


def _official(
    conn_id: str, host: str | None, login: str | None, password: str | None, extra: dict[str, Any], source: Source
) -> CatalogSpec:
    prefix = f"extra__{OFFICIAL_CONN_TYPE}__"
    ours = {key.removeprefix(prefix): extra.pop(key) for key in list(extra) if key.removeprefix(prefix) in _OURS}
    properties = dict(extra)
    named = properties.pop("name", None)
    uri = host.rstrip("/") if host else None
    if uri:
        properties["uri"] = uri
    if properties.get("type") in (None, ""):
        properties["type"] = "rest"
    if properties["type"] == "rest":
        if login and password:
            properties["credential"] = f"{login}:{password}"
        elif login or password:
            log.warning(
                "Connection %r has only one of login (client id) and password (client secret); both are needed for "
                "an OAuth2 credential, so neither is used.",
                conn_id,
            )
    timeout = ours.get("timeout")
    spec = from_name(conn_id, properties, timeout=None if timeout in (None, "") else timeout, source=source)
    if named is not None:
        spec = spec.with_problem(
            "name",
            f"the extra of Airflow connection {conn_id!r} (type {OFFICIAL_CONN_TYPE!r}) sets 'name': an "
            f"{OFFICIAL_CONN_TYPE!r} connection's catalog is named after the connection, and the official Iceberg "
            "provider cannot open this connection either; remove 'name' from the extra",
        )
    return spec


def connection_meta_namespace(extra: Mapping[str, Any] | None) -> str | None:
    """The ``meta_namespace`` a connection's extra names, if any (where migration history and locks live)."""
    value = connection_extra(extra).get("meta_namespace")
    return str(value) if value not in (None, "") else None


_PORT = re.compile(r":[^:\]]*$")


def _uri(conn_id: str, host: str, port: int | None) -> tuple[str, str | None]:
    """The connection's host as a URI (``https://`` unless a scheme is given, the port in the netloc), and a problem."""
    text = host.strip()
    uri = text if "://" in text else f"https://{text}"
    parts = split_url(uri)
    if parts is None:
        return uri, None
    hostport = parts.host
    if port and _PORT.search(hostport) is None:  # the Port field, where the Host names none
        if not 0 < int(port) < 65536:
            return uri, f"the Port of Airflow connection {conn_id!r} ({port}) is not a number from 1 to 65535"
        start = uri.index("://") + 3
        if parts.user is not None:
            start += len(parts.user) + 1 + (len(parts.password) + 1 if parts.password is not None else 0)
        end = start + len(hostport)
        uri = f"{uri[:end]}:{port}{uri[end:]}"
    return uri, None


def _sql_url(uri: object, login: str | None, password: str | None) -> object:
    if not isinstance(uri, str) or not uri.strip():
        return uri
    from sqlalchemy.engine import make_url
    from sqlalchemy.exc import ArgumentError

    try:
        url = make_url(uri.strip())
    except (ArgumentError, ValueError):  # refused with the parse, naming what a SQLAlchemy URL looks like
        return uri
    if url.username is None and login:
        url = url.set(username=login)
    if url.password is None and password:
        url = url.set(password=password)
    return url.render_as_string(hide_password=False)
