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
optional extra installed. The kinds' options become PyIceberg properties in
:mod:`~iceberg_ops_provider.core.catalog_properties`; the SQL kinds are opened with the parts of
:mod:`~iceberg_ops_provider.core.sql_catalog`.
"""

from __future__ import annotations

import importlib
import os
import tempfile
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING, Any, ClassVar

from iceberg_ops_provider.core.catalog_properties import (
    configured_uri,
    pyiceberg_config_error,
    remote_kind_properties,
    sql_kind_properties,
)
from iceberg_ops_provider.core.error_translation import catalog_errors
from iceberg_ops_provider.core.sql_catalog import (
    open_sql_catalog,
    settle_postgres_engine,
    sql_database_errors,
    sql_url,
    sql_warehouse,
    sqlite_database_file,
    warehouse_location,
)
from iceberg_ops_provider.core.timeouts import (
    DEFAULT_CATALOG_TIMEOUT,
    bound_catalog_requests,
    call_with_timeout,
    check_timeout,
    requests_bounded,
)
from iceberg_ops_provider.errors import CatalogConfigError, CatalogNotFoundError, MissingExtraError
from iceberg_ops_provider.messages import Arg, Hint, message

if TYPE_CHECKING:
    from pyiceberg.catalog import Catalog

__all__ = [
    "DEFAULT_DB_PATH",
    "DEFAULT_WAREHOUSE_DIR",
    "CatalogFactory",
    "ensure_namespace",
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


READ_ONLY_HINT = Hint("catalog_read_only", "the catalog was opened only to read (create=False)")
"""Why a catalog database that does not exist was not created: the caller only reads."""

CREATE_CATALOG_HINT = Hint(
    "create_catalog", "opened with create=True (the default), a new, empty catalog is created there"
)
"""How a new catalog is created where a database does not exist yet."""


def _require_database(database: Path, option: str) -> None:
    """Refuse to open a SQLite catalog whose database file does not exist (``create=False``).

    Raises:
        CatalogNotFoundError: Names the file and ``option`` (``db_path``, ``uri``), the setting that gave it.
    """
    if not database.exists():
        raise CatalogNotFoundError(
            message(
                f"The SQLite catalog database {database} ({{option}}) does not exist, and {{read_only}}, so nothing "
                "was created. Check the path; {create}.",
                option=Arg(option),
                read_only=READ_ONLY_HINT,
                create=CREATE_CATALOG_HINT,
            ),
            path=str(database),
        )


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
    def build(cls, kind: str, *, create: bool = True, **options: Any) -> Catalog:
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
            create: ``False`` opens a ``sqlite`` catalog (or a ``sql`` one on a ``sqlite:///`` file)
                only if its database file exists, and creates no folder: for callers that only read,
                which would otherwise create an empty catalog and answer as if it were the real one.
                A ``sql`` catalog then needs no ``warehouse_dir``/``warehouse`` either (reading writes
                no data files; creating a table is refused, naming them). Other kinds create nothing
                when opened and ignore it.

        Returns:
            A ready PyIceberg catalog.

        Raises:
            UnknownCatalogKindError: ``kind`` is none of :attr:`KINDS`, ``pyiceberg`` and the catalog
                types PyIceberg knows (a ``ValueError``).
            MissingExtraError: The kind's optional dependencies are missing (an ``ImportError``
                naming the ``pip install`` line to run).
            CatalogNotFoundError: ``create=False`` and the SQLite database file does not exist.
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
            return cls._build_sqlite(**options, create=create)
        if kind == "memory":
            return cls._build_memory(**options)
        if kind == "sql":
            return cls._build_sql(options, timeout, create=create)
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

    @classmethod
    def _build_sqlite(
        cls,
        db_path: str | os.PathLike[str] | None = None,
        warehouse_dir: str | os.PathLike[str] | None = None,
        name: str = "sqlite",
        *,
        create: bool = True,
        **options: Any,
    ) -> Catalog:
        from pyiceberg.catalog.sql import SqlCatalog

        properties = sql_kind_properties("sqlite", options)
        database = Path(os.fspath(db_path) if db_path is not None else DEFAULT_DB_PATH).expanduser().resolve()
        if database.is_dir():
            raise CatalogConfigError(
                f"db_path {str(database)!r} is a directory; pass the path of the SQLite database file "
                "(it is created if missing)."
            )
        if not create:
            _require_database(database, "db_path")
        database.parent.mkdir(parents=True, exist_ok=True)
        warehouse = warehouse_location(
            warehouse_dir if warehouse_dir is not None else DEFAULT_WAREHOUSE_DIR, create=create
        )
        uri = f"sqlite:///{database}"
        with catalog_errors(uri, None):  # a db_path that is not an SQLite database fails here, naming the file
            return open_sql_catalog(SqlCatalog, name, uri, warehouse, properties)

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

        properties = sql_kind_properties("memory", options)
        if warehouse_dir is None:
            warehouse_dir = tempfile.mkdtemp(prefix="iceberg_ops_memory_")
        return SharedMemorySqlCatalog(name, warehouse=warehouse_location(warehouse_dir), **properties)

    @classmethod
    def _build_sql(cls, options: dict[str, Any], timeout: float, *, create: bool = True) -> Catalog:
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
        properties = sql_kind_properties("sql", options)
        url = sql_url(uri)
        database = sqlite_database_file(url)
        if database is not None and not create:
            _require_database(database, "uri")
        location = sql_warehouse(warehouse_dir, warehouse, create=create)
        endpoint = url._replace(password=None).render_as_string(hide_password=False)  # URL.set ignores None
        with catalog_errors(endpoint, timeout), sql_database_errors(endpoint, timeout):
            catalog = call_with_timeout(
                lambda: open_sql_catalog(SqlCatalog, name, str(uri).strip(), location, properties),
                timeout,
                what=f"opening the 'sql' catalog {name!r}",
                endpoint=endpoint,
            )
        settle_postgres_engine(catalog, url, timeout)
        return catalog

    @classmethod
    def _build_remote(cls, kind: str, options: dict[str, Any], timeout: float = DEFAULT_CATALOG_TIMEOUT) -> Catalog:
        from pyiceberg.catalog import load_catalog

        name, catalog_type, properties = remote_kind_properties(kind, options)
        endpoint = properties.get("uri") or configured_uri(name) or f"({kind} catalog {name!r})"
        what = f"opening the {kind!r} catalog {name!r}"
        if catalog_type == "rest":  # its constructor already asks the server for its configuration
            what = f"GET /v1/config while {what}"
        try:
            with catalog_errors(endpoint, timeout):
                catalog = call_with_timeout(
                    requests_bounded(lambda: load_catalog(name, type=catalog_type, **properties), timeout),
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
