"""One invocation's settings (every command's ``click.pass_obj``): the global options and what they open."""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

import click

from iceberg_ops_provider.cli.airflow_connections import read_airflow_connection, without_airflow_logging
from iceberg_ops_provider.cli.catalog_flags import CatalogFlags, with_flags
from iceberg_ops_provider.errors import IcebergOpsError, ProjectConfigError

if TYPE_CHECKING:
    from pyiceberg.catalog import Catalog

    from iceberg_ops_provider.catalogs import Access
    from iceberg_ops_provider.config import ProjectConfig

__all__ = ["Files", "Settings", "namespace_of", "open_catalog"]

Files = Literal["project", "required", "optional", "none"]
"""What a migration command needs of the migration files (see :meth:`Settings.migration_config`)."""


@dataclass
class Settings:
    """The global options of one ``iceberg-ops`` invocation (each field the option of its name), and what they open."""

    config_path: Path | None
    namespace: str | None
    catalog_kind: str | None
    catalog_name: str | None
    catalog_uri: str | None
    conn_id: str | None
    db_path: str | None
    warehouse: str | None
    catalog_timeout: float | None
    stale_after: float | None
    meta_namespace: str | None
    as_json: bool
    verbose: int
    migrations_dir: Path | None = None
    _config: ProjectConfig | None = field(default=None, repr=False)

    @property
    def catalog_flags(self) -> CatalogFlags:
        """The global options that describe the catalog."""
        return CatalogFlags(
            conn_id=self.conn_id,
            kind=self.catalog_kind,
            name=self.catalog_name,
            uri=self.catalog_uri,
            db_path=self.db_path,
            warehouse=self.warehouse,
            timeout=self.catalog_timeout,
        )

    def config(self, *, required: bool = True) -> ProjectConfig:
        """The project configuration with the global options applied; loaded once (an Airflow connection read too)."""
        from iceberg_ops_provider.config import load_config

        if self._config is None:
            loaded = load_config(self.config_path, required=required, connection_reader=read_airflow_connection)
            config = with_flags(loaded, self.catalog_flags)
            config = replace(
                config,
                namespace=self.namespace or config.namespace,
                meta_namespace=self.meta_namespace or config.meta_namespace,
            )
            if self.migrations_dir is not None:  # as typed: relative to the working directory
                config = replace(config, migrations_dir=self.migrations_dir.expanduser().resolve())
            if config.airflow_conn_id:
                without_airflow_logging(lambda: config.catalog_spec)  # reads the connection
            self._config = config
        return self._config

    def migration_config(self, files: Files = "required") -> ProjectConfig:
        """The configuration a migration command runs on: the project file, or the options alone.

        Without options naming the catalog the project file must exist; with them it is optional, and
        ``files="required"`` then needs ``--migrations-dir``. ``files="project"`` (``revision``, which
        writes into the project's folders) needs the project file whatever the options.
        """
        from iceberg_ops_provider.config import CONFIG_FILE

        explicit = self.catalog_flags.any_given()
        file = self.config_path or Path.cwd() / CONFIG_FILE
        command = _command_name()
        if files == "project" and not file.is_file():
            raise ProjectConfigError(
                f"Configuration file {file} not found: `iceberg-ops {command}` needs the project file, since it "
                "writes into the project's migrations folder (and --autogenerate compares the project's models "
                "folder with the tables). Run `iceberg-ops init` to create one, or pass --config PATH."
            )
        if not explicit and not file.exists():
            needs = " and --migrations-dir DIR" if files == "required" else ""
            raise ProjectConfigError(
                f"Configuration file {file} not found. Run `iceberg-ops init` to create one, pass --config PATH, or "
                f"name the catalog and namespace on the command line: `iceberg-ops {command}` runs without the file "
                f"given --catalog KIND (with --db-path, --catalog-uri, ...), --conn-id NAME or --catalog-name NAME, "
                f"and --namespace NS{needs}."
            )
        config = self.config(required=not explicit or self.config_path is not None)
        if files == "required" and config.path is None and self.migrations_dir is None:
            raise ProjectConfigError(
                f"`iceberg-ops {command}` needs the migration files: pass --migrations-dir DIR, or run it with the "
                f"project file ({CONFIG_FILE} in the working directory, or --config PATH)."
            )
        return config

    def files_known(self) -> bool:
        """Whether the migration files are known: a project file was read, or ``--migrations-dir`` given."""
        return self.migrations_dir is not None or (self._config is not None and self._config.path is not None)

    def translate(self, exc: Exception) -> Exception:
        """``exc``, or the iceberg-ops error a catalog client's error (or a bad ``.pyiceberg.yaml``) amounts to."""
        if isinstance(exc, IcebergOpsError):
            return exc
        found = _pyiceberg_file_error(exc)  # before anything that imports PyIceberg, which fails again then
        if found is not None:
            return found
        try:
            from iceberg_ops_provider.catalogs import CatalogSpec, translate
        except Exception:  # pragma: no cover - report exc as it is rather than fail while reporting it
            return exc
        config = self._config
        spec = config.__dict__.get("catalog_spec") if config is not None else None  # read already, never read here
        return translate(exc, spec if isinstance(spec, CatalogSpec) else CatalogSpec(kind="pyiceberg")) or exc

    def runner(
        self,
        *,
        known: bool = False,
        progress: bool = False,
        atomic: bool = True,
        files: Files = "required",
        access: Access = "create",
    ) -> Any:
        """A runner for the project; ``known`` refuses a namespace that is most likely a typo.

        ``atomic=False``: ``--no-atomic``. ``files``: what the command needs of the migration files
        (:meth:`migration_config`); a runner without them reads the history only.
        """
        from iceberg_ops_provider.runner.commands import open_runner, require_known_namespace

        config = self.migration_config(files)
        runner = open_runner(
            config,
            on_event=self.progress if progress else None,
            stale_after=self.stale_after,
            files=files != "none" and self.files_known(),
            access=access,
        )
        runner.atomic_commits = atomic
        if known:
            require_known_namespace(runner)
        return runner

    def progress(self, line: str) -> None:
        """Print a progress line on stderr."""
        click.echo(line, err=True)

    def emit(self, data: Any, human: str) -> None:
        """Print a command's result: ``data`` as JSON with ``--json``, else the ``human`` text."""
        click.echo(json.dumps(data, indent=2, default=str) if self.as_json else human)


def _command_name() -> str:
    """The name of the command being run (``status``), for messages; ``iceberg-ops`` outside a command."""
    context = click.get_current_context(silent=True)
    return context.info_name or "" if context is not None else ""


def _pyiceberg_file_error(exc: BaseException) -> ProjectConfigError | None:
    """Which ``.pyiceberg.yaml`` could not be read, and why (PyIceberg's import error names no file); else ``None``."""
    path = None
    trace = exc.__traceback__
    while trace is not None:
        code = trace.tb_frame.f_code
        if code.co_name == "_load_yaml" and code.co_filename.endswith(os.path.join("pyiceberg", "utils", "config.py")):
            path = trace.tb_frame.f_locals.get("path")
        trace = trace.tb_next
    if not path:
        return None
    if isinstance(exc, UnicodeDecodeError):
        reason = f"not UTF-8 text: byte 0x{exc.object[exc.start]:02x} at offset {exc.start}"
    else:
        reason = " ".join(str(exc).split())
    return ProjectConfigError(
        f"PyIceberg's configuration file {path} could not be read ({type(exc).__name__}: {reason}); fix it or move "
        "it away. PyIceberg reads the first .pyiceberg.yaml it finds in $PYICEBERG_HOME, the home folder and the "
        "working directory."
    )


def open_catalog(settings: Settings, *, access: Access = "write") -> Catalog:
    """The catalog of the global options (a project file is needed only when no option names the catalog)."""
    return settings.config(required=not settings.catalog_flags.any_given()).open_catalog(access=access)


def namespace_of(settings: Settings) -> str | None:
    """The namespace of ``--namespace`` or the project file (which is optional when an option names a catalog)."""
    return settings.namespace or settings.config(required=not settings.catalog_flags.any_given()).namespace
