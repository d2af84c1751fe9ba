"""PyIceberg's SQL catalog as the ``sqlite``, ``memory`` and ``sql`` kinds open it.

:class:`~iceberg_ops_provider.core.catalog.CatalogFactory` builds its SQL kinds from these parts, and
:mod:`~iceberg_ops_provider.core.pyiceberg_catalogs` applies the same care to a ``sql`` catalog
opened through ``load_catalog``:

* :func:`sql_url` checks a ``sql`` catalog's SQLAlchemy URL (it parses, its dialect is known, its
  driver imports, it is not an in-memory SQLite database), naming the extra that installs a missing
  PostgreSQL driver; :func:`sql_warehouse` and :func:`warehouse_location` give its data files a
  place.
* :func:`open_sql_catalog` opens the catalog, tolerating another process creating its tables at the
  same moment.
* :func:`sql_database_error` (and :func:`sql_database_errors` around a block) says what a database
  driver's connection error amounts to: an unreachable database, a refused login, a database that
  does not exist. The sensors' triggers use it too, for every later check that reaches the database.
* :func:`settle_postgres_engine` makes a catalog on PostgreSQL commit at READ COMMITTED and connect
  within the bound.

SQLAlchemy is imported only inside these functions, so this module imports without the SQL extras.
Passwords in a catalog's ``uri`` never appear in the messages.
"""

from __future__ import annotations

import math
import os
import re
import time
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

from iceberg_ops_provider.core.catalog_messages import redacted
from iceberg_ops_provider.errors import (
    CatalogAuthError,
    CatalogConfigError,
    CatalogUnavailableError,
    MissingExtraError,
)
from iceberg_ops_provider.messages import Hint, message

if TYPE_CHECKING:
    from collections.abc import Iterator

    from pyiceberg.catalog import Catalog
    from sqlalchemy.engine import URL

__all__ = [
    "SQL_WAREHOUSE_HINT",
    "open_sql_catalog",
    "settle_postgres_engine",
    "sql_database_error",
    "sql_database_errors",
    "sql_url",
    "sql_warehouse",
    "sqlite_database_file",
    "warehouse_location",
]

# The extra that installs the drivers of a SQLAlchemy backend (SQLite's comes with Python).
_SQL_DRIVER_EXTRAS = {"postgresql": "postgres"}
_SQL_URI_EXAMPLE = "'postgresql+psycopg://user:password@host:5432/dbname' or 'sqlite:////data/iceberg_catalog.db'"
_SQL_URI_SETTING = (
    "uri= for CatalogFactory.build, `uri:` under `catalog:` in iceberg-ops.yaml, --catalog-uri, or the Host "
    "(or `uri` extra) of the Airflow connection"
)


def sql_url(uri: object) -> URL:
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
            f"uri {redacted(uri.strip())!r} of the 'sql' catalog is not a SQLAlchemy URL; give one such as "
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


SQL_WAREHOUSE_HINT = Hint(
    "sql_warehouse",
    "warehouse_dir=<local folder> (created if missing) or warehouse=<URI such as 's3://bucket/warehouse', with "
    "s3.* properties>",
)
"""How a ``sql`` catalog is given a place for its data files; the command line words it as ``--warehouse``."""


def sql_warehouse(
    warehouse_dir: str | os.PathLike[str] | None, warehouse: object, *, create: bool = True
) -> str | None:
    """The warehouse location of a ``sql`` catalog from exactly one of ``warehouse_dir`` and ``warehouse``.

    ``create=False`` (a catalog opened only to read): neither may be given, since reading writes no
    data files (``None`` then), and a ``warehouse_dir`` is not created.
    """
    if warehouse_dir is not None and warehouse is not None:
        raise CatalogConfigError(
            "The 'sql' catalog takes one of warehouse_dir (a local folder) and warehouse (a URI such as "
            "'s3://bucket/warehouse'), not both."
        )
    if warehouse is None:
        if warehouse_dir is None:
            if not create:
                return None
            raise CatalogConfigError(
                message(
                    "The 'sql' catalog needs a place for its data files: {warehouse}.", warehouse=SQL_WAREHOUSE_HINT
                )
            )
        return warehouse_location(warehouse_dir, create=create)
    if not isinstance(warehouse, str) or "://" not in warehouse:
        raise CatalogConfigError(
            f"Option 'warehouse' of the 'sql' catalog must be a URI such as 's3://bucket/warehouse', got {warehouse!r};"
            " pass a local folder as warehouse_dir instead."
        )
    return warehouse


def sqlite_database_file(url: URL) -> Path | None:
    """The database file of a ``sqlite:///path`` URL (resolved), or ``None`` for another database or a ``file:`` URI."""
    if url.get_backend_name() != "sqlite" or url.database in (None, "", ":memory:") or url.database.startswith("file:"):
        return None
    return Path(url.database).expanduser().resolve()


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
def sql_database_errors(endpoint: str, seconds: float) -> Iterator[None]:
    """Translate a database driver's connection errors raised inside (see :func:`sql_database_error`)."""
    try:
        yield
    except Exception as exc:
        error = sql_database_error(exc, endpoint, seconds)
        if error is None:
            raise
        raise error from exc


def settle_postgres_engine(catalog: Catalog, url: URL, seconds: float) -> None:
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


def warehouse_location(path_or_uri: str | os.PathLike[str], *, create: bool = True) -> str:
    """A warehouse location: URIs (``s3://...``, ``file://...``) as given, paths as absolute file URIs.

    A local folder is created when missing, unless ``create=False`` (a catalog opened only to read).
    """
    text = os.fspath(path_or_uri)
    if "://" in text:
        return text
    path = Path(text).expanduser().resolve()
    if path.exists() and not path.is_dir():
        raise CatalogConfigError(f"warehouse_dir {str(path)!r} is a file; pass a folder (it is created if missing).")
    if create:
        path.mkdir(parents=True, exist_ok=True)
    return path.as_uri()


def open_sql_catalog(
    catalog_class: type[Catalog], name: str, uri: str, warehouse: str | None, properties: dict[str, Any]
) -> Catalog:
    """Open PyIceberg's SQL catalog, tolerating another process creating its tables at the same moment.

    PyIceberg checks whether the catalog tables exist, then creates them; two processes opening a new
    database at once can both find them missing, and the second ``CREATE TABLE`` fails. Opening again
    finds them. Without a ``warehouse`` (a catalog opened only to read) creating a table is refused
    with a :class:`~iceberg_ops_provider.errors.CatalogConfigError` saying how to give it one.
    """
    from sqlalchemy.exc import IntegrityError, OperationalError, ProgrammingError

    location = {"warehouse": warehouse} if warehouse is not None else {}
    for attempt in range(5):
        try:
            catalog = catalog_class(name, uri=uri, **location, **properties)  # type: ignore[call-arg]
        except (OperationalError, IntegrityError, ProgrammingError) as exc:
            # SQLite: "table ... already exists"; PostgreSQL: DuplicateTable, or a UniqueViolation on pg_type.
            lost_race = "already exists" in str(exc) or "duplicate key" in str(exc)
            if not lost_race or attempt == 4:
                raise
            time.sleep(0.05 * (attempt + 1))
            continue
        if warehouse is None:
            _refuse_tables_without_warehouse(catalog, name)
        return catalog
    raise AssertionError("unreachable")


def _refuse_tables_without_warehouse(catalog: Catalog, name: str) -> None:
    """Make a table created without a location in ``catalog`` (which has no warehouse) fail naming the fix.

    PyIceberg's own ``ValueError`` ("No default path is set") names neither the catalog nor a setting.
    A namespace with a ``location`` property still gives its tables a place.
    """
    default_location = catalog._get_default_warehouse_location  # type: ignore[attr-defined]

    def location(database_name: str, table_name: str) -> str:
        try:
            return default_location(database_name, table_name)
        except ValueError as exc:
            raise CatalogConfigError(
                message(
                    f"The 'sql' catalog {name!r} was opened without a place for its data files, so table "
                    f"{database_name}.{table_name} cannot be created: give it {{warehouse}}.",
                    warehouse=SQL_WAREHOUSE_HINT,
                )
            ) from exc

    catalog._get_default_warehouse_location = location  # type: ignore[attr-defined]
