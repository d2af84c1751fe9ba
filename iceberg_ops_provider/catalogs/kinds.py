"""A catalog's kind and options as PyIceberg properties: the parser every mapping of options goes through.

:func:`parse_options` never raises: what cannot work becomes a problem of the spec. The kinds are
documented in docs/core.md; any other catalog type PyIceberg knows takes the options as its properties.
"""

from __future__ import annotations

import difflib
import os
import re
from collections.abc import Mapping
from dataclasses import replace
from pathlib import Path
from typing import Any

from iceberg_ops_provider.catalogs.redact import split_secrets, split_url
from iceberg_ops_provider.catalogs.spec import DEFAULT_CATALOG_TIMEOUT, CatalogSpec, Source, check_timeout
from iceberg_ops_provider.errors import UnknownCatalogKindError
from iceberg_ops_provider.messages import message

__all__ = ["KINDS", "PYICEBERG_KIND", "REMOTE_KINDS", "parse_options", "pyiceberg_catalog_types", "sqlite_file"]

KINDS: tuple[str, ...] = ("sqlite", "memory", "sql", "glue", "rest", "hive", "s3tables")
"""This project's kinds, in the order the documentation lists them."""

REMOTE_KINDS: tuple[str, ...] = ("glue", "rest", "hive", "s3tables")
"""The kinds PyIceberg opens under a name its configuration file may describe."""

PYICEBERG_KIND = "pyiceberg"
"""The kind whose options are ``load_catalog``'s properties, unchanged."""

DEFAULT_DB_PATH = Path("local_data") / "iceberg_catalog.db"
DEFAULT_WAREHOUSE_DIR = Path("local_data") / "iceberg_warehouse"

# SqlCatalog's own switches, which every SQL kind passes on.
_SQL_SWITCHES = frozenset({"echo", "pool_pre_ping", "init_catalog_tables", "schema_version"})
_SQL_NAMED = {
    "sqlite": frozenset({"db_path", "warehouse_dir", "name"}),
    "memory": frozenset({"warehouse_dir", "name"}),
    "sql": frozenset({"uri", "warehouse_dir", "warehouse", "name"}),
}
# Plain (undotted, undashed) option names PyIceberg's remote catalogs understand; anything else plain is a typo.
_REMOTE_PLAIN = frozenset(
    {"name", "uri", "warehouse", "credential", "token", "scope", "audience", "resource", "prefix", "region", "ugi"}
)
_OWNERS = {"db_path": "'sqlite' kind", "warehouse_dir": "'sqlite', 'memory' and 'sql' kinds"}
_SQL_EXAMPLE = "'postgresql+psycopg://user:password@host:5432/dbname' or 'sqlite:////data/iceberg_catalog.db'"


def pyiceberg_catalog_types() -> tuple[str, ...]:
    """The catalog types the installed PyIceberg knows (``rest``, ``hive``, ``glue``, ``dynamodb``, ``sql``, ...)."""
    from pyiceberg.catalog import CatalogType

    return tuple(member.value for member in CatalogType)


class _Parse:
    def __init__(self, kind: str, source: Source, root: Path | None) -> None:
        self.kind = kind
        self.source = source
        self.root = root
        self.problems: list[tuple[str, Any, Any]] = []

    def problem(self, key: str, template: str, error: Any = None, **facts: Any) -> None:
        # Templates name the setting `{_setting}`, never by its key: an option called `kind`, `value` or `about`
        # would collide with a fact or message()'s own argument.
        self.problems.append((key, message(template, about=key, _setting=self.source.setting(key), **facts), error))

    def name(self, options: dict[str, Any], default: str | None) -> str | None:
        name = options.pop("name", default)
        if (name is not None or default is not None) and (not isinstance(name, str) or not name.strip()):
            self.problem("name", "{_setting} must be a non-empty string, got {value}", value=repr(name))
            return default
        return name

    def no_type(self, options: dict[str, Any]) -> None:
        if "type" in options:
            del options["type"]
            self.problem(
                "type",
                "{_setting} is not an option of the {catalog_kind} catalog: the kind decides the catalog type "
                "(kind 'pyiceberg' takes 'type' among PyIceberg's properties)",
                catalog_kind=repr(self.kind),
            )

    def path(self, key: str, value: Any) -> Path | None:
        if not isinstance(value, str | os.PathLike) or not os.fspath(value).strip():
            self.problem(key, "{_setting} must be a path, got {value}", value=repr(value))
            return None
        try:
            path = Path(os.fspath(value).strip()).expanduser()
            if not path.is_absolute() and self.root is not None:
                path = self.root / path
            path = path.resolve()
            path.exists()  # a path the system cannot take (a NUL byte, too long) fails here, not later
        except (RuntimeError, ValueError, OSError) as exc:  # ~user that does not exist, a NUL byte, ...
            self.problem(key, "{_setting} is not a usable path ({reason}): {value}", reason=str(exc), value=repr(value))
            return None
        return path

    def value(self, key: str, value: Any) -> str | None:
        """An Iceberg property value (always text): booleans as ``true``/``false``, numbers and paths as text."""
        if isinstance(value, bool):
            return "true" if value else "false"
        if isinstance(value, str | int | float | os.PathLike):
            return os.fspath(value) if isinstance(value, os.PathLike) else str(value)
        self.problem(
            key, "{_setting} is {value}; values must be strings, numbers, booleans or paths", value=repr(value)
        )
        return None

    def names(self, options: Mapping[str, Any]) -> None:
        """Refuse option names the kind does not take (almost always typos), naming the closest valid one."""
        sql = self.kind in _SQL_NAMED
        valid = _SQL_NAMED[self.kind] | _SQL_SWITCHES if sql else _REMOTE_PLAIN
        for key in options:
            if not sql and key in _OWNERS:
                self.problem(
                    key,
                    "{_setting} belongs to the {owner}; the {catalog_kind} catalog takes 'warehouse' (a "
                    "location or, for s3tables, the table bucket ARN) instead",
                    owner=_OWNERS[key],
                    catalog_kind=repr(self.kind),
                )
            elif "." not in key and (sql or "-" not in key) and key not in valid:
                self.problem(
                    key,
                    "{_setting} is not an option of the {catalog_kind} catalog; "
                    + (
                        "valid options: {valid}, or a dotted PyIceberg property such as 's3.endpoint'.{guess}"
                        if sql
                        else "plain options are: {valid}; anything else must be a PyIceberg property such as "
                        "'rest.sigv4-enabled' or 's3.endpoint'.{guess}"
                    ),
                    catalog_kind=repr(self.kind),
                    valid=", ".join(sorted(valid)),
                    guess=_guess(key, valid),
                )


_HOSTPORT = re.compile(r"(\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9._~%-]*)(?::(.*))?")


def _check_address(parse: _Parse, uri: object) -> None:
    """Refuse a ``uri`` whose host or port cannot be one, or whose user info holds what ends an HTTP host."""
    if not isinstance(uri, str):
        return
    for address in uri.split(","):  # a Hive catalog may list several metastores
        parts = split_url(address.strip())
        if parts is None or not parts.host:
            continue
        userinfo = f"{parts.user or ''}:{parts.password or ''}"
        if parts.scheme.lower() in ("http", "https") and any(char in userinfo for char in "/?#\\"):
            parse.problem(
                "uri",
                "the user name or password of {_setting} holds a '/', '?', '#' or '\\', where HTTP clients end the "
                "host: "
                "percent-encode it ('/' as %2F, '?' as %3F, '#' as %23, '\\' as %5C)",
            )
            return
        found = _HOSTPORT.fullmatch(parts.host)
        if found is None:
            parse.problem("uri", "{_setting} does not name a host and port: {value}", value=repr(parts.host))
            return
        port = found.group(2)
        if port is not None and (not port.isdigit() or not 0 < int(port) < 65536):
            parse.problem("uri", "the port of {_setting} ({value}) is not a number from 1 to 65535", value=repr(port))
            return


def _guess(key: str, valid: frozenset[str] | tuple[str, ...]) -> str:
    close = difflib.get_close_matches(key, sorted(valid), n=1, cutoff=0.6)
    return f" Did you mean {close[0]!r}?" if close else ""


def parse_options(
    kind: object, options: Mapping[str, Any], *, source: Source | None = None, root: Path | None = None
) -> CatalogSpec:
    """The spec of a catalog of ``kind`` with ``options``; never raises (relative paths resolve against ``root``)."""
    options = dict(options)
    source = source or Source()
    text = kind.lower().strip() if isinstance(kind, str) else ""
    parse = _Parse(text, source, root)
    timeout = DEFAULT_CATALOG_TIMEOUT
    if options.get("timeout") is not None:
        given = options["timeout"]
        # Text is a number of seconds only where a form stores numbers as text: an Airflow connection.
        checked = check_timeout(given) if source.kind == "connection" or not isinstance(given, str) else None
        if checked is None:
            parse.problem(
                "timeout",
                "{_setting} must be a number of seconds greater than 0 and at most a week (for example 30), "
                "got {value}",
                value=repr(options["timeout"]),
            )
        timeout = checked or timeout
    options.pop("timeout", None)
    spec = _own_kind(parse, options) if text in KINDS else _pyiceberg_kind(parse, kind, options)
    _check_address(parse, {**spec.get("properties", {}), **spec.get("secrets", {})}.get("uri"))
    spec = CatalogSpec(**{**spec, "timeout": timeout, "source": source})  # type: ignore[arg-type]
    for key, text_, error in parse.problems:
        spec = spec.with_problem(key, text_, error)
    return spec


def _shown(properties: Mapping[str, Any]) -> dict[str, Any]:
    shown, secrets = split_secrets(properties)
    return {"properties": shown, "secrets": secrets}


def _own_kind(parse: _Parse, options: dict[str, Any]) -> dict[str, Any]:
    kind = parse.kind
    name = parse.name(options, kind)
    parse.no_type(options)
    if kind in _SQL_NAMED:
        return _sql_kind(parse, name, options)
    parse.names(options)
    properties = {key: parse.value(key, value) for key, value in options.items()}
    if kind == "s3tables":
        properties = _s3tables(parse, properties)
        catalog_type = "rest"
    else:
        catalog_type = kind
        if "region" in properties:
            properties["client.region"] = properties.pop("region")
    if catalog_type == "rest":
        # PyIceberg's SigV4 signing retries a request 10 times by default; the deadline is per request, so two.
        properties.setdefault("rest.sigv4.max-retries", "2")
    return {"kind": kind, "name": name, **_shown({"type": catalog_type, **properties}), "env_config": True}


def _sql_kind(parse: _Parse, name: str, options: dict[str, Any]) -> dict[str, Any]:
    kind = parse.kind
    named = {key: options.pop(key) for key in list(options) if key in _SQL_NAMED[kind]}
    if kind == "memory" and "db_path" in options:
        options.pop("db_path")
        parse.problem(
            "db_path",
            "{_setting} does not apply to the 'memory' catalog, which keeps no database file; use kind "
            "'sqlite' to keep the catalog in a file",
        )
    parse.names(options)
    properties: dict[str, Any] = {"type": "sql", **{key: parse.value(key, value) for key, value in options.items()}}
    database = warehouse_dir = None
    if kind == "sqlite":
        database = parse.path("db_path", named.get("db_path", _default(parse.root, DEFAULT_DB_PATH)))
        if database is not None and database.is_dir():
            parse.problem(
                "db_path",
                "{_setting} names the folder {path}; give the path of the SQLite database file",
                path=str(database),
            )
        if database is not None:
            properties["uri"] = f"sqlite:///{database}"
    if kind == "sql":
        properties["uri"], database = _sql_uri(parse, named.get("uri"))
        if "warehouse_dir" in named and "warehouse" in named:
            parse.problem(
                "warehouse",
                "the 'sql' catalog takes one of {warehouse_dir} (a local folder) and "
                "{_setting} (a URI such as 's3://bucket/warehouse'), not both",
                warehouse_dir=parse.source.setting("warehouse_dir"),
            )
        warehouse = named.get("warehouse")
        if warehouse is not None and (not isinstance(warehouse, str) or "://" not in warehouse):
            parse.problem(
                "warehouse",
                "{_setting} must be a URI such as 's3://bucket/warehouse', got {value}; give a "
                "local folder as {warehouse_dir} instead",
                value=repr(warehouse),
                warehouse_dir=parse.source.setting("warehouse_dir"),
            )
        elif warehouse is not None:
            properties["warehouse"] = warehouse
    location = named.get("warehouse_dir", _default(parse.root, DEFAULT_WAREHOUSE_DIR) if kind == "sqlite" else None)
    if isinstance(location, str) and "://" in location:
        properties["warehouse"] = location
    elif location is not None:
        warehouse_dir = parse.path("warehouse_dir", location)
        if warehouse_dir is not None and warehouse_dir.exists() and not warehouse_dir.is_dir():
            parse.problem(
                "warehouse_dir",
                "{_setting} names the file {path}; give a folder (it is created if missing)",
                path=str(warehouse_dir),
            )
        if warehouse_dir is not None:
            properties["warehouse"] = warehouse_dir.as_uri()
    return {"kind": kind, "name": name, **_shown(properties), "database": database, "warehouse_dir": warehouse_dir}


def _sql_uri(parse: _Parse, uri: object) -> tuple[str | None, Path | None]:
    """A ``sql`` catalog's SQLAlchemy URL, checked, and the SQLite file it names (resolved) if it names one."""
    from sqlalchemy.engine import make_url
    from sqlalchemy.exc import ArgumentError

    if uri is None or (isinstance(uri, str) and not uri.strip()):
        parse.problem(
            "uri",
            "the 'sql' catalog needs {_setting}: the SQLAlchemy URL of its database, for example {example}",
            example=_SQL_EXAMPLE,
        )
        return None, None
    if not isinstance(uri, str):
        parse.problem("uri", "{_setting} must be text, got {value}", value=type(uri).__name__)
        return None, None
    try:
        url = make_url(uri.strip())
        url.get_dialect()
    except (ArgumentError, ValueError):  # not a URL, a port that is no number, a dialect SQLAlchemy does not know
        parse.problem(
            "uri",
            "{_setting} is not a SQLAlchemy URL of a database SQLAlchemy knows; give one such as {example}",
            example=_SQL_EXAMPLE,
        )
        return None, None
    if url.get_backend_name() == "sqlite" and url.database in (None, "", ":memory:"):
        parse.problem(
            "uri",
            "{_setting} names an in-memory SQLite database, which PyIceberg gives each thread empty: use "
            "kind 'memory' for a catalog in memory, or a file such as 'sqlite:////data/iceberg_catalog.db'",
        )
        return None, None
    database = sqlite_file(url, parse.root)
    if database is None:
        return uri.strip(), None
    return url.set(database=str(database)).render_as_string(hide_password=False), database


def sqlite_file(url: Any, root: Path | None = None) -> Path | None:
    """The SQLite database file a SQLAlchemy URL names (relative to ``root``, else the working folder), if any."""
    database = url.database
    if url.get_backend_name() != "sqlite" or database in (None, "", ":memory:") or database.startswith("file:"):
        return None  # not SQLite, in memory, or a SQLite URI filename (passed on as written)
    return _default(root, Path(database).expanduser()).resolve()


def _default(root: Path | None, path: Path) -> Path:
    return (root or Path.cwd()) / path


def _s3tables(parse: _Parse, properties: dict[str, Any]) -> dict[str, Any]:
    """REST + SigV4 as AWS S3 Tables expects it; explicit properties win over the preset."""
    region = properties.pop("region", None) or properties.get("rest.signing-region")
    if not region:
        parse.problem(
            "region",
            "the 's3tables' catalog needs {_setting} (for example 'us-east-1'): it signs requests "
            "for that region and derives the endpoint from it",
        )
        return properties
    if "warehouse" not in properties:
        parse.problem(
            "warehouse",
            "the 's3tables' catalog needs {_setting}: the table bucket's ARN, for example "
            "'arn:aws:s3tables:us-east-1:123456789012:bucket/my-bucket'",
        )
    preset = {
        "uri": f"https://s3tables.{region}.amazonaws.com/iceberg",
        "rest.sigv4-enabled": "true",
        "rest.signing-name": "s3tables",
        "rest.signing-region": region,
        "client.region": region,
    }
    return {**preset, **properties}


def _pyiceberg_kind(parse: _Parse, kind: object, options: dict[str, Any]) -> dict[str, Any]:
    """``pyiceberg`` (the options are ``load_catalog``'s properties) or another catalog type PyIceberg knows."""
    types = pyiceberg_catalog_types()
    others = tuple(name for name in types if name not in KINDS)
    if parse.kind == PYICEBERG_KIND:
        name = parse.name(options, None)
        catalog_type = options.get("type")
        if catalog_type in (None, ""):
            options.pop("type", None)
        elif not isinstance(catalog_type, str) or catalog_type.strip().lower() not in types:
            parse.problem(
                "type",
                "{_setting} must name a PyIceberg catalog type ({types}), got {value}",
                UnknownCatalogKindError(str(catalog_type), types),
                types=", ".join(types),
                value=repr(catalog_type),
            )
        else:
            options["type"] = catalog_type.strip().lower()
        return {"kind": PYICEBERG_KIND, "name": name, **_shown(options), "env_config": True}
    if parse.kind in others:
        parse.no_type(options)
        name = options.pop("name", parse.kind)
        return {"kind": parse.kind, "name": str(name), **_shown({**options, "type": parse.kind}), "env_config": True}
    valid = (*KINDS, PYICEBERG_KIND, *others)
    if parse.source.kind != "python":  # a front whose catalog outlives no process: no in-memory kinds
        valid = tuple(name for name in valid if name not in ("memory", "in-memory"))
    advice: Any = UnknownCatalogKindError.PYTHON_ADVICE
    if parse.source.kind in ("file", "flags"):  # PyIceberg's own types are opened by name there
        valid = tuple(name for name in valid if name in KINDS)
        by_name = replace(parse.source, flags=parse.source.flags | {"name"}) if "kind" in parse.source.flags else None
        advice = message(
            "Or open any catalog PyIceberg can load by name: {name}.", name=(by_name or parse.source).setting("name")
        )
    elif parse.source.kind == "connection":
        advice = "Or give kind 'pyiceberg' and the catalog's PyIceberg `type` in the extra."
    setting = parse.source.setting("kind") if parse.source.kind != "python" else None
    error = UnknownCatalogKindError(str(kind), valid, advice=advice, setting=setting)
    parse.problems.append(("kind", error.args[0], error))
    return {"kind": str(kind), "name": None, **_shown(options)}
