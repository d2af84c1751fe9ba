"""IcebergCatalogHook: a PyIceberg catalog from an Airflow Connection (``iceberg_ops``, or the official ``iceberg``).

Both types are parsed by :func:`~iceberg_ops_provider.catalogs.from_connection` and opened by
:func:`~iceberg_ops_provider.catalogs.open_catalog`; every secret of the connection is masked in task logs.
"""

from __future__ import annotations

from functools import cached_property
from typing import TYPE_CHECKING, Any

from airflow.sdk import BaseHook

from iceberg_ops_provider.catalogs import (
    CONN_TYPE,
    OFFICIAL_CONN_TYPE,
    Access,
    CatalogFailure,
    CatalogSpec,
    from_connection,
    open_catalog,
    without_classes,
)
from iceberg_ops_provider.catalogs import connection_meta_namespace as _meta_namespace
from iceberg_ops_provider.catalogs import failure as _failure
from iceberg_ops_provider.hooks.connection_form import CONNECTION_TYPE

if TYPE_CHECKING:
    from pyiceberg.catalog import Catalog

__all__ = ["CONN_TYPE", "OFFICIAL_CONN_TYPE", "IcebergCatalogHook", "connection_spec", "failure_sentence"]


def connection_meta_namespace(conn: Any) -> str | None:
    """The ``meta_namespace`` a connection's extra names, if any (where migration history and locks live)."""
    return _meta_namespace(conn.extra_dejson)


def connection_spec(conn: Any) -> CatalogSpec:
    """The catalog of an Airflow connection (``iceberg_ops`` or ``iceberg``); its secrets masked in task logs."""
    spec = from_connection(
        conn.conn_id,
        conn.conn_type,
        host=conn.host,
        port=conn.port,
        login=conn.login,
        password=conn.password,
        extra=conn.extra_dejson,
    )
    from airflow.sdk.log import mask_secret

    for secret in (*spec.secret_values(), conn.password):
        if secret:
            mask_secret(secret)
    return spec


_FAILURES = {
    "timeout": "did not answer within {timeout} s",
    "unreachable": "could not be reached",
    "unavailable": "answered that it is unavailable",
    "busy": "is busy (its database is locked, or its connection broke)",
    "credentials": "refused the credentials, or none were found",
    "missing": "does not exist where the connection points",
    "not-a-catalog": "answered, but not as an Iceberg catalog",
    "no-warehouse": "has no such warehouse",
    "redirect": "answered with a redirect, or a configuration, moving it to another address, which is not followed",
    "too-large": "sent an answer too large to read",
    "compressed": "sent a compressed answer, which is not decompressed",
    "import": "named a class to import (in its configuration or a table), which is refused",
    "setting": "answered with a configuration setting how requests are signed or authenticated, which is refused",
    "configuration": "is not configured in a way that can work",
    "not-found": "has no such namespace or table",
    "conflict": "refused a change made at the same time",
    "server-error": "failed on its side",
    "refused": "refused the request",
    "error": "could not be read",
}


def failure_sentence(failure: CatalogFailure, spec: CatalogSpec) -> str:
    """What went wrong with a connection's catalog, from facts alone: never a server's words or a secret."""
    if spec.problems:  # this project's own words about the connection's settings: no secret, nothing remote
        return (
            f"Connection {spec.source.where!r} cannot be opened: "
            + "; ".join(str(problem.text) for problem in spec.problems)
            + "."
        )
    what = _FAILURES.get(failure.kind, _FAILURES["error"]).format(timeout=f"{failure.timeout or spec.timeout:g}")
    status = f" (HTTP {failure.status_class})" if failure.status_class else ""
    return f"The catalog of connection {spec.source.where!r} {what}{status}."


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

    def catalog_spec(self) -> CatalogSpec:
        """The connection's catalog, described (read now); its secrets masked in task logs.

        Raises:
            AirflowNotFoundException: Airflow does not know the connection.
        """
        return connection_spec(self.get_connection(self.iceberg_conn_id))

    def catalog_for(self, access: Access = "write") -> Catalog:
        """The connection's catalog, opened for ``access`` (``read``, ``write`` or ``create``) on first use."""
        opened = self._opened.get(access)
        if opened is None:
            spec = self.catalog_spec()
            self.log.info(
                "Opening the %s catalog of connection %r (%s)",
                spec.catalog_type or spec.kind,
                self.iceberg_conn_id,
                access,
            )
            opened = self._opened[access] = open_catalog(spec, access=access)
        return opened

    @cached_property
    def _opened(self) -> dict[str, Catalog]:
        return {}

    @property
    def catalog(self) -> Catalog:
        """The catalog, opened on first use to create what is missing (as :meth:`get_conn`)."""
        return self.catalog_for("create")

    def meta_namespace(self) -> str | None:
        """The ``meta_namespace`` set in the connection's extra, if any."""
        return connection_meta_namespace(self.get_connection(self.iceberg_conn_id))

    def get_conn(self) -> Catalog:
        """The PyIceberg catalog of the connection (created where it does not exist yet)."""
        return self.catalog

    def test_connection(self) -> tuple[bool, str]:
        """Ask the catalog for its namespaces, creating nothing; a failure is worded from facts alone.

        The test runs in the api-server: a connection naming a class to import (``py-io-impl``, ...) fails it.
        """
        spec = without_classes(self.catalog_spec())
        try:
            namespaces = open_catalog(spec, access="read").list_namespaces()
        except Exception as exc:
            facts = _failure(exc, spec)
            # The facts, not the exception: its text and traceback may hold a server's answer, or a URL's query.
            self.log.warning("Connection test of %r failed: %s (%s)", self.iceberg_conn_id, facts.kind, facts.error)
            return False, failure_sentence(facts, spec)
        return True, f"Connected; the catalog has {len(namespaces)} top-level namespace(s)."

    @classmethod
    def get_ui_field_behaviour(cls) -> dict[str, Any]:
        """Connection form layout for Airflow 3.1, from the provider info's ``ui-field-behaviour`` (3.2+)."""
        return {key.replace("-", "_"): value for key, value in CONNECTION_TYPE["ui-field-behaviour"].items()}

    @classmethod
    def get_connection_form_widgets(cls) -> dict[str, Any]:
        """Connection form fields for Airflow 3.1, from the provider info's ``conn-fields`` (3.2+)."""
        from wtforms import StringField

        fields = CONNECTION_TYPE["conn-fields"].items()
        return {name: StringField(field["label"], description=field.get("description", "")) for name, field in fields}
