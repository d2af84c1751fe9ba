"""Build a PyIceberg catalog from a kind and a few options.

Every API of iceberg-ops takes any PyIceberg :class:`~pyiceberg.catalog.Catalog`;
:class:`CatalogFactory` is the convenience that turns ``("sqlite", db_path=...)`` or
``("rest", uri=...)`` into one, with the defaults of the specification:

* ``sqlite``: a file-backed SQL catalog. Without ``db_path``/``warehouse_dir`` it uses
  ``./local_data/iceberg_catalog.db`` and ``./local_data/iceberg_warehouse``, resolved against the
  working directory at call time.
* ``memory``: an in-memory SQL catalog that every thread of the process shares; data files go to
  ``warehouse_dir`` or a fresh temporary directory.
* ``sql``: PyIceberg's SQL catalog on any database SQLAlchemy reaches through ``uri`` (tested on
  PostgreSQL: ``postgresql+psycopg://user:password@host:5432/db``; ``sqlite:////path/catalog.db``
  works too), with data files in ``warehouse_dir`` (a folder) or ``warehouse`` (a URI such as
  ``s3://bucket/path``). The PostgreSQL drivers come with the ``postgres`` extra.
* ``glue``, ``rest``, ``hive``, ``s3tables``: loaded through :func:`pyiceberg.catalog.load_catalog`
  under a name that defaults to the kind, so ``.pyiceberg.yaml`` and ``PYICEBERG_CATALOG__*``
  environment variables apply; keyword arguments win. ``s3tables`` is REST with SigV4 preset.
* any other catalog type PyIceberg knows (``dynamodb``, ``in-memory``, ``bigquery``): passed to
  ``load_catalog`` as its ``type``, the options as its properties, with a note in the log.
* ``pyiceberg``: no defaults and no checks: the options are ``load_catalog``'s properties exactly,
  ``type`` included (:meth:`CatalogFactory.load`, :mod:`iceberg_ops_provider.core.pyiceberg_catalogs`).
  Airflow connections of type ``iceberg`` are opened this way, as the official provider opens them.

Every kind takes ``timeout`` (seconds, default
:data:`~iceberg_ops_provider.core.timeouts.DEFAULT_CATALOG_TIMEOUT`): building a remote catalog
gives up after it, and every request of a REST catalog is bounded by it (see
:mod:`iceberg_ops_provider.core.timeouts`). Building a ``sql`` catalog (which connects to its
database) gives up after it too, and every later connection to a PostgreSQL database gets it as
its connect timeout. ``sqlite`` and ``memory`` accept it and need nothing from it. A ``sql``
catalog on PostgreSQL runs its transactions at READ COMMITTED whatever the server's default: the
isolation PyIceberg's optimistic commits need to report a lost race as a lost race.

What goes wrong while building is reported in this project's terms, naming what to check (see
``docs/errors.md``): an unreachable catalog as
:class:`~iceberg_ops_provider.errors.CatalogUnavailableError`, refused or missing credentials as
:class:`~iceberg_ops_provider.errors.CatalogAuthError`, and a missing ``uri``, a ``uri`` that is
not a SQLAlchemy URL, a database that does not exist or a ``db_path`` that is not an SQLite
database as :class:`~iceberg_ops_provider.errors.CatalogConfigError`. Passwords in a ``sql``
catalog's ``uri`` never appear in these messages.

Backends are imported only when built, through :func:`_lazy_import`, so this module imports with no
optional extra installed.
"""

from __future__ import annotations

import importlib
import math
import os
import re
import tempfile
import time
from contextlib import contextmanager
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING, Any, ClassVar

from iceberg_ops_provider.core.timeouts import (
    DEFAULT_CATALOG_TIMEOUT,
    bound_catalog_requests,
    call_with_timeout,
    catalog_errors,
    check_timeout,
)
from iceberg_ops_provider.errors import (
    CatalogAuthError,
    CatalogConfigError,
    CatalogUnavailableError,
    MissingExtraError,
)

if TYPE_CHECKING:
    from collections.abc import Iterator

    from pyiceberg.catalog import Catalog
    from sqlalchemy.engine import URL

__all__ = [
    "DEFAULT_DB_PATH",
    "DEFAULT_WAREHOUSE_DIR",
    "CatalogFactory",
    "ensure_namespace",
    "pyiceberg_config_error",
    "sql_database_error",
    "to_property_value",
]

DEFAULT_DB_PATH = Path("local_data") / "iceberg_catalog.db"
DEFAULT_WAREHOUSE_DIR = Path("local_data") / "iceberg_warehouse"

# The module each kind needs, and the extra that installs what that module imports.
_BACKEND_MODULES: dict[str, tuple[str, str]] = {
    "sqlite": ("pyiceberg.catalog.sql", "sqlite"),
    "memory": ("pyiceberg.catalog.sql", "sqlite"),
    # The database driver a `sql` catalog needs depends on its URL: checked when it is built.
    "sql": ("pyiceberg.catalog.sql", "postgres"),
    "glue": ("pyiceberg.catalog.glue", "glue"),
    "rest": ("pyiceberg.catalog.rest", "rest"),
    "hive": ("pyiceberg.catalog.hive", "hive"),
    # SigV4 signing of REST requests imports botocore lazily, at the first request: check up front.
    "s3tables": ("botocore.auth", "s3tables"),
}

# Options of the SQL kinds besides db_path/warehouse_dir/name: SqlCatalog's own switches.
_SQL_SWITCHES = frozenset({"echo", "pool_pre_ping", "init_catalog_tables", "schema_version"})

# Which kinds take these options, for the message refusing them elsewhere.
_OWNERS = {"db_path": "'sqlite' kind", "warehouse_dir": "'sqlite', 'memory' and 'sql' kinds"}

# The extra that installs the drivers of a SQLAlchemy backend (SQLite's comes with Python).
_SQL_DRIVER_EXTRAS = {"postgresql": "postgres"}
_SQL_URI_EXAMPLE = "'postgresql+psycopg://user:password@host:5432/dbname' or 'sqlite:////data/iceberg_catalog.db'"
_SQL_URI_SETTING = (
    "uri= for CatalogFactory.build, `uri:` under `catalog:` in iceberg-ops.yaml, --catalog-uri, or the Host "
    "(or `uri` extra) of the Airflow connection"
)

# Plain (no dot, no dash) option names PyIceberg's remote catalogs understand. Keys with a dot or a
# dash (``s3.endpoint``, ``oauth2-server-uri``) are PyIceberg properties and pass through unchecked;
# a plain key outside this set is almost always a typo, so it is refused.
_REMOTE_PLAIN_KEYS = frozenset(
    {"name", "uri", "warehouse", "credential", "token", "scope", "audience", "resource", "prefix", "region", "ugi"}
)


def ensure_namespace(catalog: Catalog, namespace: str | tuple[str, ...]) -> None:
    """Create ``namespace`` unless it exists, safely when other processes do the same.

    PyIceberg's ``create_namespace_if_not_exists`` checks and then creates, and the SQL catalog
    reports losing that race as a raw database ``IntegrityError``: a namespace that exists
    afterwards is success, whoever created it.
    """
    try:
        catalog.create_namespace_if_not_exists(namespace)
    except Exception:
        if not catalog.namespace_exists(namespace):
            raise


def _lazy_import(module: str, *, kind: str, extra: str) -> ModuleType:
    """Import ``module`` for catalog ``kind``, or explain which extra to install.

    Raises:
        MissingExtraError: ``module`` (or something it imports) is not installed.
    """
    try:
        return importlib.import_module(module)
    except ImportError as exc:
        raise MissingExtraError(f"The {kind!r} catalog kind", extra, exc.name or module) from exc


def to_property_value(key: str, value: object, where: str) -> str:
    """An Iceberg property value (always a string): booleans as ``true``/``false``, numbers and paths as text.

    Raises:
        CatalogConfigError: ``None``, a container or another object; names ``key`` and ``where``.
    """
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str | int | float | os.PathLike):
        return os.fspath(value) if isinstance(value, os.PathLike) else str(value)
    raise CatalogConfigError(
        f"Option {key!r} of {where} is {value!r} ({type(value).__name__}); "
        "values must be strings, numbers, booleans or paths."
    )


def _property_value(kind: str, key: str, value: object) -> str:
    return to_property_value(key, value, f"the {kind!r} catalog")


def _configured_uri(name: str) -> str:
    """The uri ``.pyiceberg.yaml`` / ``PYICEBERG_CATALOG__*`` give catalog ``name``, as load_catalog sees it."""
    try:
        import pyiceberg.catalog

        config = pyiceberg.catalog._ENV_CONFIG.get_catalog_config(name) or {}
    except Exception:
        return ""
    uri = config.get("uri")
    return uri if isinstance(uri, str) else ""


# PyIceberg's own message for a missing uri names the flag of its own command line.
_URI_MISSING = re.compile(
    r"URI missing, please provide using --uri, the config or environment variable (PYICEBERG_CATALOG__\S+__URI)"
)
_URI_SETTING = (
    "`uri:` under `catalog:` in iceberg-ops.yaml, the Host of the Airflow connection, or uri= for CatalogFactory.build"
)


def pyiceberg_config_error(exc: ValueError, what: str, name: str) -> CatalogConfigError:
    """PyIceberg's ``ValueError`` about a catalog's properties, in this project's terms.

    PyIceberg writes for its own command line ("please provide using --uri"); iceberg-ops has no
    ``--uri``, so the message names the settings that give a catalog its ``uri`` instead.

    Args:
        exc: What ``load_catalog`` (or a catalog's constructor) raised.
        what: The catalog, for the message (``"the 'rest' catalog 'rest'"``).
        name: The catalog's name, which is also its section of ``.pyiceberg.yaml``.
    """
    text = " ".join(str(exc).split())
    found = _URI_MISSING.search(text)
    if found:
        text = (
            f"URI missing: give the catalog's `uri` ({_URI_SETTING}), or set {found.group(1)} or `uri` under "
            f"catalogs.{name.lower()} in .pyiceberg.yaml"
        )
    text = text.replace("--uri", "the `uri` option")
    return CatalogConfigError(f"Could not build {what}: {text}.".replace("..", "."))


def _redacted(text: str) -> str:
    """``text`` (a URL that may not parse) with anything between ``user:`` and ``@`` replaced by ``***``."""
    return re.sub(r"(?<=:)[^:@/]+(?=@)", "***", text)


def _sql_url(uri: object) -> URL:
    """The SQLAlchemy URL of a ``sql`` catalog, checked: it parses, SQLAlchemy knows its dialect, its driver imports.

    Raises:
        CatalogConfigError: ``uri`` is missing, not a SQLAlchemy URL, names an unknown dialect or a
            driver that is not installed (outside the extras of this project), or an in-memory
            SQLite database.
        MissingExtraError: A PostgreSQL driver is missing: ``pip install 'iceberg-ops[postgres]'``.
    """
    from sqlalchemy.engine import make_url
    from sqlalchemy.exc import ArgumentError

    if uri is None or (isinstance(uri, str) and not uri.strip()):
        raise CatalogConfigError(
            f"The 'sql' catalog needs the SQLAlchemy URL of its database as uri, for example {_SQL_URI_EXAMPLE} "
            f"({_SQL_URI_SETTING})."
        )
    if not isinstance(uri, str):
        raise CatalogConfigError(f"Option 'uri' of the 'sql' catalog must be a string, got {type(uri).__name__}.")
    try:
        url = make_url(uri.strip())
    except ArgumentError as exc:
        raise CatalogConfigError(
            f"uri {_redacted(uri.strip())!r} of the 'sql' catalog is not a SQLAlchemy URL; give one such as "
            f"{_SQL_URI_EXAMPLE}."
        ) from exc
    try:
        dialect = url.get_dialect()
    except ArgumentError as exc:  # NoSuchModuleError: "Can't load plugin: sqlalchemy.dialects:..."
        raise CatalogConfigError(
            f"uri of the 'sql' catalog starts with {url.drivername + '://'!r}, a database SQLAlchemy does not know; "
            f"give a URL such as {_SQL_URI_EXAMPLE}."
        ) from exc
    backend = url.get_backend_name()
    try:
        dialect.import_dbapi()
    except ImportError as exc:
        extra = _SQL_DRIVER_EXTRAS.get(backend)
        if extra is not None:
            raise MissingExtraError(f"The 'sql' catalog kind on {url.drivername}:// URLs", extra, exc.name) from exc
        raise CatalogConfigError(
            f"The 'sql' catalog on {url.drivername}:// URLs needs the database driver {exc.name or dialect.driver!r}, "
            "which is not installed: install that driver's package, or choose the driver in the URL "
            "('dialect+driver://...') that is installed."
        ) from exc
    if backend == "sqlite" and url.database in (None, "", ":memory:"):
        raise CatalogConfigError(
            "uri of the 'sql' catalog names an in-memory SQLite database, which PyIceberg gives each thread empty: "
            "use kind 'memory' for a catalog in memory, or a file such as 'sqlite:////data/iceberg_catalog.db'."
        )
    return url


def _sql_warehouse(warehouse_dir: str | os.PathLike[str] | None, warehouse: object) -> str:
    """The warehouse location of a ``sql`` catalog from exactly one of ``warehouse_dir`` and ``warehouse``."""
    if warehouse_dir is not None and warehouse is not None:
        raise CatalogConfigError(
            "The 'sql' catalog takes one of warehouse_dir (a local folder) and warehouse (a URI such as "
            "'s3://bucket/warehouse'), not both."
        )
    if warehouse is None:
        if warehouse_dir is None:
            raise CatalogConfigError(
                "The 'sql' catalog needs a place for its data files: warehouse_dir=<local folder> (created if "
                "missing) or warehouse=<URI such as 's3://bucket/warehouse', with s3.* properties>."
            )
        return _location(warehouse_dir)
    if not isinstance(warehouse, str) or "://" not in warehouse:
        raise CatalogConfigError(
            f"Option 'warehouse' of the 'sql' catalog must be a URI such as 's3://bucket/warehouse', got {warehouse!r};"
            " pass a local folder as warehouse_dir instead."
        )
    return warehouse


_SQL_UNREACHABLE = (
    "connection refused",
    "could not translate host name",
    "name or service not known",
    "timeout expired",
    "could not connect",
    "no route to host",
    "server closed the connection",
    "the database system is starting up",
    "the database system is shutting down",
)
_SQL_REFUSED = (
    "password authentication failed",
    "no password supplied",
    "no pg_hba.conf entry",
    "authentication failed",
    "access denied",
)


def sql_database_error(exc: BaseException, endpoint: str, seconds: float | None) -> Exception | None:
    """What a database driver's connection error amounts to (unreachable, refused login, no such database).

    Shared by building a catalog and by every later check that reaches its database (the sensors'
    triggers); ``seconds`` is the bound the caller waited, ``None`` when it set none. ``None`` when
    ``exc`` is not such an error.
    """
    from sqlalchemy.exc import DBAPIError

    if not isinstance(exc, DBAPIError) or exc.orig is None:
        return None
    reason = " ".join(str(exc.orig).split())
    text = reason.lower()
    if any(marker in text for marker in _SQL_REFUSED) or re.search(r'role "[^"]*" does not exist', text):
        return CatalogAuthError(
            f"The catalog database at {endpoint} refused the login ({reason}); check the user name and password "
            "in the catalog's uri (or the login and password of the Airflow connection) and what that user may do.",
            endpoint=endpoint,
            settings=("uri",),
        )
    if re.search(r'database "[^"]*" does not exist', text) or "unknown database" in text:
        return CatalogConfigError(
            f"The catalog database at {endpoint} does not exist ({reason}); create it (CREATE DATABASE ...) or "
            "point the catalog's uri at an existing database."
        )
    if any(marker in text for marker in _SQL_UNREACHABLE):
        return CatalogUnavailableError(
            f"The catalog database at {endpoint} could not be reached ({reason}); check that it is running and "
            f"reachable, and the host and port in the catalog's uri.",
            endpoint=endpoint,
            timeout=seconds if "timeout expired" in text else None,
        )
    return None


@contextmanager
def _sql_database_errors(endpoint: str, seconds: float) -> Iterator[None]:
    """Translate a database driver's connection errors raised inside (see :func:`sql_database_error`)."""
    try:
        yield
    except Exception as exc:
        error = sql_database_error(exc, endpoint, seconds)
        if error is None:
            raise
        raise error from exc


def _settle_postgres_engine(catalog: Catalog, url: URL, seconds: float) -> None:
    """Make a catalog on PostgreSQL commit safely whatever the server's defaults, and connect within ``seconds``.

    PyIceberg's SQL catalog commits with ``UPDATE ... WHERE metadata_location = <the one read>``. Under
    READ COMMITTED (PostgreSQL's default) a commit that waited for a concurrent one re-checks that
    condition, matches no row, and PyIceberg reports ``CommitFailedException``, which every writer
    retries; under a server or database default of REPEATABLE READ or SERIALIZABLE it fails with a
    raw serialization error instead. So the catalog's sessions use READ COMMITTED. Each later
    connection gets ``seconds`` (whole, at least 2) as its connect timeout, unless the URL sets
    ``connect_timeout``; the URL itself is left as given, as it names the catalog.
    """
    engine = getattr(catalog, "engine", None)
    if engine is None or url.get_backend_name() != "postgresql":
        return
    from sqlalchemy import event

    connect_timeout = max(2, math.ceil(seconds))

    def bounded(dialect: Any, connection_record: Any, cargs: Any, cparams: dict[str, Any]) -> None:
        cparams.setdefault("connect_timeout", connect_timeout)

    event.listen(engine, "do_connect", bounded)
    catalog.engine = engine.execution_options(isolation_level="READ COMMITTED")  # type: ignore[attr-defined]


def _location(path_or_uri: str | os.PathLike[str]) -> str:
    """A warehouse location: URIs (``s3://...``, ``file://...``) as given, paths as absolute file URIs."""
    text = os.fspath(path_or_uri)
    if "://" in text:
        return text
    path = Path(text).expanduser().resolve()
    if path.exists() and not path.is_dir():
        raise CatalogConfigError(f"warehouse_dir {str(path)!r} is a file; pass a folder (it is created if missing).")
    path.mkdir(parents=True, exist_ok=True)
    return path.as_uri()


def _open_sql_catalog(
    catalog_class: type[Catalog], name: str, uri: str, warehouse: str, properties: dict[str, Any]
) -> Catalog:
    """Open PyIceberg's SQL catalog, tolerating another process creating its tables at the same moment.

    PyIceberg checks whether the catalog tables exist, then creates them; two processes opening a new
    database at once can both find them missing, and the second ``CREATE TABLE`` fails. Opening again
    finds them.
    """
    from sqlalchemy.exc import IntegrityError, OperationalError, ProgrammingError

    for attempt in range(5):
        try:
            return catalog_class(name, uri=uri, warehouse=warehouse, **properties)  # type: ignore[call-arg]
        except (OperationalError, IntegrityError, ProgrammingError) as exc:
            # SQLite: "table ... already exists"; PostgreSQL: DuplicateTable, or a UniqueViolation on pg_type.
            lost_race = "already exists" in str(exc) or "duplicate key" in str(exc)
            if not lost_race or attempt == 4:
                raise
            time.sleep(0.05 * (attempt + 1))
    raise AssertionError("unreachable")


class CatalogFactory:
    """Build a PyIceberg catalog of one of the seven kinds of the specification, or any PyIceberg type.

    Example:
        >>> catalog = CatalogFactory.build("sqlite", db_path="catalog.db", warehouse_dir="warehouse")
    """

    KINDS: ClassVar[tuple[str, ...]] = ("sqlite", "memory", "sql", "glue", "rest", "hive", "s3tables")
    """Every kind :meth:`build` accepts, in the order the documentation lists them."""

    REMOTE_KINDS: ClassVar[tuple[str, ...]] = ("glue", "rest", "hive", "s3tables")
    """The kinds loaded through :func:`pyiceberg.catalog.load_catalog`."""

    @classmethod
    def build(cls, kind: str, **options: Any) -> Catalog:
        """Build a catalog of ``kind``.

        Besides :attr:`KINDS`, ``kind`` may be ``pyiceberg`` (the options are
        :func:`~pyiceberg.catalog.load_catalog`'s properties, ``type`` and ``name`` included: see
        :meth:`load`) or any other catalog type PyIceberg knows (``dynamodb``, ``in-memory``,
        ``bigquery``): that is passed to ``load_catalog`` as its ``type``, under ``name`` (default the
        kind), with the options as properties unchanged, and noted in the log.

        Args:
            kind: One of :attr:`KINDS`, ``pyiceberg``, or another PyIceberg catalog type.
            **options: For ``sqlite``: ``db_path``, ``warehouse_dir``, ``name`` and PyIceberg
                properties such as ``s3.endpoint`` (for a warehouse on object storage). For
                ``memory``: ``warehouse_dir`` and ``name``. For ``sql``: ``uri`` (a SQLAlchemy
                URL, required), exactly one of ``warehouse_dir`` (a folder) and ``warehouse`` (a
                URI such as ``s3://bucket/path``), ``name`` (default ``sql``; catalogs of
                different names share a database without seeing each other's tables) and
                PyIceberg properties. For the remote kinds: ``name`` (the
                catalog name looked up in ``.pyiceberg.yaml``/environment, default the kind) and
                any PyIceberg catalog property (``uri``, ``warehouse``, ``credential``,
                ``s3.endpoint``, ...). ``s3tables`` also takes ``region``; ``glue`` takes
                ``region`` as a shorthand for ``client.region``. Dotted names are passed as
                ``**{"s3.endpoint": url}``. Every kind also takes ``timeout``: seconds (a
                number above zero, default :data:`DEFAULT_CATALOG_TIMEOUT`) that building a
                remote or ``sql`` catalog, each request of a REST catalog and each connection
                to a PostgreSQL catalog database may take (``None`` means the default). It is
                not passed to PyIceberg as a property.

        Returns:
            A ready PyIceberg catalog.

        Raises:
            UnknownCatalogKindError: ``kind`` is none of :attr:`KINDS`, ``pyiceberg`` and the catalog
                types PyIceberg knows (a ``ValueError``).
            MissingExtraError: The kind's optional dependencies are missing (an ``ImportError``
                naming the ``pip install`` line to run).
            CatalogConfigError: An option is unknown for the kind or has a bad value, a remote
                or ``sql`` kind lacks a required one (no ``uri``), ``uri`` of a ``sql`` catalog is
                not a SQLAlchemy URL or names a database that does not exist, or ``db_path`` is not
                an SQLite database.
            CatalogAuthError: The catalog refused the credentials while being built (a ``sql``
                catalog's database refused the login), or it signs with SigV4 and no AWS
                credentials were found (a ``CatalogConfigError``).
            CatalogUnavailableError: A remote catalog could not be reached, or did not answer
                within ``timeout`` while being built (a ``ConnectionError`` naming the endpoint).
        """
        if not isinstance(kind, str) or kind.lower() not in cls.KINDS:
            from iceberg_ops_provider.core.pyiceberg_catalogs import build_other_kind

            return build_other_kind(kind, options, cls.KINDS)
        kind = kind.lower()
        options = dict(options)
        timeout = options.pop("timeout", None)
        timeout = DEFAULT_CATALOG_TIMEOUT if timeout is None else check_timeout(timeout)
        name = options.get("name", kind.lower())
        if not isinstance(name, str) or not name.strip():
            raise CatalogConfigError(f"Option 'name' must be a non-empty string, got {name!r}.")
        for key in ("db_path", "warehouse_dir"):
            if key in options and not isinstance(options[key], str | os.PathLike):
                raise CatalogConfigError(f"Option {key!r} must be a path (str or os.PathLike), got {options[key]!r}.")
        if "type" in options:
            raise CatalogConfigError(
                f"Do not pass 'type' to CatalogFactory.build: the kind ({kind!r}) decides the catalog type."
            )
        module, extra = _BACKEND_MODULES[kind]
        _lazy_import(module, kind=kind, extra=extra)
        if kind == "sqlite":
            return cls._build_sqlite(**options)
        if kind == "memory":
            return cls._build_memory(**options)
        if kind == "sql":
            return cls._build_sql(options, timeout)
        return cls._build_remote(kind, options, timeout)

    @classmethod
    def load(cls, name: str | None = None, *, timeout: float | None = None, **properties: Any) -> Catalog:
        """Open a catalog of any type PyIceberg supports: ``load_catalog(name, **properties)``, nothing added.

        No defaults and no checks of this project's kinds: ``type`` (absent: PyIceberg infers it
        from ``uri``) and every other property go to PyIceberg as given; ``.pyiceberg.yaml`` and
        ``PYICEBERG_CATALOG__<NAME>__*`` add theirs. Only the bound and the error translation apply
        (:func:`~iceberg_ops_provider.core.pyiceberg_catalogs.load_pyiceberg_catalog`, which lists
        what it raises: the errors of :meth:`build`, and ``UnknownCatalogKindError`` for a
        ``type`` PyIceberg does not know).

        Example:
            >>> catalog = CatalogFactory.load("lake", type="sql", uri="sqlite:////data/c.db", warehouse="file:///data/w")

        Args:
            name: The catalog's name (``None``: PyIceberg's default catalog name).
            timeout: Seconds building may take, and each request of a REST catalog (default
                :data:`DEFAULT_CATALOG_TIMEOUT`).
            **properties: PyIceberg catalog properties (dotted names as ``**{"s3.endpoint": url}``).
        """
        from iceberg_ops_provider.core.pyiceberg_catalogs import load_pyiceberg_catalog

        return load_pyiceberg_catalog(name, properties, timeout)

    @staticmethod
    def _sql_properties(kind: str, options: dict[str, Any]) -> dict[str, str]:
        """Check and stringify the options of the SQL kinds left after their named parameters."""
        named = {
            "sqlite": {"db_path", "warehouse_dir", "name"},
            "memory": {"warehouse_dir", "name"},
            "sql": {"uri", "warehouse_dir", "warehouse", "name"},
        }[kind]
        for key in options:
            if "." not in key and key not in _SQL_SWITCHES:
                valid = ", ".join(sorted(named | _SQL_SWITCHES))
                raise CatalogConfigError(
                    f"Unknown option {key!r} for the {kind!r} catalog. Valid options: {valid}, "
                    "or a dotted PyIceberg property such as 's3.endpoint'."
                )
        return {key: _property_value(kind, key, value) for key, value in options.items()}

    @classmethod
    def _build_sqlite(
        cls,
        db_path: str | os.PathLike[str] | None = None,
        warehouse_dir: str | os.PathLike[str] | None = None,
        name: str = "sqlite",
        **options: Any,
    ) -> Catalog:
        from pyiceberg.catalog.sql import SqlCatalog

        properties = cls._sql_properties("sqlite", options)
        database = Path(os.fspath(db_path) if db_path is not None else DEFAULT_DB_PATH).expanduser().resolve()
        if database.is_dir():
            raise CatalogConfigError(
                f"db_path {str(database)!r} is a directory; pass the path of the SQLite database file "
                "(it is created if missing)."
            )
        database.parent.mkdir(parents=True, exist_ok=True)
        warehouse = _location(warehouse_dir if warehouse_dir is not None else DEFAULT_WAREHOUSE_DIR)
        uri = f"sqlite:///{database}"
        with catalog_errors(uri, None):  # a db_path that is not an SQLite database fails here, naming the file
            return _open_sql_catalog(SqlCatalog, name, uri, warehouse, properties)

    @classmethod
    def _build_memory(
        cls,
        warehouse_dir: str | os.PathLike[str] | None = None,
        name: str = "memory",
        **options: Any,
    ) -> Catalog:
        if "db_path" in options:
            raise CatalogConfigError(
                "The 'memory' catalog keeps no database file, so it takes no db_path; "
                "use kind 'sqlite' to keep the catalog in a file."
            )
        from iceberg_ops_provider.core._memory_catalog import SharedMemorySqlCatalog

        properties = cls._sql_properties("memory", options)
        if warehouse_dir is None:
            warehouse_dir = tempfile.mkdtemp(prefix="iceberg_ops_memory_")
        return SharedMemorySqlCatalog(name, warehouse=_location(warehouse_dir), **properties)

    @classmethod
    def _build_sql(cls, options: dict[str, Any], timeout: float) -> Catalog:
        from pyiceberg.catalog.sql import SqlCatalog

        options = dict(options)
        if "db_path" in options:
            raise CatalogConfigError(
                "Option 'db_path' belongs to the 'sqlite' kind; the 'sql' catalog takes its database as "
                "uri=<SQLAlchemy URL>, for example 'sqlite:////data/iceberg_catalog.db'."
            )
        uri = options.pop("uri", None)
        name = options.pop("name", "sql")
        warehouse_dir, warehouse = options.pop("warehouse_dir", None), options.pop("warehouse", None)
        properties = cls._sql_properties("sql", options)
        url = _sql_url(uri)
        location = _sql_warehouse(warehouse_dir, warehouse)
        endpoint = url._replace(password=None).render_as_string(hide_password=False)  # URL.set ignores None
        with catalog_errors(endpoint, timeout), _sql_database_errors(endpoint, timeout):
            catalog = call_with_timeout(
                lambda: _open_sql_catalog(SqlCatalog, name, str(uri).strip(), location, properties),
                timeout,
                what=f"opening the 'sql' catalog {name!r}",
                endpoint=endpoint,
            )
        _settle_postgres_engine(catalog, url, timeout)
        return catalog

    @classmethod
    def _build_remote(cls, kind: str, options: dict[str, Any], timeout: float = DEFAULT_CATALOG_TIMEOUT) -> Catalog:
        from pyiceberg.catalog import load_catalog

        for key in ("db_path", "warehouse_dir"):
            if key in options:
                raise CatalogConfigError(
                    f"Option {key!r} belongs to the {_OWNERS[key]}; the {kind!r} catalog takes "
                    "'warehouse' (a location or, for s3tables, the table bucket ARN) instead."
                )
        for key in options:
            if "." not in key and "-" not in key and key not in _REMOTE_PLAIN_KEYS:
                raise CatalogConfigError(
                    f"Unknown option {key!r} for the {kind!r} catalog. Plain options are: "
                    f"{', '.join(sorted(_REMOTE_PLAIN_KEYS))}; anything else must be a PyIceberg "
                    "property such as 'rest.sigv4-enabled' or 's3.endpoint'."
                )
        name = str(options.pop("name", kind))
        properties = {key: _property_value(kind, key, value) for key, value in options.items()}
        if kind == "s3tables":
            properties = cls._s3tables_properties(properties)
            catalog_type = "rest"
        else:
            catalog_type = kind
            if "region" in properties:
                properties["client.region"] = properties.pop("region")
        if catalog_type == "rest":
            # PyIceberg's SigV4 signing retries a request 10 times by default, each retry waiting up to
            # the timeout again: a stalled endpoint would take 11 timeouts to report. Two retries.
            properties.setdefault("rest.sigv4.max-retries", "2")
        endpoint = properties.get("uri") or _configured_uri(name) or f"({kind} catalog {name!r})"
        what = f"opening the {kind!r} catalog {name!r}"
        if catalog_type == "rest":  # its constructor already asks the server for its configuration
            what = f"GET /v1/config while {what}"
        try:
            with catalog_errors(endpoint, timeout):
                catalog = call_with_timeout(
                    lambda: load_catalog(name, type=catalog_type, **properties),
                    timeout,
                    what=what,
                    endpoint=endpoint,
                )
        except CatalogConfigError:  # already says what to do (e.g. CatalogAuthError)
            raise
        except ValueError as exc:  # PyIceberg's word for a missing or malformed property (e.g. no uri)
            raise pyiceberg_config_error(exc, f"the {kind!r} catalog {name!r}", name) from exc
        bound_catalog_requests(catalog, timeout)
        return catalog

    @staticmethod
    def _s3tables_properties(properties: dict[str, str]) -> dict[str, str]:
        """REST + SigV4 as AWS S3 Tables expects it; explicit properties win over the preset."""
        region = properties.pop("region", None) or properties.get("rest.signing-region")
        if not region:
            raise CatalogConfigError(
                "The 's3tables' catalog needs region=... (for example region='us-east-1'): it signs "
                "requests for that region and derives the endpoint from it."
            )
        if "warehouse" not in properties:
            raise CatalogConfigError(
                "The 's3tables' catalog needs warehouse=<table bucket ARN>, for example "
                "'arn:aws:s3tables:us-east-1:123456789012:bucket/my-bucket'."
            )
        preset = {
            "uri": f"https://s3tables.{region}.amazonaws.com/iceberg",
            "rest.sigv4-enabled": "true",
            "rest.signing-name": "s3tables",
            "rest.signing-region": region,
            "client.region": region,
        }
        return {**preset, **properties}
