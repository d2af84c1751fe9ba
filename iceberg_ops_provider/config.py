"""The project file ``iceberg-ops.yaml``: which catalog, namespace and folders a project uses.

Example::

    catalog:
      kind: sqlite            # sqlite | sql | glue | rest | hive | s3tables; or `name: <catalog>`
      # options of that kind (uri, warehouse, warehouse_dir, region, db_path, ...)
      timeout: 60             # seconds one request to the catalog may take (any kind; default 60)
    namespace: sales
    migrations_dir: migrations
    models_dir: models
    meta_namespace: _iceberg_ops

Instead of ``catalog:``, ``airflow_conn_id: <connection id>`` describes the catalog by an Airflow
connection, read as :class:`~iceberg_ops_provider.hooks.catalog.IcebergCatalogHook` reads it, so the
project file holds no secrets (needs Apache Airflow). This module never imports Airflow: whoever
builds the configuration hands it a :data:`ConnectionReader` (``connection_reader=`` of
:func:`load_config`); the command line hands it
:func:`~iceberg_ops_provider.cli.airflow_connections.read_airflow_connection`.

Every key is optional until a command needs it. :attr:`ProjectConfig.catalog_spec` is the catalog's
:class:`~iceberg_ops_provider.catalogs.CatalogSpec` (relative paths resolve against the folder of the
file; a bad option is a problem of the spec, named where it is set); the file must be UTF-8 text, and
a file that cannot be read, decoded or parsed is a :class:`~iceberg_ops_provider.errors.ProjectConfigError`
naming it (and the line and column where it stops being YAML: :func:`yaml_document`, which the table
models read their files with too).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeAlias

import yaml

from iceberg_ops_provider.catalogs import (
    KINDS,
    Access,
    CatalogSpec,
    check_timeout,
    empty_catalog,
    from_file,
    open_catalog,
)
from iceberg_ops_provider.core.name_hints import closest
from iceberg_ops_provider.errors import ProjectConfigError
from iceberg_ops_provider.messages import Setting, message

if TYPE_CHECKING:
    from pyiceberg.catalog import Catalog

__all__ = ["CATALOG_KINDS", "CONFIG_FILE", "ConnectionReader", "ProjectConfig", "load_config", "yaml_document"]

CONFIG_FILE = "iceberg-ops.yaml"

ConnectionReader: TypeAlias = Callable[[str, Setting], CatalogSpec]
"""Reads an Airflow connection: ``reader(conn_id, setting)`` returns its catalog's spec.

``setting`` says where the id was given (``airflow_conn_id:`` in the project file, or the command
line's option), for the reader's messages. It raises :class:`~iceberg_ops_provider.errors.ProjectConfigError` for a
connection that is not defined, and :class:`~iceberg_ops_provider.errors.MissingAirflowError` when
Airflow is not installed. The command line's is
:func:`~iceberg_ops_provider.cli.airflow_connections.read_airflow_connection`.
"""

_KEYS = {"catalog", "airflow_conn_id", "namespace", "migrations_dir", "models_dir", "meta_namespace"}

_IN_MEMORY_KINDS = ("memory", "in-memory")
"""Catalog kinds (and PyIceberg types) whose state is gone when the command exits: refused here."""

CATALOG_KINDS: tuple[str, ...] = tuple(kind for kind in KINDS if kind not in _IN_MEMORY_KINDS)
"""The kinds a project file's ``catalog.kind`` (and the command line's ``--catalog``) may name.

Every kind without ``memory``, whose state is gone when the command exits; ``name:``
(``--catalog-name``) opens any other catalog PyIceberg can load.
"""


@dataclass(frozen=True)
class ProjectConfig:
    """A project's settings, with command-line overrides applied.

    Attributes:
        path: The configuration file, or ``None`` when there is none.
        root: The folder relative paths resolve against.
        catalog: The ``catalog:`` mapping (``{"kind": ..., **options}`` or ``{"name": ..., **options}``);
            with :attr:`airflow_conn_id` it holds at most ``timeout``.
        namespace: The namespace to migrate, if set.
        migrations_dir: The migrations folder.
        models_dir: The models folder.
        meta_namespace: Where history and locks live (``None``: ``_iceberg_ops``, or ``iceberg_ops`` on S3 Tables).
        airflow_conn_id: The Airflow connection the catalog is described by (``airflow_conn_id:``, or
            the command line's), instead of :attr:`catalog`.
        connection_reader: How :attr:`airflow_conn_id` is read (see :data:`ConnectionReader`);
            ``None``: a configuration with an Airflow connection cannot open its catalog.
        catalog_flags: The catalog settings the command line gave over the file.
        catalog_role: ``catalog``, or ``target`` for the second catalog of a move.
    """

    path: Path | None
    root: Path
    catalog: dict[str, Any] = field(default_factory=lambda: {"kind": "sqlite"})
    namespace: str | None = None
    migrations_dir: Path = Path("migrations")
    models_dir: Path = Path("models")
    meta_namespace: str | None = None
    airflow_conn_id: str | None = None
    connection_reader: ConnectionReader | None = field(default=None, compare=False, repr=False)
    catalog_flags: frozenset[str] = frozenset()
    catalog_role: str = "catalog"

    def require_namespace(self) -> str:
        """The namespace, or a clear error saying how to give one."""
        if not self.namespace:
            raise ProjectConfigError(
                f"No namespace given: pass --namespace NS or set `namespace:` in {self.path or CONFIG_FILE}."
            )
        return self.namespace

    @cached_property
    def catalog_spec(self) -> CatalogSpec:
        """The catalog's description: the file's ``catalog:`` (with the command line's settings), or the connection.

        Raises:
            ProjectConfigError: A connection that cannot be read (no reader, not defined).
            MissingAirflowError: :attr:`airflow_conn_id` is set and Airflow is not installed.
        """
        if self.airflow_conn_id:
            spec = self._connection_spec()
            timeout = self.catalog.get("timeout")
            if timeout is not None:
                seconds = check_timeout(timeout)
                flagged = "timeout" in self.catalog_flags
                spec = (
                    spec.with_timeout(seconds, flagged=flagged)
                    if seconds
                    else spec.with_problem(
                        "timeout",
                        f"the timeout {timeout!r} is not a number of seconds greater than 0 and at most a week",
                    )
                )
        else:
            spec = from_file(
                self.catalog, file=self.path, root=self.root, flags=self.catalog_flags, role=self.catalog_role
            )
        if spec.kind in _IN_MEMORY_KINDS or spec.catalog_type in _IN_MEMORY_KINDS:
            spec = spec.with_problem(
                "kind",
                f"the {spec.kind if spec.kind in _IN_MEMORY_KINDS else spec.catalog_type!r} catalog cannot be used "
                "from a project: its state is gone when the command exits; use kind 'sqlite' for a local catalog",
            )
        return spec

    @property
    def catalog_timeout(self) -> float:
        """Seconds one request to the catalog may take (the spec's timeout)."""
        return self.catalog_spec.timeout

    def open_catalog(self, *, access: Access = "write") -> Catalog:
        """Open the configured catalog for ``access`` (see :func:`~iceberg_ops_provider.catalogs.open_catalog`).

        Before anything created the project's own SQLite database (``local_data/`` beside the file,
        no ``db_path`` named), a caller that creates nothing (``read``, ``write``) finds an empty
        catalog: nothing was applied there yet, there is nothing to change, and nothing is created to
        say so. A database someone named and that does not exist is refused.
        """
        if access != "create" and self._not_created_yet():
            return empty_catalog()
        return open_catalog(self.catalog_spec, access=access)

    def _not_created_yet(self) -> bool:
        spec = self.catalog_spec
        own = not self.airflow_conn_id and spec.kind == "sqlite" and "db_path" not in self.catalog
        return own and not spec.problems and spec.database is not None and not spec.database.exists()

    def _connection_spec(self) -> CatalogSpec:
        """The spec of :attr:`airflow_conn_id`, read by :attr:`connection_reader` (Airflow is imported there, not here).

        Raises:
            ProjectConfigError: No reader was given, or the connection is not defined.
            MissingAirflowError: Airflow is not installed.
        """
        conn_id = str(self.airflow_conn_id)
        flagged = "airflow_conn_id" in self.catalog_flags
        setting = Setting(
            "airflow_conn_id", "file" if self.path else "flags", str(self.path or ""), self.catalog_role, flagged
        )
        if self.connection_reader is None:
            raise ProjectConfigError(
                message(
                    f"Airflow connection {conn_id!r} ({{setting}}) cannot be read: this configuration was built "
                    "without a connection reader. From Python, pass connection_reader= to load_config(), e.g. "
                    "read_airflow_connection from iceberg_ops_provider.cli.airflow_connections; or run the "
                    "iceberg-ops command line, which reads it.",
                    setting=setting,
                )
            )
        return self.connection_reader(conn_id, setting)


def _string(path: Path, key: str, value: Any) -> str:
    if not isinstance(value, str) or not value.strip():
        raise ProjectConfigError(f"{path}: '{key}' must be a non-empty string, got {value!r}.")
    return value


def load_config(
    path: str | Path | None = None, *, required: bool = True, connection_reader: ConnectionReader | None = None
) -> ProjectConfig:
    """Read ``iceberg-ops.yaml`` (``path``, default ``./iceberg-ops.yaml``).

    Args:
        path: The file.
        required: Raise when it does not exist; otherwise return defaults rooted in the working directory.
        connection_reader: How an Airflow connection (``airflow_conn_id:``, or the command line's
            ``--conn-id``) is read; see :data:`ConnectionReader`.

    Raises:
        ProjectConfigError: Missing file (when required), a folder, unreadable, not UTF-8, not
            YAML, unknown key or bad value; the message names the file and the key.
    """
    file = Path(path) if path is not None else Path.cwd() / CONFIG_FILE
    if file.is_dir() and required:
        raise ProjectConfigError(
            f"Configuration file {file} is a folder; pass the project file itself, e.g. --config {file / CONFIG_FILE}."
        )
    if not file.is_file():
        if required:
            raise ProjectConfigError(
                f"Configuration file {file} not found. Run `iceberg-ops init` to create one, or pass --config PATH."
            )
        root = file.parent.resolve()
        return ProjectConfig(
            path=None,
            root=root,
            migrations_dir=root / "migrations",
            models_dir=root / "models",
            connection_reader=connection_reader,
        )
    raw = _read_yaml(file)
    if not isinstance(raw, dict):
        raise ProjectConfigError(f"{file}: expected a mapping of settings, got {type(raw).__name__}.")
    unknown = sorted(set(raw) - _KEYS)
    if unknown:
        guesses = [f"{guess!r} for {key!r}" for key in unknown if (guess := closest(key, _KEYS))]
        hint = f" Did you mean {', '.join(guesses)}?" if guesses else ""
        raise ProjectConfigError(f"{file}: unknown key(s) {unknown}; valid keys: {sorted(_KEYS)}.{hint}")
    if "airflow_conn_id" in raw and "catalog" in raw:
        raise ProjectConfigError(
            f"{file}: set either `catalog:` or `airflow_conn_id:`, not both; the Airflow connection describes the "
            "catalog (its timeout included)."
        )
    catalog = raw.get("catalog") or ({} if "airflow_conn_id" in raw else {"kind": "sqlite"})
    if not isinstance(catalog, dict):
        raise ProjectConfigError(f"{file}: 'catalog' must be a mapping such as {{kind: sqlite}}, got {catalog!r}.")
    if "kind" in catalog and "name" in catalog:
        raise ProjectConfigError(f"{file}: 'catalog' takes either 'kind' or 'name', not both.")
    for key, value in catalog.items():
        if isinstance(value, dict | list) or value is None:
            raise ProjectConfigError(f"{file}: catalog option {key!r} must be a single value, got {value!r}.")
    root = file.parent.resolve()
    settings: dict[str, Any] = {"catalog": dict(catalog)}
    if "airflow_conn_id" in raw:
        settings["airflow_conn_id"] = _string(file, "airflow_conn_id", raw["airflow_conn_id"])
    if "namespace" in raw:
        settings["namespace"] = _string(file, "namespace", raw["namespace"])
    if "meta_namespace" in raw:
        settings["meta_namespace"] = _string(file, "meta_namespace", raw["meta_namespace"])
    for key in ("migrations_dir", "models_dir"):
        if key in raw:
            folder = Path(_string(file, key, raw[key])).expanduser()
            settings[key] = folder if folder.is_absolute() else root / folder
        else:
            settings[key] = root / ("migrations" if key == "migrations_dir" else "models")
    return ProjectConfig(path=file.resolve(), root=root, connection_reader=connection_reader, **settings)


def _read_yaml(file: Path) -> Any:
    """The YAML document of ``file``, or a :class:`ProjectConfigError` naming the file and what is wrong."""
    try:
        data = file.read_bytes()
    except OSError as exc:
        raise ProjectConfigError(
            f"Configuration file {file} could not be read ({exc.strerror or exc}); check its permissions."
        ) from exc
    return yaml_document(data, file, ProjectConfigError) or {}


def yaml_document(data: bytes, source: object, error: Callable[[str], Exception]) -> Any:
    """The YAML document in ``data``, the bytes of file ``source``; raises ``error(message)`` if it is not one.

    The message names the file and where the problem is, for the project file and the table models
    (:func:`~iceberg_ops_provider.autogen.models.load_model`) alike:
    ``<source>: not UTF-8 text (byte 0xe9 on line 2); save the file as UTF-8.`` or
    ``<source>: not valid YAML (line 5, column 1): could not find expected ':' (while scanning a simple
    key on line 4, column 1)`` (counted from 1; the second place, where the construct the parser was
    reading began, when it is on another line).
    """
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        line = data[: exc.start].count(b"\n") + 1
        raise error(
            f"{source}: not UTF-8 text (byte 0x{data[exc.start]:02x} on line {line}); save the file as UTF-8."
        ) from exc
    try:
        return yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        where = f" (line {mark.line + 1}, column {mark.column + 1})" if mark is not None else ""
        context, start = getattr(exc, "context", None), getattr(exc, "context_mark", None)
        if context and start is not None and (mark is None or start.line != mark.line):
            problem = f"{problem} ({context} on line {start.line + 1}, column {start.column + 1})"
        raise error(f"{source}: not valid YAML{where}: {problem}") from exc
