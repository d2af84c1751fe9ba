"""The command line's catalog options over the project file: one parser for the global and the ``--target-*`` ones.

The options change the file's ``catalog:`` mapping (they win over it), remembering which settings they
gave, so that a message names the option that set one.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path

from iceberg_ops_provider.config import ProjectConfig
from iceberg_ops_provider.errors import ProjectConfigError
from iceberg_ops_provider.messages import Setting

__all__ = ["FLAG_OF", "CatalogFlags", "flag", "setting_words", "with_flags"]

FLAG_OF = {
    "airflow_conn_id": "--conn-id",
    "kind": "--catalog",
    "name": "--catalog-name",
    "uri": "--catalog-uri",
    "db_path": "--db-path",
    "warehouse_dir": "--warehouse",
    "warehouse": "--warehouse",
    "timeout": "--catalog-timeout",
}
"""The option that sets each catalog setting (a move's target adds ``target-``: ``--target-db-path``)."""


@dataclass(frozen=True)
class CatalogFlags:
    """The catalog options of one invocation, as given (``None``: not given)."""

    conn_id: str | None = None
    kind: str | None = None
    name: str | None = None
    uri: str | None = None
    db_path: str | None = None
    warehouse: str | None = None
    timeout: float | None = None

    def any_given(self) -> bool:
        """Whether an option names a catalog by itself (without a project file)."""
        return any((self.conn_id, self.kind, self.name, self.uri, self.db_path))


def setting_words(fact: Setting) -> str:
    """A catalog setting as the command line words it: its option when the command line gave it (always a target's)."""
    if fact.key in FLAG_OF and (fact.flagged or fact.source == "flags" or fact.role == "target"):
        return flag(fact.key, fact.role)
    if fact.source == "flags" and not fact.key:
        return "the catalog options"
    return fact.python


def flag(key: str, role: str = "catalog") -> str:
    """The option of setting ``key`` for the catalog of ``role`` (``--target-db-path`` for a target's ``db_path``)."""
    option = FLAG_OF.get(key, f"--{key.replace('_', '-')}")
    return option.replace("--", "--target-", 1) if role == "target" else option


def with_flags(config: ProjectConfig, flags: CatalogFlags, *, role: str = "catalog") -> ProjectConfig:
    """``config`` with the catalog options applied (they win over the file).

    The file's ``catalog.timeout`` survives ``--catalog``/``--catalog-name``. ``--warehouse`` is the
    ``warehouse_dir`` of a ``sqlite`` catalog, and of a ``sql`` one unless it is a URI (its ``warehouse``).

    Raises:
        ProjectConfigError: Two options that each choose the catalog, or an option that does not apply
            to the catalog chosen.
    """
    chosen = [
        flag(key, role)
        for key, value in (("airflow_conn_id", flags.conn_id), ("kind", flags.kind), ("name", flags.name))
        if value
    ]
    if len(chosen) > 1:
        raise ProjectConfigError(
            f"Pass only one of {' and '.join(chosen)}: each chooses the catalog ({flag('airflow_conn_id', role)} "
            f"from an Airflow connection, {flag('kind', role)} a kind configured in the project file, "
            f"{flag('name', role)} a catalog PyIceberg loads by name)."
        )
    catalog = dict(config.catalog)
    given: set[str] = set()
    timeout = catalog.get("timeout")
    airflow_conn_id = config.airflow_conn_id
    if flags.conn_id:
        # The connection holds the catalog's options, its timeout included; only the timeout option wins over it.
        catalog, timeout, airflow_conn_id = {}, None, flags.conn_id
        given.add("airflow_conn_id")
    elif flags.name:
        catalog, airflow_conn_id = {"name": flags.name}, None
        given.add("name")
    elif flags.kind:
        same_kind = str(catalog.get("kind", "")).lower() == flags.kind.lower()
        catalog = {**(catalog if same_kind else {}), "kind": flags.kind}
        catalog.pop("name", None)
        airflow_conn_id = None
        given.add("kind")
    if flags.timeout is not None:
        timeout = flags.timeout
        given.add("timeout")
    if timeout is not None:
        catalog["timeout"] = timeout
    kind = None if "name" in catalog else str(catalog.get("kind", "sqlite")).lower()
    if flags.uri:
        if airflow_conn_id:
            raise ProjectConfigError(
                f"{flag('uri', role)} does not apply to Airflow connection {airflow_conn_id!r}: its Host (or `uri` "
                "extra) holds the catalog's uri."
            )
        if kind in ("sqlite", "memory"):
            raise ProjectConfigError(
                f"{flag('uri', role)} does not apply to the {kind!r} catalog (it has {flag('db_path', role)} "
                f"instead); pass {flag('kind', role)} sql with it for a SQL database such as PostgreSQL, or "
                f"{flag('kind', role)} rest / hive."
            )
        catalog["uri"] = flags.uri
        given.add("uri")
    if flags.db_path or flags.warehouse:
        if airflow_conn_id:
            raise ProjectConfigError(
                f"{flag('db_path', role)} and {flag('warehouse', role)} apply to the sqlite catalog of the project "
                f"file, not to Airflow connection {airflow_conn_id!r}: set db_path and warehouse_dir in the "
                "connection's extra instead."
            )
        if flags.db_path and kind != "sqlite":
            raise ProjectConfigError(
                f"{flag('db_path', role)} applies to the sqlite catalog only (a sql catalog has {flag('uri', role)})."
            )
        if flags.warehouse and kind not in ("sqlite", "sql"):
            raise ProjectConfigError(f"{flag('warehouse', role)} applies to the sqlite and sql catalogs only.")
        if flags.db_path:
            catalog["db_path"] = str(Path(flags.db_path).expanduser().resolve())
            given.add("db_path")
        if flags.warehouse and (kind == "sqlite" or "://" not in flags.warehouse):
            catalog.pop("warehouse", None)
            local = "://" in flags.warehouse
            catalog["warehouse_dir"] = flags.warehouse if local else str(Path(flags.warehouse).expanduser().resolve())
            given.add("warehouse_dir")
        elif flags.warehouse:
            catalog.pop("warehouse_dir", None)
            catalog["warehouse"] = flags.warehouse
            given.add("warehouse")
    return replace(
        config,
        catalog=catalog,
        airflow_conn_id=airflow_conn_id,
        catalog_flags=config.catalog_flags | frozenset(given),
        catalog_role=role,
    )
