"""IcebergCatalogHook: a PyIceberg catalog built from an Airflow Connection.

Connection type ``iceberg_ops``:

* ``extra.kind``: ``sqlite``, ``memory``, ``sql``, ``rest``, ``glue``, ``hive`` or ``s3tables``
  (``rest`` when absent), and that kind's options exactly as :meth:`CatalogFactory.build` takes
  them (``db_path`` and ``warehouse_dir`` for sqlite; ``warehouse_dir`` or ``warehouse`` for sql;
  ``warehouse``, ``region``, ``s3.endpoint``, ... for the others). Any other catalog type PyIceberg
  supports (``dynamodb``, ``in-memory``, ``bigquery``) is passed to PyIceberg's ``load_catalog`` as
  its ``type``, with a note in the log; ``pyiceberg`` passes the extra (``type`` included) to
  ``load_catalog`` unchanged.
* ``host``: the catalog URI (``https://`` added when it has no scheme, the port appended);
  login/password: the REST ``credential``.
* ``kind: sql``: the database's SQLAlchemy URL in ``host`` (the whole URL,
  ``postgresql+psycopg://host:5432/db``) or ``extra.uri``; login/password fill the URL's user and
  password when it has none.
* ``extra.timeout``: seconds the catalog may take to answer (default 60), for every kind; a
  number, or its text as the connection form stores it. ``extra.meta_namespace``: where the
  migration runner keeps history (:func:`connection_meta_namespace`).

Connection type ``iceberg``, of the official Iceberg provider
(``apache-airflow-providers-apache-iceberg``), is opened exactly as that provider's ``IcebergHook``
(2.1) opens it, so its users can reuse their connections:
``load_catalog(<connection id>, **properties)``, the properties being the whole extra, the host
(trailing ``/`` stripped, no scheme added) as ``uri``, ``type`` ``rest`` unless the extra names one,
and for ``rest`` the ``credential`` ``login:password`` when both are set (see
:func:`~iceberg_ops_provider.core.pyiceberg_catalogs.official_connection_arguments`). Every catalog
type PyIceberg supports opens that way. Only ``timeout`` and ``meta_namespace`` are taken out of the
extra, as for ``iceberg_ops``; the bound, the error translation and the masking of this project
apply to both types.

Every secret built or passed on is masked in task logs: the password, the ``credential``, the
password in a ``uri``, and every option whose key (or an enclosing key) names a secret.

The command line's ``--conn-id`` (and ``airflow_conn_id:`` in ``iceberg-ops.yaml``) reads a
connection through :meth:`IcebergCatalogHook.catalog_spec`, so the CLI and the tasks build the same
catalog from it.
"""

from __future__ import annotations

from collections.abc import Mapping
from functools import cached_property
from typing import TYPE_CHECKING, Any
from urllib.parse import quote, quote_plus, unquote, urlsplit, urlunsplit

from airflow.sdk import BaseHook

from iceberg_ops_provider.core.catalog import CatalogFactory
from iceberg_ops_provider.core.pyiceberg_catalogs import PYICEBERG_KIND, official_connection_arguments
from iceberg_ops_provider.errors import CatalogConfigError

if TYPE_CHECKING:
    from pyiceberg.catalog import Catalog

__all__ = ["CONN_TYPE", "IcebergCatalogHook", "catalog_options"]

CONN_TYPE = "iceberg_ops"
OFFICIAL_CONN_TYPE = "iceberg"
# Any option whose key mentions one of these is masked (over-masking an id is cheaper than leaking a key).
_SECRET_WORDS = ("secret", "password", "token", "credential", "key", "session", "private", "authorization", "sas")


def _mask(value: str) -> None:
    from airflow.sdk.log import mask_secret

    mask_secret(value)


def connection_meta_namespace(conn: Any) -> str | None:
    """The ``meta_namespace`` a connection's extra names, if any (where migration history and locks live)."""
    for key, value in (conn.extra_dejson or {}).items():
        for prefix in (f"extra__{CONN_TYPE}__", f"extra__{OFFICIAL_CONN_TYPE}__"):
            key = key.removeprefix(prefix)
        if key == "meta_namespace" and value not in (None, ""):
            return str(value)
    return None


def catalog_options(conn: Any) -> tuple[str, dict[str, Any]]:
    """The :meth:`CatalogFactory.build` kind and options for an Airflow Connection (``iceberg_ops`` or ``iceberg``).

    An ``iceberg_ops`` connection gives its ``kind`` (see the module's description). An ``iceberg``
    connection gives kind ``pyiceberg`` and, as options, the catalog's ``name`` (the connection id)
    and the properties the official Iceberg provider passes to ``load_catalog`` (see
    :func:`~iceberg_ops_provider.core.pyiceberg_catalogs.official_connection_arguments`), without
    ``timeout`` and ``meta_namespace``, which are this project's.

    Returns:
        ``(kind, options)``; secrets among the options are already masked for Airflow's logs.

    Raises:
        CatalogConfigError: An ``iceberg`` connection whose extra sets ``name`` (the official
            provider cannot open it either).
    """
    if conn.conn_type == OFFICIAL_CONN_TYPE:
        kind, options = _official_options(conn)
    else:
        kind, options = _iceberg_ops_options(conn)
    _mask_secrets(options)
    if conn.password:
        _mask(conn.password)
    return kind, options


def _iceberg_ops_options(conn: Any) -> tuple[str, dict[str, Any]]:
    """Kind and options of an ``iceberg_ops`` connection (any connection that is not ``iceberg``)."""
    extra = {}
    for key, value in (conn.extra_dejson or {}).items():
        for prefix in (f"extra__{CONN_TYPE}__", f"extra__{OFFICIAL_CONN_TYPE}__"):
            key = key.removeprefix(prefix)
        if value not in (None, ""):
            extra[key] = value
    kind = str(extra.pop("kind", "rest")).lower()
    if kind != PYICEBERG_KIND:
        extra.pop("type", None)
    extra.pop("meta_namespace", None)  # where the runner keeps history (see connection_meta_namespace)
    options: dict[str, Any] = dict(extra)
    if isinstance(options.get("timeout"), str):
        options["timeout"] = _number(options["timeout"])
    if kind == "sql":
        options = _sql_options(conn, options)
    elif conn.host and kind != "sqlite":
        options.setdefault("uri", _uri(conn.host, conn.port))
    if (conn.login or conn.password) and kind in ("rest", "s3tables"):
        options.setdefault("credential", f"{conn.login or ''}:{conn.password or ''}")
    return kind, options


def _official_options(conn: Any) -> tuple[str, dict[str, Any]]:
    """Kind ``pyiceberg`` and the ``load_catalog`` arguments of an ``iceberg`` connection, as the official hook's."""
    extra = dict(conn.extra_dejson or {})
    ours: dict[str, Any] = {}
    for key in list(extra):
        plain = key.removeprefix(f"extra__{OFFICIAL_CONN_TYPE}__")
        if plain in ("timeout", "meta_namespace"):
            ours[plain] = extra.pop(key)
    if "name" in extra:
        raise CatalogConfigError(
            f"The extra of Airflow connection {conn.conn_id!r} (type {OFFICIAL_CONN_TYPE!r}) sets 'name': an "
            f"{OFFICIAL_CONN_TYPE!r} connection's catalog is named after the connection, and the official Iceberg "
            "provider cannot open this connection either. Remove 'name' from the extra."
        )
    name, properties = official_connection_arguments(
        conn.conn_id, host=conn.host, login=conn.login, password=conn.password, extra=extra
    )
    options: dict[str, Any] = {"name": name, **properties}
    timeout = ours.get("timeout")
    if timeout not in (None, ""):
        options["timeout"] = _number(timeout) if isinstance(timeout, str) else timeout
    return PYICEBERG_KIND, options


def _mask_secrets(options: Mapping[str, Any], path: str = "") -> None:
    """Mask every text value whose key (or an enclosing key) names a secret, and the password in ``uri``."""
    for key, value in options.items():
        name = f"{path}.{key}" if path else str(key)
        if isinstance(value, Mapping):
            _mask_secrets(value, name)
        elif isinstance(value, str) and any(word in name.lower() for word in _SECRET_WORDS):
            _mask(value)
        elif isinstance(value, str) and name == "uri":
            _mask_url_password(value)


def _mask_url_password(uri: str) -> None:
    """Mask the password of a URL's user info, as written and decoded (a SQLAlchemy URL's in all its forms)."""
    try:
        written = urlsplit(uri.strip()).password
    except ValueError:
        return
    if written:
        password = unquote(written)
        for form in {written, password, quote(password, safe=" +"), quote_plus(password)}:
            _mask(form)


def _sql_options(conn: Any, options: dict[str, Any]) -> dict[str, Any]:
    """Options of a ``sql`` catalog: ``extra.uri``, else the host as the whole SQLAlchemy URL, with login/password.

    The connection's login and password go into the URL only where it has no user or password of its
    own. A password in the URL, however it got there, is masked in task logs, as written and as the
    URL encodes it.
    """
    uri = options.get("uri") or conn.host
    if not isinstance(uri, str) or not uri.strip():
        return options
    from sqlalchemy.engine import make_url
    from sqlalchemy.exc import ArgumentError

    try:
        url = make_url(uri.strip())
    except ArgumentError:  # CatalogFactory refuses it, naming what a SQLAlchemy URL looks like
        return {**options, "uri": uri}
    if url.username is None and conn.login:
        url = url.set(username=conn.login)
    if url.password is None and conn.password:
        url = url.set(password=conn.password)
    if url.password:
        password = str(url.password)
        for form in {password, quote(password, safe=" +"), quote_plus(password)}:  # SQLAlchemy keeps " " and "+"
            _mask(form)
    return {**options, "uri": url.render_as_string(hide_password=False)}


def _number(text: str) -> float | str:
    """``text`` as a number when it is one; otherwise unchanged, for ``CatalogFactory`` to refuse by name."""
    try:
        return float(text.strip())
    except ValueError:
        return text


def _uri(host: str, port: int | None) -> str:
    """The connection's host as a URI: ``https://`` unless a scheme is given; the port goes into the netloc."""
    parts = urlsplit(host if "://" in host else f"https://{host}")
    if port and parts.port is None:
        parts = parts._replace(netloc=f"{parts.netloc}:{port}")
    return urlunsplit(parts)


class IcebergCatalogHook(BaseHook):
    """A PyIceberg catalog from an Airflow Connection, built lazily once per hook.

    Args:
        iceberg_conn_id: The connection id (default ``iceberg_ops_default``).
    """

    conn_name_attr = "iceberg_conn_id"
    default_conn_name = "iceberg_ops_default"
    conn_type = CONN_TYPE
    hook_name = "Apache Iceberg (iceberg-ops)"

    def __init__(self, iceberg_conn_id: str = default_conn_name, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.iceberg_conn_id = iceberg_conn_id

    def catalog_spec(self) -> tuple[str, dict[str, Any]]:
        """The :meth:`CatalogFactory.build` kind and options of the connection, read now.

        Raises:
            AirflowNotFoundException: Airflow does not know the connection.
        """
        return catalog_options(self.get_connection(self.iceberg_conn_id))

    @cached_property
    def catalog(self) -> Catalog:
        """The catalog (built on first use)."""
        kind, options = self.catalog_spec()
        if kind == PYICEBERG_KIND:
            self.log.info(
                "Opening %s catalog of connection %r with PyIceberg's load_catalog",
                options.get("type") or "PyIceberg",
                self.iceberg_conn_id,
            )
        else:
            self.log.info("Opening %s catalog of connection %r", kind, self.iceberg_conn_id)
        return CatalogFactory.build(kind, **options)

    def meta_namespace(self) -> str | None:
        """The ``meta_namespace`` set in the connection's extra, if any."""
        return connection_meta_namespace(self.get_connection(self.iceberg_conn_id))

    def get_conn(self) -> Catalog:
        """The PyIceberg catalog of the connection."""
        return self.catalog

    def test_connection(self) -> tuple[bool, str]:
        """Really talk to the catalog: list its namespaces."""
        try:
            namespaces = self.get_conn().list_namespaces()
        except Exception as exc:
            return False, f"{type(exc).__name__}: {exc}"
        return True, f"Connected; the catalog has {len(namespaces)} top-level namespace(s)."

    @classmethod
    def get_ui_field_behaviour(cls) -> dict[str, Any]:
        """Connection form layout for Airflow 3.1 (3.2+ reads the provider info's ``ui-field-behaviour``)."""
        return {
            "hidden_fields": ["schema", "port"],
            "relabeling": {"host": "Catalog URI", "login": "Client ID", "password": "Client secret"},
            "placeholders": {
                "host": "https://polaris.example.com/api/catalog (empty for sqlite and glue)",
                "extra": '{"kind": "rest", "warehouse": "analytics"}',
            },
        }

    @classmethod
    def get_connection_form_widgets(cls) -> dict[str, Any]:
        """Connection form fields for Airflow 3.1 (3.2+ reads the provider info's ``conn-fields``)."""
        from wtforms import StringField

        return {
            "kind": StringField("Catalog kind (sqlite, sql, rest, glue, hive, s3tables; or a PyIceberg type)"),
            "warehouse": StringField("Warehouse (location, or table bucket ARN for s3tables)"),
            "region": StringField("Region (glue, s3tables)"),
            "db_path": StringField("SQLite database path (sqlite)"),
            "warehouse_dir": StringField("SQLite warehouse folder (sqlite)"),
            "timeout": StringField("Timeout in seconds for catalog requests (default 60)"),
        }
