"""PyIceberg's SQL catalog as the ``sqlite``, ``memory`` and ``sql`` kinds open it, reading without writing.

To read, SQLite opens read-only (``mode=ro``) and PostgreSQL runs read-only transactions; only ``create``
makes the database file, its folder, the warehouse folder and the catalog's tables. SQLAlchemy is imported
inside the functions, so this module imports without the SQL extras.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import quote

from iceberg_ops_provider.catalogs.spec import Access
from iceberg_ops_provider.errors import CatalogConfigError, CatalogNotFoundError, MissingExtraError
from iceberg_ops_provider.messages import Hint, message

if TYPE_CHECKING:
    from pyiceberg.catalog.sql import SqlCatalog

    from iceberg_ops_provider.catalogs.spec import CatalogSpec

__all__ = ["SQL_WAREHOUSE_HINT", "open_sql"]

_DRIVER_EXTRAS = {"postgresql": "postgres"}

SQL_WAREHOUSE_HINT = Hint(
    "sql_warehouse",
    "warehouse_dir=<local folder> (created if missing) or warehouse=<URI such as 's3://bucket/warehouse', with "
    "s3.* properties>",
)
"""How a ``sql`` catalog is given a place for its data files."""

CREATE_CATALOG_HINT = Hint("create_catalog", "a command that creates tables (an upgrade) creates the catalog there")
"""How a new catalog comes to be where a database does not exist yet."""


def _check_driver(spec: CatalogSpec) -> Any:
    """The URL of a ``sql`` catalog, its database driver imported (or the extra that installs it named)."""
    from sqlalchemy.engine import make_url

    url = make_url(spec.pyiceberg_properties()["uri"])
    dialect = url.get_dialect()
    try:
        dialect.import_dbapi()
    except ImportError as exc:
        extra = _DRIVER_EXTRAS.get(url.get_backend_name())
        if extra is not None:
            raise MissingExtraError(f"The 'sql' catalog kind on {url.drivername}:// URLs", extra, exc.name) from exc
        raise CatalogConfigError(
            f"The 'sql' catalog on {url.drivername}:// URLs needs the database driver {exc.name or dialect.driver!r}, "
            "which is not installed: install that driver's package, or choose the driver in the URL "
            "('dialect+driver://...') that is installed."
        ) from exc
    return url


def open_sql(spec: CatalogSpec, access: Access) -> SqlCatalog:
    """Open the SQL catalog of ``spec`` for ``access``.

    Raises:
        CatalogNotFoundError: Not creating, and the database file does not exist or holds no catalog.
        CatalogConfigError: Creating a ``sql`` catalog that has no place for its data files.
        MissingExtraError: The database driver is not installed.
    """
    properties = spec.pyiceberg_properties()
    name = spec.name or "sql"
    creating = access == "create"
    properties["init_catalog_tables"] = "true" if creating else "false"
    if not creating:
        properties.pop("schema_version", None)  # "v1" on a v0 catalog would migrate it: ALTER TABLE
    if spec.kind == "memory":
        if spec.warehouse_dir is None and "warehouse" not in properties:
            import tempfile

            properties["warehouse"] = Path(tempfile.mkdtemp(prefix="iceberg_ops_memory_")).as_uri()
        elif spec.warehouse_dir is not None:
            spec.warehouse_dir.mkdir(parents=True, exist_ok=True)
        properties.pop("uri", None)
        from iceberg_ops_provider.catalogs._memory import SharedMemorySqlCatalog

        return SharedMemorySqlCatalog(name, **properties)
    url = _check_driver(spec)
    given = properties["uri"]
    if spec.database is not None:
        if creating:
            spec.database.parent.mkdir(parents=True, exist_ok=True)
        elif not spec.database.exists():
            setting = spec.setting("db_path" if spec.kind == "sqlite" else "uri")
            raise CatalogNotFoundError(
                message(
                    f"The SQLite catalog database {spec.database} ({{setting}}) does not exist, and the catalog was "
                    "opened without creating one, so nothing was created. Check the path; {create}.",
                    setting=setting,
                    create=CREATE_CATALOG_HINT,
                ),
                path=str(spec.database),
            )
        if access == "read":
            # SQLite's read-only open: a write fails, and a missing file is not created.
            properties["uri"] = f"sqlite:///file:{quote(str(spec.database), safe='/')}?mode=ro&uri=true"
    if spec.warehouse_dir is not None and creating:
        spec.warehouse_dir.mkdir(parents=True, exist_ok=True)
    if creating and "warehouse" not in properties:
        raise CatalogConfigError(
            message("The 'sql' catalog needs a place for its data files: {warehouse}.", warehouse=SQL_WAREHOUSE_HINT)
        )
    postgres = url.get_backend_name() == "postgresql"
    if postgres:  # on the URL, so that the catalog's first connection (made while it is built) has them too
        properties["uri"] = _postgres_url(url, spec.timeout, read_only=access == "read")
    catalog = _construct(name, properties)
    catalog.properties["uri"] = given  # the catalog's address as it was given (lineage, messages), not as opened
    if postgres:
        # Under READ COMMITTED a commit that waited for a concurrent one matches no row of PyIceberg's
        # `UPDATE ... WHERE metadata_location = <the one read>`, which it reports as CommitFailedException,
        # retried by every writer; under REPEATABLE READ or SERIALIZABLE it would be a raw serialization error.
        catalog.engine = catalog.engine.execution_options(isolation_level="READ COMMITTED")
    if not creating:
        _require_catalog_tables(catalog, spec)
    if "warehouse" not in properties:
        _refuse_tables_without_warehouse(catalog, name)
    return catalog


def _construct(name: str, properties: dict[str, Any]) -> SqlCatalog:
    """``SqlCatalog``, retried when another process created its tables between PyIceberg's check and create."""
    from pyiceberg.catalog.sql import SqlCatalog
    from sqlalchemy.exc import IntegrityError, OperationalError, ProgrammingError
    from tenacity import Retrying, retry_if_exception, stop_after_attempt, wait_incrementing

    def lost_race(exc: BaseException) -> bool:
        # SQLite: "table ... already exists"; PostgreSQL: DuplicateTable, or a UniqueViolation on pg_type.
        text = str(exc)
        racing = isinstance(exc, OperationalError | IntegrityError | ProgrammingError)
        return racing and ("already exists" in text or "duplicate key" in text)

    # Below core/, so not one of core.retrying's policies: five attempts, 50 ms more wait each time.
    retrying = Retrying(
        stop=stop_after_attempt(5),
        wait=wait_incrementing(start=0.05, increment=0.05),
        retry=retry_if_exception(lost_race),
        reraise=True,
    )
    return retrying(SqlCatalog, name, **properties)


def _require_catalog_tables(catalog: SqlCatalog, spec: CatalogSpec) -> None:
    from sqlalchemy import inspect

    if inspect(catalog.engine).has_table("iceberg_tables"):
        return
    catalog.engine.dispose()
    raise CatalogNotFoundError(
        message(
            f"The database {spec.endpoint()} ({{setting}}) holds no Iceberg catalog (it has no iceberg_tables "
            "table), and the catalog was opened without creating one, so nothing was created. Check that the "
            "setting names the catalog's database; {create}.",
            setting=spec.setting("db_path" if spec.kind == "sqlite" else "uri"),
            create=CREATE_CATALOG_HINT,
        ),
        path=str(spec.database or ""),
    )


def _postgres_url(url: Any, seconds: float, *, read_only: bool) -> str:
    """The URL a PostgreSQL catalog connects with (the URL's own ``connect_timeout`` wins), read-only when reading."""
    query = dict(url.query)
    query.setdefault("connect_timeout", str(max(2, math.ceil(seconds))))
    if read_only:
        query["options"] = f"{query.get('options', '')} -c default_transaction_read_only=on".strip()
    return str(url.set(query=query).render_as_string(hide_password=False))


def _refuse_tables_without_warehouse(catalog: SqlCatalog, name: str) -> None:
    """Make creating a table without a location fail naming the fix (PyIceberg's ``ValueError`` names neither)."""
    default_location = catalog._get_default_warehouse_location

    def location(database_name: str, table_name: str) -> str:
        try:
            return default_location(database_name, table_name)
        except ValueError as exc:
            raise CatalogConfigError(
                message(
                    f"The SQL catalog {name!r} was opened without a place for its data files, so table "
                    f"{database_name}.{table_name} cannot be created: give it {{warehouse}}.",
                    warehouse=SQL_WAREHOUSE_HINT,
                )
            ) from exc

    catalog._get_default_warehouse_location = location  # type: ignore[method-assign]
