"""The project file ``iceberg-ops.yaml``: which catalog, namespace and folders a project uses.

Example::

    catalog:
      kind: sqlite            # sqlite | sql | glue | rest | hive | s3tables; or `name: <catalog>`
      # options of that kind (uri, warehouse, warehouse_dir, region, db_path, ...)
      timeout: 60             # seconds a remote catalog may take to answer (any kind; default 60)
    namespace: sales
    migrations_dir: migrations
    models_dir: models
    meta_namespace: _iceberg_ops

Instead of ``catalog:``, ``airflow_conn_id: <connection id>`` builds the catalog from an Airflow
connection, mapped exactly as :class:`~iceberg_ops_provider.hooks.catalog.IcebergCatalogHook` maps
it, so the project file holds no secrets (needs Apache Airflow; ``--conn-id`` does the same from
the command line). This module never imports Airflow: whoever builds the configuration hands it a
:data:`ConnectionReader` (``connection_reader=`` of :func:`load_config` or
:meth:`ProjectConfig.with_overrides`); the command line hands it
:func:`~iceberg_ops_provider.cli.airflow_connections.read_airflow_connection`.

Every key is optional until a command needs it. Relative paths resolve against the folder of the
file (``warehouse_dir``, and the database file of a ``sqlite:///relative/path`` URL of the ``sql``
kind); the SQLite kind keeps its database in ``local_data/`` there unless told otherwise. The file
must be UTF-8 text; a file that cannot be read, decoded or parsed is a
:class:`~iceberg_ops_provider.errors.ProjectConfigError` naming it (and the line and column where
it stops being YAML: :func:`yaml_document`, which the table models read their files with too). A
``kind`` it does not know lists :data:`CATALOG_KINDS`, the kinds the command line accepts.
"""

from __future__ import annotations

import difflib
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeAlias

import yaml

from iceberg_ops_provider.core.catalog import CatalogFactory
from iceberg_ops_provider.core.catalog_messages import redacted as _redacted
from iceberg_ops_provider.core.catalog_properties import check_option_names, pyiceberg_config_error
from iceberg_ops_provider.core.catalog_properties import configured_uri as _configured_uri
from iceberg_ops_provider.core.error_translation import catalog_errors
from iceberg_ops_provider.core.name_hints import closest
from iceberg_ops_provider.core.timeouts import (
    DEFAULT_CATALOG_TIMEOUT,
    bound_catalog_requests,
    call_with_timeout,
    check_timeout,
)
from iceberg_ops_provider.errors import (
    CatalogAuthError,
    CatalogConfigError,
    CatalogNotFoundError,
    ProjectConfigError,
    UnknownCatalogKindError,
)

if TYPE_CHECKING:
    from pyiceberg.catalog import Catalog

__all__ = ["CATALOG_KINDS", "CONFIG_FILE", "ConnectionReader", "ProjectConfig", "load_config", "yaml_document"]

CONFIG_FILE = "iceberg-ops.yaml"

ConnectionReader: TypeAlias = Callable[[str, str], tuple[str, dict[str, Any]]]
"""Reads an Airflow connection: ``reader(conn_id, source)`` returns the catalog's ``(kind, options)``.

``source`` says where the id was given (``--conn-id, or `airflow_conn_id:` in <file>``), for the
reader's messages. It raises :class:`~iceberg_ops_provider.errors.ProjectConfigError` for a
connection that is not defined, and :class:`~iceberg_ops_provider.errors.MissingAirflowError` when
Airflow is not installed. The command line's is
:func:`~iceberg_ops_provider.cli.airflow_connections.read_airflow_connection`.
"""

_KEYS = {"catalog", "airflow_conn_id", "namespace", "migrations_dir", "models_dir", "meta_namespace"}

_IN_MEMORY_KINDS = ("memory", "in-memory")
"""Catalog kinds (and PyIceberg types) whose state is gone when the command exits: refused here."""

CATALOG_KINDS: tuple[str, ...] = tuple(kind for kind in CatalogFactory.KINDS if kind not in _IN_MEMORY_KINDS)
"""The kinds a project file's ``catalog.kind`` (and the command line's ``--catalog``) may name.

:attr:`CatalogFactory.KINDS <iceberg_ops_provider.core.catalog.CatalogFactory.KINDS>` without
``memory``, whose state is gone when the command exits; ``name:`` (``--catalog-name``) opens any
other catalog PyIceberg can load. An unknown kind is an error listing these, not the factory's list.
"""

_KIND_ADVICE = "Or open any catalog PyIceberg can load by name: `name:` in the project file, or --catalog-name."


@dataclass(frozen=True)
class ProjectConfig:
    """A project's settings, with command-line overrides applied.

    Attributes:
        path: The configuration file, or ``None`` when there is none.
        root: The folder relative paths resolve against.
        catalog: ``{"kind": ..., **options}`` or ``{"name": ..., **options}``; either may hold
            ``timeout`` (seconds). With :attr:`airflow_conn_id` it holds at most ``timeout``
            (from ``--catalog-timeout``).
        namespace: The namespace to migrate, if set.
        migrations_dir: The migrations folder.
        models_dir: The models folder.
        meta_namespace: Where history and locks live (``None``: ``_iceberg_ops``, or ``iceberg_ops`` on S3 Tables).
        airflow_conn_id: The Airflow connection the catalog is built from (``--conn-id`` or
            ``airflow_conn_id:``), instead of :attr:`catalog`.
        connection_reader: How :attr:`airflow_conn_id` is read (see :data:`ConnectionReader`);
            ``None``: a configuration with an Airflow connection cannot open its catalog.
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

    def require_namespace(self) -> str:
        """The namespace, or a clear error saying how to give one."""
        if not self.namespace:
            raise ProjectConfigError(
                f"No namespace given: pass --namespace NS or set `namespace:` in {self.path or CONFIG_FILE}."
            )
        return self.namespace

    @property
    def catalog_timeout(self) -> float:
        """Seconds the catalog may take to answer: ``catalog.timeout``, else the default (60).

        With :attr:`airflow_conn_id`: ``--catalog-timeout``, else the connection's ``timeout``
        extra (reading the connection), else the default.
        """
        value = self.catalog.get("timeout")
        where, option = f"{self.path or CONFIG_FILE}", "catalog.timeout"
        if value is None and self.airflow_conn_id:
            value = self._connection_catalog[1].get("timeout")
            where, option = f"Airflow connection {self.airflow_conn_id!r}", "timeout"
        if value is None:
            return DEFAULT_CATALOG_TIMEOUT
        try:
            return check_timeout(value, option)
        except CatalogConfigError as exc:
            raise ProjectConfigError(f"{where}: {exc}") from exc

    @property
    def known_catalog_timeout(self) -> float | None:
        """:attr:`catalog_timeout` when it can be told without reading an Airflow connection, else ``None``.

        For messages about a failure, which must neither fail nor talk to Airflow themselves.
        """
        if self.airflow_conn_id and "timeout" not in self.catalog:
            if "_connection_catalog" not in self.__dict__:  # not read (yet, or reading it failed)
                return None
            value = self.__dict__["_connection_catalog"][1].get("timeout", DEFAULT_CATALOG_TIMEOUT)
        else:
            value = self.catalog.get("timeout", DEFAULT_CATALOG_TIMEOUT)
        try:
            return check_timeout(value)
        except CatalogConfigError:
            return None

    @property
    def catalog_uri(self) -> str:
        """The catalog's ``uri`` (or ``glue.endpoint``) when the configuration gives one (else empty), for messages.

        With :attr:`airflow_conn_id`, the connection's once it has been read.
        """
        options = self.catalog
        if self.airflow_conn_id and "_connection_catalog" in self.__dict__:
            options = self.__dict__["_connection_catalog"][1]
        uri = options.get("uri") or options.get("glue.endpoint")
        return _redacted(uri) if isinstance(uri, str) else ""  # a sql catalog's URL may hold a password

    def build_catalog(self, *, create: bool = True) -> Catalog:
        """Open the configured catalog, within :attr:`catalog_timeout`.

        Args:
            create: ``False`` (a command that only reads): a SQLite catalog database that was named
                (``db_path``, a ``sqlite:///`` ``uri``; in the file, an option or a connection) and
                does not exist is refused instead of created, no warehouse folder is created, and a
                ``sql`` catalog needs no warehouse (see :meth:`CatalogFactory.build`). The project's
                own default database (``local_data/`` next to the file) is created on first use
                either way.

        Raises:
            ProjectConfigError: The ``memory`` kind, or PyIceberg's ``in-memory`` (its state would be
                gone when the command exits); an Airflow connection that is not defined or does not
                describe a catalog, or that there is no :attr:`connection_reader` to read.
            MissingAirflowError: :attr:`airflow_conn_id` is set and Airflow is not installed (from the reader).
            UnknownCatalogKindError: A kind nobody knows, listing :data:`CATALOG_KINDS` (not the
                factory's list, which has ``memory``).
            CatalogConfigError, MissingExtraError: From :class:`CatalogFactory`.
            CatalogNotFoundError: ``create=False`` and the named SQLite database does not exist.
            CatalogAuthError: The catalog refused the credentials, or none were found.
            CatalogUnavailableError: The catalog could not be reached or did not answer in time.
        """
        if self.airflow_conn_id:
            return self._build_connection_catalog(create=create)
        options = dict(self.catalog)
        timeout = self.catalog_timeout
        options["timeout"] = timeout
        if "name" in options:
            return self._load_named_catalog(options)
        kind = str(options.pop("kind", "sqlite")).lower()
        if kind in _IN_MEMORY_KINDS:
            raise ProjectConfigError(
                f"The {kind!r} catalog cannot be used from the command line: its state is gone when the command "
                "exits. Use kind 'sqlite' for a local catalog."
            )
        if kind == "sqlite":
            create = create or "db_path" not in options  # the project's own database is made on first use
            options["db_path"] = self._resolve(options.get("db_path", Path("local_data") / "iceberg_catalog.db"))
            warehouse = options.get("warehouse_dir", Path("local_data") / "iceberg_warehouse")
            options["warehouse_dir"] = warehouse if "://" in str(warehouse) else self._resolve(warehouse)
        if kind == "sql":
            if "warehouse_dir" in options and "://" not in str(options["warehouse_dir"]):
                options["warehouse_dir"] = self._resolve(options["warehouse_dir"])
            if isinstance(options.get("uri"), str):
                options["uri"] = self._resolve_sqlite_url(options["uri"])
        if self.path is not None:  # a misspelt option can only come from the file: name it
            try:
                check_option_names(kind, [key for key in options if key != "timeout"])
            except CatalogConfigError as exc:
                raise CatalogConfigError(f"{self.path}, under `catalog:`: {exc}") from exc
        try:
            return CatalogFactory.build(kind, create=create, **options)
        except UnknownCatalogKindError as exc:  # the factory's list has kinds the command line refuses
            raise UnknownCatalogKindError(exc.kind, CATALOG_KINDS, advice=_KIND_ADVICE) from exc

    def _resolve_sqlite_url(self, uri: str) -> str:
        """``uri`` with the file of a ``sqlite:///relative/path`` URL resolved against :attr:`root`; others as given."""
        from sqlalchemy.engine import make_url
        from sqlalchemy.exc import ArgumentError

        try:
            url = make_url(uri.strip())
        except ArgumentError:  # CatalogFactory refuses it with a message naming the fix
            return uri
        if url.get_backend_name() != "sqlite" or url.database in (None, "", ":memory:"):
            return uri
        if url.database.startswith("file:") or Path(url.database).expanduser().is_absolute():
            return uri
        return url.set(database=str(self._resolve(url.database))).render_as_string(hide_password=False)

    @cached_property
    def _connection_catalog(self) -> tuple[str, dict[str, Any]]:
        """The kind and options of :attr:`airflow_conn_id`, from :attr:`connection_reader`; read once.

        The reader imports Airflow (the engine never does).

        Raises:
            ProjectConfigError: No reader was given, or the connection is not defined.
            MissingAirflowError: Airflow is not installed.
        """
        conn_id = str(self.airflow_conn_id)
        if self.connection_reader is None:
            raise ProjectConfigError(
                f"Airflow connection {conn_id!r} ({self._conn_id_source()}) cannot be read: this configuration was "
                "built without a connection reader. From Python, pass connection_reader= to load_config() or "
                "with_overrides(), e.g. read_airflow_connection from iceberg_ops_provider.cli.airflow_connections; "
                "or run the iceberg-ops command line, which reads it."
            )
        return self.connection_reader(conn_id, self._conn_id_source())

    def _conn_id_source(self) -> str:
        return f"--conn-id, or `airflow_conn_id:` in {self.path}" if self.path else "--conn-id"

    def _build_connection_catalog(self, *, create: bool = True) -> Catalog:
        """The catalog of the Airflow connection, built as :meth:`IcebergCatalogHook.get_conn` builds it.

        From the hook's :meth:`~IcebergCatalogHook.catalog_spec`, without the hook's log line (the
        command line prints its own output); ``--catalog-timeout`` wins over the ``timeout`` extra.
        """
        kind, options = self._connection_catalog
        conn_id = self.airflow_conn_id
        in_memory = kind in _IN_MEMORY_KINDS or str(options.get("type", "")).lower() in _IN_MEMORY_KINDS
        if in_memory:
            raise ProjectConfigError(
                f"Airflow connection {conn_id!r} describes an in-memory catalog, which cannot be used from the "
                "command line: its state is gone when the command exits."
            )
        try:
            return CatalogFactory.build(kind, create=create, **{**options, "timeout": self.catalog_timeout})
        except CatalogAuthError:
            raise
        except CatalogNotFoundError as exc:  # the connection's extra named it: its key is the setting to fix
            found = exc.args[0] if len(exc.args) == 1 else str(exc)
            raise CatalogNotFoundError(
                f"The catalog of Airflow connection {conn_id!r} ({self._conn_id_source()}): " + found, path=exc.path
            ) from exc
        except CatalogConfigError as exc:
            if isinstance(exc, UnknownCatalogKindError):  # without the kinds the command line refuses
                usable = [kind for kind in exc.valid_kinds if kind not in _IN_MEMORY_KINDS]
                exc = UnknownCatalogKindError(exc.kind, usable, advice="")
            raise ProjectConfigError(
                f"The catalog of Airflow connection {conn_id!r} ({self._conn_id_source()}) cannot be built: {exc}"
            ) from exc

    @staticmethod
    def _load_named_catalog(options: dict[str, Any]) -> Catalog:
        """A catalog PyIceberg loads by name, bounded like the ones :class:`CatalogFactory` builds."""
        from pyiceberg.catalog import load_catalog

        name = str(options.pop("name"))
        timeout = float(options.pop("timeout"))
        properties = {key: str(value) for key, value in options.items()}
        endpoint = properties.get("uri") or _configured_uri(name) or f"(catalog {name!r})"
        try:
            with catalog_errors(endpoint, timeout):
                catalog = call_with_timeout(
                    lambda: load_catalog(name, **properties),
                    timeout,
                    what=f"opening the catalog {name!r}",
                    endpoint=endpoint,
                )
        except CatalogConfigError:
            raise
        except ValueError as exc:  # PyIceberg's word for a missing or malformed property (e.g. no uri)
            raise pyiceberg_config_error(exc, f"the catalog {name!r} (--catalog-name / `name:`)", name) from exc
        bound_catalog_requests(catalog, timeout)
        return catalog

    def _resolve(self, path: Any) -> Path:
        candidate = Path(str(path)).expanduser()
        return candidate if candidate.is_absolute() else self.root / candidate

    def with_overrides(
        self,
        *,
        namespace: str | None = None,
        catalog_kind: str | None = None,
        catalog_name: str | None = None,
        db_path: str | None = None,
        warehouse: str | None = None,
        catalog_timeout: float | None = None,
        conn_id: str | None = None,
        meta_namespace: str | None = None,
        catalog_uri: str | None = None,
        connection_reader: ConnectionReader | None = None,
    ) -> ProjectConfig:
        """This configuration with command-line options applied (they win over the file).

        The file's ``catalog.timeout`` survives ``--catalog``/``--catalog-name``: it is not an
        option of one kind. ``catalog_timeout`` (``--catalog-timeout``) wins over it.
        ``conn_id`` (``--conn-id``) replaces the file's catalog (or ``airflow_conn_id``) with an
        Airflow connection; ``--catalog``/``--catalog-name`` replace a file's ``airflow_conn_id``.
        ``catalog_uri`` (``--catalog-uri``) sets the catalog's ``uri`` (the SQLAlchemy URL of a
        ``sql`` catalog, the endpoint of ``rest``/``hive``). ``warehouse`` (``--warehouse``) is the
        ``warehouse_dir`` of a ``sqlite`` catalog, and of a ``sql`` one unless it is a URI
        (``s3://...``), which becomes its ``warehouse``. ``connection_reader`` replaces the
        :attr:`connection_reader` (default: keep it).

        Raises:
            ProjectConfigError: Two options that each choose the catalog (``--conn-id`` with
                ``--catalog`` or ``--catalog-name``, or those two together), ``--db-path`` for a
                catalog that is not the project file's sqlite one, ``--warehouse`` for one that is
                neither sqlite nor sql, or ``--catalog-uri`` with an Airflow connection or for a
                sqlite or memory catalog.
        """
        chosen = [
            flag
            for flag, value in (("--conn-id", conn_id), ("--catalog", catalog_kind), ("--catalog-name", catalog_name))
            if value
        ]
        if len(chosen) > 1:
            raise ProjectConfigError(
                f"Pass only one of {' and '.join(chosen)}: each chooses the catalog (--conn-id from an Airflow "
                "connection, --catalog a kind configured in the project file, --catalog-name a catalog PyIceberg "
                "loads by name)."
            )
        catalog = dict(self.catalog)
        timeout = catalog.get("timeout")
        airflow_conn_id = self.airflow_conn_id
        if conn_id:
            # The connection holds the catalog's options, its timeout included; only --catalog-timeout wins over it.
            catalog, timeout, airflow_conn_id = {}, None, conn_id
        elif catalog_name:
            catalog, airflow_conn_id = {"name": catalog_name}, None
        elif catalog_kind:
            same_kind = str(catalog.get("kind", "")).lower() == catalog_kind.lower()
            catalog = {**(catalog if same_kind else {}), "kind": catalog_kind}
            catalog.pop("name", None)
            airflow_conn_id = None
        if catalog_timeout is not None:
            timeout = catalog_timeout
        if timeout is not None:
            catalog["timeout"] = timeout
        kind = None if "name" in catalog else str(catalog.get("kind", "sqlite")).lower()
        if catalog_uri:
            if airflow_conn_id:
                raise ProjectConfigError(
                    f"--catalog-uri does not apply to Airflow connection {airflow_conn_id!r}: its Host (or `uri` "
                    "extra) holds the catalog's uri."
                )
            if kind in ("sqlite", "memory"):
                raise ProjectConfigError(
                    f"--catalog-uri does not apply to the {kind!r} catalog (it has db_path instead); pass "
                    "--catalog sql with it for a SQL database such as PostgreSQL, or --catalog rest / hive."
                )
            catalog["uri"] = catalog_uri
        if db_path or warehouse:
            if airflow_conn_id:
                raise ProjectConfigError(
                    f"--db-path and --warehouse apply to the sqlite catalog of the project file, not to Airflow "
                    f"connection {airflow_conn_id!r}: set db_path and warehouse_dir in the connection's extra instead."
                )
            if db_path and kind != "sqlite":
                raise ProjectConfigError(
                    "--db-path applies to the sqlite catalog only (a sql catalog has --catalog-uri)."
                )
            if warehouse and kind not in ("sqlite", "sql"):
                raise ProjectConfigError("--warehouse applies to the sqlite and sql catalogs only.")
            if db_path:
                catalog["db_path"] = str(Path(db_path).expanduser().resolve())
            if warehouse and (kind == "sqlite" or "://" not in warehouse):
                catalog.pop("warehouse", None)
                catalog["warehouse_dir"] = warehouse if "://" in warehouse else str(Path(warehouse).resolve())
            elif warehouse:
                catalog.pop("warehouse_dir", None)
                catalog["warehouse"] = warehouse
        return replace(
            self,
            catalog=catalog,
            namespace=namespace or self.namespace,
            airflow_conn_id=airflow_conn_id,
            meta_namespace=meta_namespace or self.meta_namespace,
            connection_reader=self.connection_reader if connection_reader is None else connection_reader,
        )


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
        connection_reader: How an Airflow connection (``airflow_conn_id:``, or ``conn_id`` of
            :meth:`ProjectConfig.with_overrides`) is read; see :data:`ConnectionReader`.

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
    kind = catalog.get("kind")
    if kind is not None and str(kind).lower() not in CatalogFactory.KINDS:  # `memory` is refused when built
        close = difflib.get_close_matches(str(kind).lower(), CATALOG_KINDS, n=1)
        raise ProjectConfigError(
            f"{file}: catalog kind {kind!r} is unknown; valid kinds: {', '.join(CATALOG_KINDS)} "
            f"(or `name:` for any catalog PyIceberg can load).{f' Did you mean {close[0]!r}?' if close else ''}"
        )
    for key, value in catalog.items():
        if isinstance(value, dict | list) or value is None:
            raise ProjectConfigError(f"{file}: catalog option {key!r} must be a single value, got {value!r}.")
    if "timeout" in catalog:
        try:
            check_timeout(catalog["timeout"], "catalog.timeout")
        except CatalogConfigError as exc:
            raise ProjectConfigError(f"{file}: {exc}") from exc
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
