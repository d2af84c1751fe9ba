"""The ``iceberg-ops`` command line: a thin front over the runner, ``commands`` and ``scaffolding``.

The ``maintain`` and ``move`` groups live in :mod:`~iceberg_ops_provider.cli.maintain` and
:mod:`~iceberg_ops_provider.cli.move`. Exit codes: 0 success; 1 a check that found something
(``check``, ``maintain health``, a failed verification), a failed migration, or a state that stops
the run (lock held, files disagreeing with history, pending migrations before autogenerate, a
catalog that cannot be reached or does not answer within ``--catalog-timeout``): every transient
error is among them; 2 bad usage, configuration or input (refused or missing credentials, a
``db_path`` that is not an SQLite database, an unreadable ``iceberg-ops.yaml``); 130 interrupted
(Ctrl-C). Errors print one line (a traceback with ``-v``); ``--json`` prints machine-readable
output on stdout, progress goes to stderr. ``docs/errors.md`` lists every error class with its exit code.
"""

from __future__ import annotations

import contextlib
import functools
import json
import logging
import os
import sys
import traceback
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import click

from iceberg_ops_provider import __version__
from iceberg_ops_provider.cli.shared import CommandLine
from iceberg_ops_provider.errors import (
    CatalogUnavailableError,
    ConcurrentMigrationError,
    ConfirmationRequiredError,
    IcebergOpsError,
    IntentRecordError,
    IrreversibleMigrationError,
    MigrationError,
    MigrationFailedError,
    MigrationIntegrityError,
    MigrationNotRecordedError,
    PartialMigrationError,
    ProjectConfigError,
    VerificationFailedError,
)

__all__ = ["cli", "main"]

F = TypeVar("F", bound=Callable[..., Any])

# Errors that describe the state of the world rather than a mistake in the command: exit 1. Every
# transient error (``IcebergOpsError.transient``) exits 1 as well; every other IcebergOpsError exits 2.
_STATE_ERRORS = (
    MigrationFailedError,
    MigrationNotRecordedError,
    IrreversibleMigrationError,
    ConcurrentMigrationError,
    MigrationIntegrityError,
    PartialMigrationError,
    IntentRecordError,
    CatalogUnavailableError,
    VerificationFailedError,
)


# Lets a relative target such as ``-1`` parse as the TARGET argument instead of an unknown option.
_TARGET_ARGUMENT = {"ignore_unknown_options": True}


@dataclass
class _Settings:
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
    _config: Any = field(default=None, repr=False)

    def config(self, *, required: bool = True) -> Any:
        from iceberg_ops_provider.config import load_config

        if self._config is None:
            loaded = load_config(self.config_path, required=required)
            self._config = loaded.with_overrides(
                namespace=self.namespace,
                catalog_kind=self.catalog_kind,
                catalog_name=self.catalog_name,
                db_path=self.db_path,
                warehouse=self.warehouse,
                catalog_timeout=self.catalog_timeout,
                meta_namespace=self.meta_namespace,
                conn_id=self.conn_id,
                catalog_uri=self.catalog_uri,
            )
            if self._config.airflow_conn_id:
                config = self._config
                _without_airflow_logging(lambda: config.catalog_timeout)  # reads the connection
        return self._config

    def translate(self, exc: Exception) -> Exception:
        """``exc``, or the iceberg-ops error it amounts to.

        A catalog client's error (unreachable, timed out, credentials refused or missing, a SQLite
        file that is not a database; see :func:`~iceberg_ops_provider.core.timeouts.catalog_error`)
        or an unreadable ``.pyiceberg.yaml``. Never fails, and never talks to Airflow.
        """
        if isinstance(exc, IcebergOpsError):
            return exc
        found = _pyiceberg_file_error(exc)  # before anything that imports PyIceberg, which fails again then
        if found is not None:
            return found
        try:
            from iceberg_ops_provider.core.timeouts import catalog_error
        except Exception:  # pragma: no cover - report exc as it is rather than fail while reporting it
            return exc
        config = self._config
        endpoint = config.catalog_uri if config is not None else ""
        seconds = config.known_catalog_timeout if config is not None else self.catalog_timeout
        return catalog_error(exc, endpoint, seconds) or exc

    def runner(self, *, known: bool = False, progress: bool = False, atomic: bool = True) -> Any:
        """A runner for the project; ``known`` refuses a namespace that is most likely a typo.

        ``atomic=False`` makes it commit table by table even where the catalog can commit a
        migration's changes and its history record at once (``--no-atomic``).
        """
        from iceberg_ops_provider.runner.commands import open_runner, require_known_namespace

        runner = open_runner(self.config(), on_event=self.progress if progress else None, stale_after=self.stale_after)
        runner.atomic_commits = atomic
        if known:
            require_known_namespace(runner)
        return runner

    def progress(self, line: str) -> None:
        click.echo(line, err=True)

    def emit(self, data: Any, human: str) -> None:
        click.echo(json.dumps(data, indent=2, default=str) if self.as_json else human)


def _without_airflow_logging(read: Callable[[], object]) -> None:
    """Run ``read`` (which imports Airflow) and undo the logging Airflow sets up when imported.

    Airflow gives the root logger a handler that prints every INFO record on stdout, where ``--json``
    output goes; the command line prints its own progress on stderr and its errors as one line.
    Whatever Airflow prints while it loads goes to stderr.
    """
    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    try:
        with contextlib.redirect_stdout(sys.stderr):
            read()
    finally:
        for handler in root.handlers[:]:
            if handler not in handlers:
                root.removeHandler(handler)
        root.setLevel(level)


def _pyiceberg_file_error(exc: BaseException) -> ProjectConfigError | None:
    """PyIceberg's own configuration file (``.pyiceberg.yaml``) could not be read: which file, and why.

    PyIceberg reads that file when it is first imported; a file that is not UTF-8 or not valid
    YAML makes that import fail with a bare decoding or parsing error that names
    no file. Returns ``None`` when ``exc`` was raised elsewhere.
    """
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


def _error_report(settings: _Settings, raised: Exception) -> tuple[int, str, str]:
    """The exit code, the one-line message and the error's type name for ``raised`` (a traceback with ``-v``)."""
    exc = settings.translate(raised)
    if isinstance(exc, IcebergOpsError):
        code = 1 if exc.transient or isinstance(exc, _STATE_ERRORS) or type(exc) is MigrationError else 2
    else:
        code = 2 if isinstance(exc, ValueError | TypeError | LookupError) else 1
    if settings.verbose:
        traceback.print_exception(raised)
    message = " ".join(str(exc).split()) or type(exc).__name__
    if not isinstance(exc, IcebergOpsError):
        message = f"{type(exc).__name__}: {message}"
    return code, message, type(exc).__name__


def _handles_errors(command: F) -> F:
    @functools.wraps(command)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        settings: _Settings = click.get_current_context().obj
        try:
            return command(*args, **kwargs)
        except click.exceptions.Exit:
            raise
        except (click.ClickException, click.Abort):
            raise
        except Exception as raised:
            code, message, kind = _error_report(settings, raised)
            if settings.as_json:
                click.echo(json.dumps({"error": message, "type": kind, "exit_code": code}))
            click.echo(f"error: {message}", err=True)
            sys.exit(code)

    return wrapper  # type: ignore[return-value]


def _namespace_known(runner: Any) -> bool:
    from iceberg_ops_provider.runner.commands import namespace_known

    return namespace_known(runner)


def _table(headers: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    """A plain text table."""
    if not rows:
        return ""
    cells = [[str(c) for c in headers], *[["" if c is None else str(c) for c in row] for row in rows]]
    widths = [max(len(row[i]) for row in cells) for i in range(len(headers))]
    lines = ["  ".join(cell.ljust(widths[i]) for i, cell in enumerate(row)).rstrip() for row in cells]
    lines.insert(1, "  ".join("-" * width for width in widths))
    return "\n".join(lines)


@click.group(cls=CommandLine, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="iceberg-ops")
@click.option(
    "--config",
    "config_path",
    type=click.Path(dir_okay=False, path_type=Path),
    help="Project file (default ./iceberg-ops.yaml).",
)
@click.option("--namespace", help="Namespace to work on (overrides the project file).")
@click.option(
    "--catalog", "--catalog-kind", "catalog_kind", help="Catalog kind: sqlite, sql, glue, rest, hive or s3tables."
)
@click.option(
    "--catalog-uri",
    metavar="URL",
    help="The catalog's uri: the SQLAlchemy URL of a sql catalog (postgresql+psycopg://user@host:5432/db), the "
    "endpoint of a rest or hive one (overrides the file).",
)
@click.option("--catalog-name", help="Open any catalog PyIceberg can load by name (.pyiceberg.yaml / environment).")
@click.option(
    "--conn-id",
    metavar="NAME",
    help="Build the catalog from this Airflow connection, as the Airflow tasks do (needs apache-airflow; "
    "overrides the project file's catalog; not with --catalog or --catalog-name).",
)
@click.option("--db-path", help="SQLite catalog database (default local_data/ next to the project file).")
@click.option("--warehouse", help="Warehouse folder or URI of the sqlite or sql catalog.")
@click.option(
    "--catalog-timeout",
    type=click.FloatRange(min=0, min_open=True),
    metavar="SECONDS",
    help="Seconds the catalog may take to answer before the command fails (default 60; overrides the file).",
)
@click.option(
    "--stale-after",
    type=click.FloatRange(min=0, min_open=True),
    metavar="SECONDS",
    help="Lease of the migration lock: a lock not renewed for this long (its run died) is taken over (default 180).",
)
@click.option(
    "--meta-namespace",
    help="Where migration history and locks live (default _iceberg_ops; iceberg_ops on S3 Tables).",
)
@click.option("--json", "as_json", is_flag=True, help="Print machine-readable JSON.")
@click.option("-v", "--verbose", count=True, help="Show tracebacks.")
@click.pass_context
def cli(ctx: click.Context, **options: Any) -> None:
    """Version and operate Apache Iceberg tables: numbered migrations with history in your catalog."""
    # Thrift (Hive) logs each failed connection attempt, tracebacks included; without a handler
    # Python would print them next to the one-line error. Configured logging still receives them.
    thrift = logging.getLogger("thrift")
    if not any(isinstance(handler, logging.NullHandler) for handler in thrift.handlers):
        thrift.addHandler(logging.NullHandler())
    _warnings_once(logging.getLogger("iceberg_ops_provider"))
    ctx.obj = _Settings(**options)


class _Warnings(logging.Handler):
    """Prints the package's warnings as ``warning: ...`` on stderr, except the runner's step lines.

    The step lines were already printed as progress. Without a handler Python's last-resort handler
    would print every warning, and a failed step's line twice.
    """

    def __init__(self) -> None:
        super().__init__(logging.WARNING)

    def emit(self, record: logging.LogRecord) -> None:
        if not getattr(record, "progress", False):
            click.echo(f"warning: {record.getMessage()}", err=True)


def _warnings_once(logger: logging.Logger) -> None:
    """Attach :class:`_Warnings` to ``logger`` unless it is there."""
    if not any(isinstance(handler, _Warnings) for handler in logger.handlers):
        logger.addHandler(_Warnings())


@cli.command()
@click.argument("directory", required=False, type=click.Path(file_okay=False, path_type=Path))
@click.pass_obj
@_handles_errors
def init(settings: _Settings, directory: Path | None) -> None:
    """Create iceberg-ops.yaml, migrations/ and models/ (refuses to overwrite)."""
    from iceberg_ops_provider.autogen.scaffolding import init_project

    target = directory or (settings.config_path.parent if settings.config_path else Path.cwd())
    created = init_project(target, namespace=settings.namespace or "default")
    settings.emit({"created": [str(p) for p in created]}, "\n".join(f"created {p}" for p in created))


@cli.command()
@click.option("-m", "--message", required=True, help="What the migration does.")
@click.option("--autogenerate", is_flag=True, help="Write the operations that make live tables match models/.")
@click.option("--target-table", help="With --autogenerate: only this table's model.")
@click.pass_obj
@_handles_errors
def revision(settings: _Settings, message: str, autogenerate: bool, target_table: str | None) -> None:
    """Write the next NNNN_slug.py migration."""
    from iceberg_ops_provider.runner.commands import revision as write_revision

    result = write_revision(
        settings.config(), message, autogenerate_from_models=autogenerate, target_table=target_table
    )
    if result.path is None:
        settings.emit(result.to_json(), "No changes between the models and the live tables; nothing written.")
        return
    lines = [f"wrote {result.path}"] + [f"  [{op.risk}] {op.describe()}" for op in result.operations]
    settings.emit(result.to_json(), "\n".join(lines))


def _results(settings: _Settings, results: list[Any], verb: str) -> None:
    rows = [
        (r.version, r.description, r.status, f"{r.duration:.2f}s", _commit_column(r.atomic, r.direction))
        for r in results
    ]
    human = _table(["version", "description", "status", "duration", "commit"], rows) or f"Nothing to {verb}."
    settings.emit([r.to_json() for r in results], human)


def _commit_column(atomic: bool, direction: str) -> str:
    """How a migration was committed: ``atomic`` (with its history record), ``per-table``; nothing for a stamp."""
    if direction == "stamp":
        return ""
    return "atomic" if atomic else "per-table"


_NO_ATOMIC_HELP = (
    "Commit each migration table by table (with intent and receipts), even where the catalog can commit its "
    "table changes and its history record all or nothing."
)


@cli.command(context_settings=_TARGET_ARGUMENT)
@click.argument("target", default="head")
@click.option("--allow-changed", is_flag=True, help="Run even if applied migration files changed.")
@click.option("--allow-missing", is_flag=True, help="Run even if applied migration files are missing.")
@click.option("--allow-out-of-order", is_flag=True, help="Apply pending files numbered below the current version.")
@click.option("--no-atomic", is_flag=True, help=_NO_ATOMIC_HELP)
@click.pass_obj
@_handles_errors
def upgrade(
    settings: _Settings,
    target: str,
    allow_changed: bool,
    allow_missing: bool,
    allow_out_of_order: bool,
    no_atomic: bool,
) -> None:
    """Apply pending migrations up to TARGET (head, a version, +N)."""
    runner = settings.runner(progress=True, atomic=not no_atomic)
    results = runner.upgrade(
        target, allow_changed=allow_changed, allow_missing=allow_missing, allow_out_of_order=allow_out_of_order
    )
    _results(settings, results, "apply")


@cli.command(context_settings=_TARGET_ARGUMENT)
@click.argument("target")
@click.option("--allow-changed", is_flag=True, help="Roll back even if the migration files changed.")
@click.option("--yes", is_flag=True, help="Roll back even when it drops tables or columns holding data.")
@click.option("--no-atomic", is_flag=True, help=_NO_ATOMIC_HELP)
@click.pass_obj
@_handles_errors
def downgrade(settings: _Settings, target: str, allow_changed: bool, yes: bool, no_atomic: bool) -> None:
    """Roll back migrations down to TARGET (base, a version that stays applied, -N)."""
    runner = settings.runner(known=True, progress=True, atomic=not no_atomic)
    if not yes:
        from iceberg_ops_provider.runner.commands import data_loss

        destructive = data_loss(runner, target)
        if destructive:
            listed = "; ".join(destructive)
            if not sys.stdin.isatty():
                raise ConfirmationRequiredError(
                    f"This rollback loses data ({listed}); nothing was rolled back. Run it again with --yes."
                )
            click.confirm(f"This rollback loses data ({listed}). Go ahead?", abort=True, err=True)
    _results(settings, runner.downgrade(target, allow_changed=allow_changed), "roll back")


@cli.command(context_settings=_TARGET_ARGUMENT)
@click.argument("version")
@click.pass_obj
@_handles_errors
def stamp(settings: _Settings, version: str) -> None:
    """Record the namespace as migrated to VERSION (head, base, a version) without running anything."""
    _results(settings, settings.runner().stamp(version), "stamp")


@cli.command(context_settings=_TARGET_ARGUMENT)
@click.argument("target", default="head")
@click.option("--direction", type=click.Choice(["upgrade", "downgrade"]), help="Default: inferred from TARGET.")
@click.pass_obj
@_handles_errors
def plan(settings: _Settings, target: str, direction: str | None) -> None:
    """Show the steps a run to TARGET would take; changes nothing."""
    steps = settings.runner().plan(target, direction, inspect=True)  # type: ignore[arg-type]
    lines = []
    for step in steps:
        lines.append(f"{step.direction} {step.version} {step.description}  [{step.risk}]")
        lines += [f"    [{op['risk']}] {op['operation']}" for op in step.operations]
    settings.emit([step.to_json() for step in steps], "\n".join(lines) or "Nothing to do.")


@cli.command()
@click.pass_obj
@_handles_errors
def status(settings: _Settings) -> None:
    """Show the current version, pending migrations, anything odd, the lock, and how migrations commit."""
    runner = settings.runner()
    state = runner.status()
    lines = [
        f"namespace: {state.namespace}",
        f"current:   {state.current or 'base'}",
        f"commits:   {state.commit_mode} ({state.commit_mode_reason})",
    ]
    if not state.applied and not _namespace_known(runner):
        lines.append(f"note:      namespace {state.namespace!r} does not exist yet; `iceberg-ops upgrade` creates it")
    if state.lock:
        stale = state.lock.stale_reason()
        lease = (
            f"stale ({stale}): the next run takes it over"
            if stale
            else f"lease until {state.lock.expires_at().isoformat()}"
        )
        lines.append(f"lock:      held by {state.lock.describe()}, {lease}")
    if state.interrupted:
        from iceberg_ops_provider.runner.commands import interrupted_problem

        lines.append(f"interrupted: {interrupted_problem(state.interrupted, state.interrupted_outcome or '')}")
    pending = [(s.version, s.description, "failed" if s.version in state.failed else "") for s in state.pending]
    lines.append(f"pending:   {len(pending)}")
    if pending:
        lines.append(_table(["version", "description", "note"], pending))
    for label, versions in (
        ("changed", state.changed),
        ("missing", state.missing),
        ("out of order", state.out_of_order),
    ):
        if versions:
            lines.append(f"{label}: {', '.join(versions)}")
    settings.emit(state.to_json(), "\n".join(lines))


@cli.command()
@click.option(
    "--events",
    "show_events",
    is_flag=True,
    help="Show the audit trail: every apply, rollback, stamp, failure, lock takeover, recovery, repair, unlock.",
)
@click.pass_obj
@_handles_errors
def history(settings: _Settings, show_events: bool) -> None:
    """Show the namespace's migration history, oldest first."""
    runner = settings.runner()
    if show_events:
        events = runner.events()
        lines = [
            (e.at.strftime("%Y-%m-%d %H:%M:%S"), e.event, e.version or "", e.executed_by or "", e.message)
            for e in events
        ]
        human = _table(["at", "event", "version", "by", "message"], lines) or "No events."
        settings.emit([event.to_json() for event in events], human)
        return
    rows = runner.history()
    table = [
        (r.version, r.status, r.operation, r.applied_at.strftime("%Y-%m-%d %H:%M:%S"), r.executed_by, r.description)
        for r in rows
    ]
    human = _table(["version", "status", "operation", "applied_at", "by", "description"], table) or (
        f"No history yet: base, {len(runner.state().pending)} pending."
    )
    settings.emit([r.to_json() for r in rows], human)


@cli.command()
@click.pass_obj
@_handles_errors
def current(settings: _Settings) -> None:
    """Print the current version (base when nothing is applied)."""
    runner = settings.runner()
    version = runner.current()
    settings.emit({"current": version}, version or "base")


@cli.command()
@click.pass_obj
@_handles_errors
def check(settings: _Settings) -> None:
    """CI gate: exit 0 when nothing is pending and every model matches its table, else 1."""
    from iceberg_ops_provider.runner.commands import check as run_check

    report = run_check(settings.config())
    lines = [f"{report.namespace}: " + ("up to date" if report.ok else "NOT up to date")]
    lines += [f"  pending {s.version} {s.description}" for s in report.pending]
    lines += [f"  drift [{op.risk}] {op.describe()}" for op in report.drift]
    lines += [f"  problem: {p}" for p in report.problems]
    settings.emit(report.to_json(), "\n".join(lines))
    if not report.ok:
        sys.exit(1)


@cli.command()
@click.option("--yes", is_flag=True, help="Apply without asking.")
@click.pass_obj
@_handles_errors
def repair(settings: _Settings, yes: bool) -> None:
    """Re-record checksums of changed applied files and clear failed attempts (shows what first)."""
    runner = settings.runner(known=True, progress=True)
    planned = runner.repair(dry_run=True)
    if not planned.changes:
        settings.emit(planned.to_json(), "Nothing to repair.")
        return
    click.echo(f"repair: {planned.describe()}", err=True)
    if not yes:
        if not sys.stdin.isatty():
            raise ConfirmationRequiredError(
                f"repair changes the history ({planned.describe()}); nothing was changed. Run it again with --yes."
            )
        click.confirm("Apply?", abort=True, err=True)
    done = runner.repair()
    settings.emit(done.to_json(), f"repaired: {done.describe()}")


@cli.command()
@click.pass_obj
@_handles_errors
def unlock(settings: _Settings) -> None:
    """Release the namespace's migration lock after a crashed run."""
    runner = settings.runner(known=True)
    holder = runner.force_unlock()
    human = f"released the lock held by {holder.describe()}" if holder else "The namespace was not locked."
    settings.emit({"released": holder.to_json() if holder else None}, human)


def _add_command_groups() -> None:
    """Register ``maintain`` and ``move``, which live in modules of their own."""
    from iceberg_ops_provider.cli.maintain import maintain
    from iceberg_ops_provider.cli.move import move

    cli.add_command(maintain)
    cli.add_command(move)


_add_command_groups()


def main() -> None:
    """Console-script entry point."""
    cli(prog_name="iceberg-ops")
