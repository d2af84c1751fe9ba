"""The project file ``iceberg-ops.yaml``: which catalog, namespace and folders a project uses (docs/cli.md).

Its keys are checked by a pydantic model; ``airflow_conn_id:`` is read by the :data:`ConnectionReader`
given to :func:`load_config`, so this module never imports Airflow.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, TypeAlias

from pydantic import BaseModel, ConfigDict, StringConstraints, ValidationError, model_validator

from iceberg_ops_provider.catalogs import (
    KINDS,
    Access,
    CatalogSpec,
    check_timeout,
    empty_catalog,
    from_file,
    open_catalog,
)
from iceberg_ops_provider.core.documents import yaml_document
from iceberg_ops_provider.core.name_hints import closest
from iceberg_ops_provider.errors import ProjectConfigError
from iceberg_ops_provider.messages import Hint, Setting, message

if TYPE_CHECKING:
    from pyiceberg.catalog import Catalog

__all__ = ["CATALOG_KINDS", "CONFIG_FILE", "ConnectionReader", "ProjectConfig", "load_config", "yaml_document"]

CONFIG_FILE = "iceberg-ops.yaml"

ConnectionReader: TypeAlias = Callable[[str, Setting], CatalogSpec]
"""``reader(conn_id, setting)``: the spec of an Airflow connection's catalog (``setting``: where the id was given);
raises ``ProjectConfigError`` for an unknown connection and ``MissingAirflowError`` without Airflow."""

_IN_MEMORY_KINDS = ("memory", "in-memory")

CATALOG_KINDS: tuple[str, ...] = tuple(kind for kind in KINDS if kind not in _IN_MEMORY_KINDS)
"""The kinds a project's ``catalog.kind`` may name: all but ``memory``, whose state is gone when the command exits."""


_Text = Annotated[str, StringConstraints(pattern=r"\S")]  # absent: None; given, it must say something
_Single = str | int | float | bool


@dataclass(frozen=True)
class ProjectConfig:
    """A project's settings, with the caller's overrides applied.

    Attributes:
        path: The configuration file, or ``None`` when there is none.
        root: The folder relative paths resolve against.
        catalog: The ``catalog:`` mapping (``{"kind": ..., **options}`` or ``{"name": ..., **options}``);
            with :attr:`airflow_conn_id` it holds at most ``timeout``.
        meta_namespace: Where history and locks live (``None``: ``_iceberg_ops``, or ``iceberg_ops`` on S3 Tables).
        connection_reader: How :attr:`airflow_conn_id` is read (see :data:`ConnectionReader`).
        catalog_flags: The catalog settings given over the file (by the command line).
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
            file = str(self.path or CONFIG_FILE)
            step = Hint("give_namespace", f"set `namespace:` in {file}", {"file": file})
            raise ProjectConfigError(message("No namespace given: {step}.", step=step))
        return self.namespace

    @cached_property
    def catalog_spec(self) -> CatalogSpec:
        """The catalog's description: the file's ``catalog:`` (with the settings given over it), or the connection.

        Raises:
            ProjectConfigError: A connection that cannot be read; ``MissingAirflowError`` without Airflow.
        """
        if self.airflow_conn_id:
            spec = self._connection_spec()
            timeout = self.catalog.get("timeout")
            seconds = check_timeout(timeout)
            if seconds:
                spec = spec.with_timeout(seconds, flagged="timeout" in self.catalog_flags)
            elif timeout is not None:
                problem = f"the timeout {timeout!r} is not a number of seconds greater than 0 and at most a week"
                spec = spec.with_problem("timeout", problem)
        else:
            spec = from_file(
                self.catalog, file=self.path, root=self.root, flags=self.catalog_flags, role=self.catalog_role
            )
        gone = next((kind for kind in (spec.kind, spec.catalog_type) if kind in _IN_MEMORY_KINDS), None)
        if gone:
            why = "its state is gone when the command exits; use kind 'sqlite' for a local catalog"
            spec = spec.with_problem("kind", f"the {gone!r} catalog cannot be used from a project: {why}")
        return spec

    @property
    def catalog_timeout(self) -> float:
        """Seconds one request to the catalog may take (the spec's timeout)."""
        return self.catalog_spec.timeout

    def open_catalog(self, *, access: Access = "write") -> Catalog:
        """Open the configured catalog for ``access`` (see :func:`~iceberg_ops_provider.catalogs.open_catalog`).

        Before the project's own SQLite database (no ``db_path``) exists, ``read`` and ``write`` find an
        empty catalog; a database someone named that does not exist is refused.
        """
        spec = self.catalog_spec
        own = not self.airflow_conn_id and spec.kind == "sqlite" and "db_path" not in self.catalog
        if access != "create" and own and not spec.problems and spec.database and not spec.database.exists():
            return empty_catalog()
        return open_catalog(spec, access=access)

    def _connection_spec(self) -> CatalogSpec:
        conn_id, flagged = str(self.airflow_conn_id), "airflow_conn_id" in self.catalog_flags
        source = "file" if self.path else "flags"
        setting = Setting("airflow_conn_id", source, str(self.path or ""), self.catalog_role, flagged)
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


class _ProjectFile(BaseModel):
    """The keys of the project file and what each must be (the catalog's options are the spec's to judge)."""

    model_config = ConfigDict(extra="forbid")

    catalog: dict[str, _Single] | None = None
    airflow_conn_id: _Text = None
    namespace: _Text = None
    migrations_dir: _Text = None
    models_dir: _Text = None
    meta_namespace: _Text = None

    @model_validator(mode="after")
    def _one_catalog(self) -> _ProjectFile:
        if self.airflow_conn_id is not None and "catalog" in self.model_fields_set:
            both = "set either `catalog:` or `airflow_conn_id:`, not both; the Airflow connection describes the"
            raise ValueError(f"{both} catalog (its timeout included).")
        if self.catalog and "kind" in self.catalog and "name" in self.catalog:
            raise ValueError("'catalog' takes either 'kind' or 'name', not both.")
        return self


def _problems(file: Path, error: ValidationError) -> str:
    """Pydantic's errors in our words: the file, then each key's path, what it must be and what it was."""
    keys, sentences = sorted(_ProjectFile.model_fields), []
    unknown = sorted(str(e["loc"][0]) for e in error.errors() if e["type"] == "extra_forbidden")
    if unknown:
        guesses = [f"{guess!r} for {key!r}" for key in unknown if (guess := closest(key, keys))]
        hint = f" Did you mean {', '.join(guesses)}?" if guesses else ""
        sentences.append(f"unknown key(s) {unknown}; valid keys: {keys}.{hint}")
    for problem in error.errors():
        loc = [str(part) for part in problem["loc"]]
        if not loc:  # a rule across keys, worded where it is checked
            sentences.append(str(problem.get("ctx", {}).get("error", problem["msg"])))
        elif problem["type"] != "extra_forbidden":
            expected = "a single value (text, a number or true/false)" if len(loc) > 1 else "a non-empty string"
            expected = "a mapping such as {kind: sqlite}" if loc == ["catalog"] else expected
            sentences.append(f"'{'.'.join(loc[:2])}' must be {expected}, got {problem['input']!r}.")
    return f"{file}: " + " ".join(dict.fromkeys(sentences))


def load_config(
    path: str | Path | None = None, *, required: bool = True, connection_reader: ConnectionReader | None = None
) -> ProjectConfig:
    """Read ``iceberg-ops.yaml`` (``path``, default ``./iceberg-ops.yaml``); see :data:`ConnectionReader`.

    Raises:
        ProjectConfigError: The file is missing (when ``required``; else defaults rooted in its folder), unreadable
            or malformed; naming the file and the key.
    """
    file = Path(path) if path is not None else Path.cwd() / CONFIG_FILE
    if required and not file.is_file():
        itself = str(file / CONFIG_FILE)
        folder = Hint("project_file_itself", f"pass the project file itself, e.g. {itself}", {"file": itself})
        create = Hint("create_project_file", "Create it (init_project() writes one), or pass the path of one")
        template = "is a folder; {step}." if file.is_dir() else "not found. {step}."
        raise ProjectConfigError(
            message(f"Configuration file {file} {template}", step=folder if file.is_dir() else create)
        )
    given = _ProjectFile()
    if file.is_file():
        try:
            data = file.read_bytes()
        except OSError as exc:
            raise ProjectConfigError(
                f"Configuration file {file} could not be read ({exc.strerror or exc}); check its permissions."
            ) from exc
        raw = yaml_document(data, file, ProjectConfigError) or {}
        if not isinstance(raw, dict):
            raise ProjectConfigError(f"{file}: expected a mapping of settings, got {type(raw).__name__}.")
        try:
            given = _ProjectFile.model_validate(raw)
        except ValidationError as exc:
            raise ProjectConfigError(_problems(file, exc)) from None
    root = file.parent.resolve()
    settings: dict[str, Any] = given.model_dump(exclude_none=True, exclude={"catalog"})
    for key in ("migrations_dir", "models_dir"):
        settings[key] = root / Path(settings.get(key, key.removesuffix("_dir"))).expanduser()
    settings["catalog"] = dict(given.catalog or ({} if given.airflow_conn_id else {"kind": "sqlite"}))
    path_read = file.resolve() if file.is_file() else None
    return ProjectConfig(path=path_read, root=root, connection_reader=connection_reader, **settings)
