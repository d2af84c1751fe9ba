""":func:`open_catalog`: the one function that opens a catalog (a layer contract checks nothing else does)."""

from __future__ import annotations

import contextvars
import importlib
import logging
import threading
import weakref
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any

from iceberg_ops_provider.catalogs.failures import catalog_errors, missing_uri
from iceberg_ops_provider.catalogs.kinds import KINDS, PYICEBERG_KIND, sqlite_file
from iceberg_ops_provider.catalogs.redact import split_secrets
from iceberg_ops_provider.catalogs.spec import DEFAULT_CATALOG_TIMEOUT, Access, CatalogSpec
from iceberg_ops_provider.catalogs.trust import guard_file_io
from iceberg_ops_provider.errors import CatalogUnavailableError, MissingExtraError
from iceberg_ops_provider.messages import message

if TYPE_CHECKING:
    from collections.abc import Callable

    from pyiceberg.catalog import Catalog

__all__ = ["empty_catalog", "ensure_namespace", "open_catalog", "spec_of"]

log = logging.getLogger(__name__)

# The module each kind needs, and the extra that installs what that module imports.
_BACKEND_MODULES: dict[str, tuple[str, str]] = {
    "sqlite": ("pyiceberg.catalog.sql", "sqlite"),
    "memory": ("pyiceberg.catalog.sql", "sqlite"),
    "sql": ("pyiceberg.catalog.sql", "postgres"),
    "glue": ("pyiceberg.catalog.glue", "glue"),
    "rest": ("pyiceberg.catalog.rest", "rest"),
    "hive": ("pyiceberg.catalog.hive", "hive"),
    # SigV4 signing of REST requests imports botocore lazily, at the first request: checked up front.
    "s3tables": ("botocore.auth", "s3tables"),
}

# Catalog types built in the calling thread: they make no request while built (or are local).
_BUILT_HERE = ("rest", "sql", "in-memory", "glue", "hive")

_OPENED: weakref.WeakKeyDictionary[Any, CatalogSpec] = weakref.WeakKeyDictionary()


def open_catalog(spec: CatalogSpec, *, access: Access = "write") -> Catalog:
    """Open the catalog ``spec`` describes, for ``access`` (:data:`~.spec.Access`).

    Every request of a REST catalog ends within ``spec.timeout`` seconds, and no table it loads chooses
    a class to import (:mod:`.trust`).

    Raises:
        CatalogConfigError: The spec has problems (each named where it was set), or a setting the
            catalog refuses; :class:`~iceberg_ops_provider.errors.UnknownCatalogKindError` for a
            kind nobody knows.
        CatalogNotFoundError: Not creating, and there is no catalog where the spec points.
        MissingExtraError: The kind's optional dependencies are missing.
        CatalogAuthError: The catalog refused the credentials, or none were found.
        CatalogUnavailableError: The catalog could not be reached, or did not answer in time.
    """
    if spec.problems:
        raise spec.config_error()
    if spec.kind in _BACKEND_MODULES:
        module, extra = _BACKEND_MODULES[spec.kind]
        try:
            importlib.import_module(module)
        except ImportError as exc:
            raise MissingExtraError(f"The {spec.kind!r} catalog kind", extra, exc.name or module) from exc
    elif spec.kind not in (PYICEBERG_KIND, *KINDS):
        log.info(
            "Catalog kind %r is not one of this project's kinds (%s): opening it as PyIceberg's catalog type %r.",
            spec.kind,
            ", ".join(KINDS),
            spec.kind,
        )
    properties = _merged(spec)
    with catalog_errors(spec, opening=True):
        catalog_type = _catalog_type(spec, properties)
        if catalog_type == "sql":
            from iceberg_ops_provider.catalogs.sql import open_sql

            catalog = open_sql(_with_sqlite_file(spec, properties), access)
        elif catalog_type == "rest":
            from iceberg_ops_provider.catalogs.rest import BoundedRestCatalog

            name = spec.name or "default"
            if not properties.get("uri"):  # as load_catalog checks it
                raise missing_uri(spec, f"PYICEBERG_CATALOG__{name.upper()}__URI")
            catalog = BoundedRestCatalog(name, timeout=spec.timeout, **properties)
        else:
            from pyiceberg.catalog import load_catalog

            build = partial(load_catalog, spec.name, **properties)
            catalog = build() if catalog_type in _BUILT_HERE else _within(build, spec)
    guard_file_io(catalog, writes=access != "read")
    _OPENED[catalog] = spec
    return catalog


def _merged(spec: CatalogSpec) -> dict[str, Any]:
    """The properties ``load_catalog`` would open with: ``.pyiceberg.yaml`` and the environment's under the name."""
    properties = spec.pyiceberg_properties()
    if not spec.env_config:
        return properties
    from pyiceberg.catalog import _ENV_CONFIG
    from pyiceberg.utils.config import merge_config

    name = spec.name or _ENV_CONFIG.get_default_catalog_name()
    return merge_config(_ENV_CONFIG.get_catalog_config(name) or {}, properties)  # type: ignore[arg-type]


def _catalog_type(spec: CatalogSpec, properties: dict[str, Any]) -> str:
    """The PyIceberg type of the merged properties; inferred from ``uri`` as PyIceberg infers it."""
    from pyiceberg.catalog import infer_catalog_type

    given = properties.get("type")
    if isinstance(given, str) and given:
        return given.lower()
    if properties.get("py-catalog-impl"):
        return "impl"
    inferred = infer_catalog_type(spec.name or "default", properties)  # ValueError: no uri, or an unknown one
    return inferred.value if inferred is not None else ""


def _with_sqlite_file(spec: CatalogSpec, properties: dict[str, Any]) -> CatalogSpec:
    from dataclasses import replace

    database = spec.database
    if database is None and spec.kind != "memory":
        database = _sqlite_file(properties.get("uri"))
    shown, secrets = split_secrets(properties)
    return replace(spec, properties=shown, secrets=secrets, database=database)


def _sqlite_file(uri: object) -> Path | None:
    if not isinstance(uri, str):
        return None
    from sqlalchemy.engine import make_url
    from sqlalchemy.exc import ArgumentError

    try:
        return sqlite_file(make_url(uri.strip()))
    except ArgumentError:
        return None


def _within(build: Callable[[], Catalog], spec: CatalogSpec) -> Catalog:
    """``build()`` in a daemon thread abandoned after ``spec.timeout``: some constructors call out unbounded."""
    outcome: dict[str, Any] = {}
    context = contextvars.copy_context()

    def run() -> None:
        try:
            outcome["catalog"] = context.run(build)
        except BaseException as exc:  # handed to the caller, whatever it is
            outcome["error"] = exc

    worker = threading.Thread(target=run, name=f"iceberg-ops: opening {spec.name}"[:64], daemon=True)
    worker.start()
    worker.join(spec.timeout)
    if worker.is_alive():
        raise CatalogUnavailableError(
            message(
                f"The catalog {spec.endpoint()} was not opened within {spec.timeout:g} s; check that it is running and "
                "reachable, or raise {timeout}.",
                timeout=spec.setting("timeout"),
            ),
            endpoint=spec.endpoint(),
            timeout=spec.timeout,
        )
    if "error" in outcome:
        raise outcome["error"]
    return outcome["catalog"]


def spec_of(catalog: Catalog) -> CatalogSpec:
    """The spec ``catalog`` was opened from; for a catalog built elsewhere, one that describes it."""
    found = _OPENED.get(catalog)
    if found is not None:
        return found
    from iceberg_ops_provider.catalogs.rest import bound_of

    properties = dict(getattr(catalog, "properties", {}) or {})
    engine = getattr(catalog, "engine", None)
    if getattr(engine, "url", None) is not None:
        properties["uri"] = engine.url.render_as_string(hide_password=True)
    properties.setdefault("type", type(catalog).__name__.removesuffix("Catalog").lower())
    shown, secrets = split_secrets(properties)
    return CatalogSpec(
        kind=PYICEBERG_KIND,
        name=getattr(catalog, "name", None),
        properties=shown,
        secrets=secrets,
        timeout=bound_of(catalog) or DEFAULT_CATALOG_TIMEOUT,
        database=_sqlite_file(properties.get("uri")),
    )


def empty_catalog() -> Catalog:
    """An empty in-memory catalog standing for one that does not exist yet; it writes no file anywhere."""
    import tempfile

    from iceberg_ops_provider.catalogs.sources import from_options

    # A URI, not a folder: a folder would be created for the warehouse.
    absent = Path(tempfile.gettempdir(), "iceberg-ops-absent").as_uri()
    return open_catalog(from_options("memory", warehouse_dir=absent), access="create")


def ensure_namespace(catalog: Catalog, namespace: str | tuple[str, ...]) -> None:
    """Create ``namespace`` unless it exists, safely when other processes do the same.

    PyIceberg checks and then creates; the SQL catalog reports losing that race as a raw ``IntegrityError``.
    """
    try:
        catalog.create_namespace_if_not_exists(namespace)
    except Exception:
        if not catalog.namespace_exists(namespace):
            raise
