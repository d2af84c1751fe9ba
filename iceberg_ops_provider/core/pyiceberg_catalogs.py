"""Catalogs of every type PyIceberg supports, opened through :func:`pyiceberg.catalog.load_catalog`.

:class:`~iceberg_ops_provider.core.catalog.CatalogFactory`'s own kinds add defaults and checks
(``sqlite`` keeps its database in ``local_data/``, ``sql`` refuses an in-memory SQLite URL, ...).
This module opens a catalog the way PyIceberg itself does, with exactly the properties given,
``type`` included (``rest``, ``hive``, ``glue``, ``dynamodb``, ``sql``, ``in-memory``,
``bigquery``, or none: PyIceberg then infers it from ``uri``), and only adds what the kinds add to
every catalog:

* a bound: building gives up after ``timeout`` seconds, and every request of a REST catalog is
  bounded by it (:mod:`iceberg_ops_provider.core.timeouts`); a REST catalog's SigV4 signing
  retries twice instead of ten times (``rest.sigv4.max-retries``, unless given);
* error translation: an unreachable catalog is a
  :class:`~iceberg_ops_provider.errors.CatalogUnavailableError`, refused credentials a
  :class:`~iceberg_ops_provider.errors.CatalogAuthError`, a type PyIceberg does not know an
  :class:`~iceberg_ops_provider.errors.UnknownCatalogKindError`, a missing or malformed property a
  :class:`~iceberg_ops_provider.errors.CatalogConfigError`, each naming the endpoint (never a
  password);
* a ``sql`` catalog on PostgreSQL commits at READ COMMITTED and connects within the bound, as the
  ``sql`` kind does.

:func:`official_connection_arguments` gives the ``load_catalog`` arguments that Airflow's official
Iceberg provider (``apache-airflow-providers-apache-iceberg`` 2.1) derives from its ``iceberg``
connections, so the hook of this project opens those connections as that provider does.

Nothing here imports Airflow.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from iceberg_ops_provider.core.catalog_messages import without_password
from iceberg_ops_provider.core.catalog_properties import configured_uri, pyiceberg_config_error
from iceberg_ops_provider.core.error_translation import catalog_errors
from iceberg_ops_provider.core.sql_catalog import settle_postgres_engine, sql_database_errors
from iceberg_ops_provider.core.timeouts import (
    DEFAULT_CATALOG_TIMEOUT,
    bound_catalog_requests,
    call_with_timeout,
    check_timeout,
    requests_bounded,
)
from iceberg_ops_provider.errors import CatalogConfigError, MissingExtraError, UnknownCatalogKindError

if TYPE_CHECKING:
    from pyiceberg.catalog import Catalog

__all__ = [
    "PYICEBERG_KIND",
    "build_other_kind",
    "load_pyiceberg_catalog",
    "official_connection_arguments",
    "pyiceberg_catalog_types",
]

logger = logging.getLogger(__name__)

PYICEBERG_KIND = "pyiceberg"
"""The kind of :meth:`CatalogFactory.build` whose options are ``load_catalog``'s properties, unchanged."""

# The extra of this project that installs what PyIceberg needs for a catalog type, where there is one.
_TYPE_EXTRAS = {"glue": "glue", "hive": "hive", "sql": "sqlite", "in-memory": "sqlite"}


def pyiceberg_catalog_types() -> tuple[str, ...]:
    """The catalog types the installed PyIceberg knows (``rest``, ``hive``, ``glue``, ``dynamodb``, ``sql``, ...)."""
    from pyiceberg.catalog import CatalogType

    return tuple(member.value for member in CatalogType)


def official_connection_arguments(
    conn_id: str,
    *,
    host: str | None,
    login: str | None,
    password: str | None,
    extra: Mapping[str, Any],
) -> tuple[str, dict[str, Any]]:
    """The ``load_catalog(name, **properties)`` arguments of an ``iceberg`` connection, as the official hook has them.

    As ``IcebergHook.catalog`` of ``apache-airflow-providers-apache-iceberg`` 2.1.2 builds them: the
    catalog is named after the connection; the whole extra becomes the properties; the host, without
    trailing ``/`` and with no scheme added, replaces ``uri``; ``type`` is ``rest`` unless the extra
    names one; for ``type`` ``rest`` (exactly) the login and password replace ``credential`` as
    ``login:password``, and only when both are set (one without the other is logged as a warning and
    ignored). The port and schema are not used.

    One deviation: a ``type`` that is ``null`` or empty counts as absent (``rest``); that provider
    would pass it on and let PyIceberg infer the type from ``uri``.

    Args:
        conn_id: The connection id: the catalog's name, under which ``.pyiceberg.yaml`` and
            ``PYICEBERG_CATALOG__<NAME>__*`` variables add properties.
        host: The connection's host.
        login: The connection's login (an OAuth2 client id).
        password: The connection's password (an OAuth2 client secret).
        extra: The connection's extra, parsed.

    Returns:
        ``(name, properties)``.
    """
    properties: dict[str, Any] = dict(extra)
    uri = host.rstrip("/") if host else None
    if uri:
        properties["uri"] = uri
    if properties.get("type") in (None, ""):
        properties["type"] = "rest"
    if properties["type"] == "rest":
        if login and password:
            properties["credential"] = f"{login}:{password}"
        elif login or password:
            logger.warning(
                "Connection %r has only one of login (client id) and password (client secret); both are needed for "
                "an OAuth2 credential, so neither is used.",
                conn_id,
            )
    return conn_id, properties


def _catalog_type(properties: Mapping[str, Any]) -> str | None:
    """The ``type`` property, lower case and checked; ``None`` when absent (PyIceberg infers it).

    Raises:
        UnknownCatalogKindError: A type PyIceberg does not know.
        CatalogConfigError: A ``type`` that is not text.
    """
    value = properties.get("type")
    if value is None or value == "":
        return None
    types = pyiceberg_catalog_types()
    if not isinstance(value, str):
        raise CatalogConfigError(
            f"Option 'type' must name a PyIceberg catalog type ({', '.join(types)}), got {value!r} "
            f"({type(value).__name__})."
        )
    if value.strip().lower() not in types:
        raise UnknownCatalogKindError(value, types)
    return value.strip().lower()


def _endpoint(name: str, catalog_type: str | None, properties: Mapping[str, Any]) -> str:
    """Where the catalog lives, for messages, without a password."""
    for key in ("uri", "glue.endpoint"):
        value = properties.get(key)
        if isinstance(value, str) and value.strip():
            return without_password(value.strip())
    configured = configured_uri(name)
    if configured:
        return without_password(configured)
    return f"({catalog_type or 'PyIceberg'} catalog {name!r})"


def _local(catalog_type: str | None, properties: Mapping[str, Any]) -> bool:
    """Whether the catalog lives in this process or a local SQLite file, so building it needs no bound.

    It must be built in the calling thread, too: PyIceberg's in-memory SQLite databases (type
    ``in-memory``, ``sqlite://`` URLs) exist per thread, so a catalog built in another thread would
    find its tables missing in every other.
    """
    uri = properties.get("uri")
    return catalog_type == "in-memory" or (
        catalog_type in ("sql", None) and isinstance(uri, str) and uri.strip().lower().startswith("sqlite")
    )


def load_pyiceberg_catalog(
    name: str | None, properties: Mapping[str, Any], timeout: float | None = DEFAULT_CATALOG_TIMEOUT
) -> Catalog:
    """``pyiceberg.catalog.load_catalog(name, **properties)``, bounded and with errors in this project's terms.

    Args:
        name: The catalog's name (its section of ``.pyiceberg.yaml``); ``None`` for PyIceberg's
            default catalog name.
        properties: PyIceberg catalog properties, passed as given (values need not be strings:
            PyIceberg takes nested mappings such as ``ssl``); ``type`` chooses the catalog type.
        timeout: Seconds building may take, and each request of a REST catalog (``None``: the default).

    Returns:
        The catalog.

    Raises:
        UnknownCatalogKindError: ``type`` is not a catalog type PyIceberg knows.
        CatalogConfigError: A property is missing or malformed (no ``uri``, a REST ``uri`` without
            scheme, ...), or ``name`` is not a non-empty string.
        MissingExtraError: The type's dependencies are not installed (for ``dynamodb`` and
            ``bigquery``, which no extra of this project installs: a ``CatalogConfigError`` naming
            PyIceberg's extra).
        CatalogAuthError: The catalog refused the credentials, or none were found.
        CatalogUnavailableError: The catalog could not be reached or did not answer within ``timeout``.
    """
    from pyiceberg.catalog import load_catalog
    from pyiceberg.exceptions import NotInstalledError

    seconds = DEFAULT_CATALOG_TIMEOUT if timeout is None else check_timeout(timeout)
    if name is not None and (not isinstance(name, str) or not name.strip()):
        raise CatalogConfigError(f"The catalog's name must be a non-empty string, got {name!r}.")
    properties = dict(properties)
    catalog_type = _catalog_type(properties)
    if catalog_type == "rest":
        # As for the rest kind: SigV4 signing retries 10 times by default, each retry waiting up to the bound.
        properties.setdefault("rest.sigv4.max-retries", "2")
    label = name if name is not None else "(default)"
    endpoint = _endpoint(label, catalog_type, properties)
    what = f"the {catalog_type!r} catalog {label!r}" if catalog_type else f"the catalog {label!r}"
    doing = f"opening {what}"
    if catalog_type == "rest":  # its constructor already asks the server for its configuration
        doing = f"GET /v1/config while {doing}"
    try:
        with catalog_errors(endpoint, seconds), sql_database_errors(endpoint, seconds):
            if _local(catalog_type, properties):
                catalog = load_catalog(name, **properties)
            else:
                catalog = call_with_timeout(
                    requests_bounded(lambda: load_catalog(name, **properties), seconds),
                    seconds,
                    what=doing,
                    endpoint=endpoint,
                )
    except CatalogConfigError:  # already says what to do (e.g. CatalogAuthError)
        raise
    except NotInstalledError as exc:
        extra = _TYPE_EXTRAS.get(catalog_type or "")
        if extra is not None:
            raise MissingExtraError(f"The {catalog_type!r} catalog type", extra, None) from exc
        raise CatalogConfigError(f"Could not build {what}: {exc}.".replace("..", ".")) from exc
    except ValueError as exc:  # PyIceberg's word for a missing or malformed property; requests' for a bad URL
        error = pyiceberg_config_error(exc, what, label)
        uri = properties.get("uri")
        if isinstance(uri, str) and "://" not in uri and (catalog_type or "rest") == "rest":
            error = CatalogConfigError(
                f"{str(error).rstrip('.')}; the catalog's uri {uri!r} has no scheme: give it whole, such as "
                f"'https://{uri}' (an `iceberg` connection's host is passed on unchanged, as the official Iceberg "
                "provider passes it)."
            )
        raise error from exc
    engine = getattr(catalog, "engine", None)
    if engine is not None and getattr(engine, "url", None) is not None:
        settle_postgres_engine(catalog, engine.url, seconds)
    bound_catalog_requests(catalog, seconds)
    return catalog


def build_other_kind(kind: object, options: Mapping[str, Any], own_kinds: Sequence[str]) -> Catalog:
    """:meth:`CatalogFactory.build` for a kind outside ``own_kinds``: ``pyiceberg``, or a PyIceberg type.

    Kind ``pyiceberg`` opens ``load_catalog(name, **options)`` (``name`` default: PyIceberg's
    default catalog name). Another catalog type PyIceberg knows is passed as ``type``, under ``name``
    (default: the kind), the options as properties unchanged, with a note in the log.

    Raises:
        UnknownCatalogKindError: ``kind`` is none of ``own_kinds``, ``pyiceberg`` and PyIceberg's types.
        CatalogConfigError: ``type`` among the options of a kind other than ``pyiceberg``.
    """
    others = tuple(name for name in pyiceberg_catalog_types() if name not in own_kinds)
    if not isinstance(kind, str) or kind.lower() not in (PYICEBERG_KIND, *others):
        raise UnknownCatalogKindError(str(kind), (*own_kinds, PYICEBERG_KIND, *others))
    options = dict(options)
    timeout = options.pop("timeout", None)
    kind = kind.lower()
    if kind == PYICEBERG_KIND:
        return load_pyiceberg_catalog(options.pop("name", None), options, timeout)
    if "type" in options:
        raise CatalogConfigError(
            f"Do not pass 'type' to CatalogFactory.build: the kind ({kind!r}) decides the catalog type "
            f"(kind {PYICEBERG_KIND!r} takes 'type' among PyIceberg's properties)."
        )
    name = options.pop("name", kind)
    logger.info(
        "Catalog kind %r is not one of CatalogFactory's kinds (%s): opening it with PyIceberg's load_catalog as "
        "type %r, the options as its properties.",
        kind,
        ", ".join(own_kinds),
        kind,
    )
    return load_pyiceberg_catalog(name, {**options, "type": kind}, timeout)
