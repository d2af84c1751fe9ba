"""How the command line reports errors: one ``error:`` line, the exit code, a JSON error object with ``--json``.

Exit codes: 1 for a state that stops the run (:data:`STATE_ERRORS`, every transient error), 2 for bad
usage, configuration or input, 130 for Ctrl-C.
"""

from __future__ import annotations

import functools
import json
import signal
import sys
import threading
import traceback
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, NoReturn, TypeVar

import click

from iceberg_ops_provider.cli.wording import OPTIONS, cli_message
from iceberg_ops_provider.errors import (
    CatalogUnavailableError,
    ConcurrentMigrationError,
    IcebergOpsError,
    IntentRecordError,
    IrreversibleMigrationError,
    MigrationError,
    MigrationFailedError,
    MigrationIntegrityError,
    MigrationNotRecordedError,
    PartialMigrationError,
    PublishRefusedError,
    VerificationFailedError,
)

if TYPE_CHECKING:
    from iceberg_ops_provider.cli.settings import Settings

__all__ = [
    "EXIT_INTERRUPTED",
    "EXIT_IRREVERSIBLE",
    "STATE_ERRORS",
    "CommandLine",
    "error_report",
    "exit_interrupted",
    "handles_errors",
    "report_error",
    "unknown_option",
]

F = TypeVar("F", bound=Callable[..., Any])

EXIT_INTERRUPTED = 130
"""The exit code of a command stopped by Ctrl-C (128 + SIGINT), as shells report it."""

EXIT_IRREVERSIBLE = 3
"""The exit code of a ``plan`` whose rollback reaches a migration that cannot be rolled back (not 1: unreachable)."""

STATE_ERRORS = (
    MigrationFailedError,
    MigrationNotRecordedError,
    IrreversibleMigrationError,
    ConcurrentMigrationError,
    MigrationIntegrityError,
    PartialMigrationError,
    IntentRecordError,
    CatalogUnavailableError,
    VerificationFailedError,
    PublishRefusedError,
)
"""Errors that describe the state of the world rather than a mistake in the command: exit 1 (as transient ones)."""


def error_report(settings: Settings, raised: Exception) -> tuple[int, str, str]:
    """The exit code, the one-line message and the error's type name for ``raised`` (a traceback with ``-v``)."""
    exc = settings.translate(raised)
    if isinstance(exc, IcebergOpsError):
        code = 1 if exc.transient or isinstance(exc, STATE_ERRORS) or type(exc) is MigrationError else 2
    else:
        code = 2 if isinstance(exc, ValueError | TypeError | LookupError) else 1
    if settings.verbose:
        traceback.print_exception(raised)
    message = cli_message(exc) or type(exc).__name__
    if isinstance(exc, MigrationIntegrityError):
        message = integrity_message(exc)
    if not isinstance(exc, IcebergOpsError):
        message = f"{type(exc).__name__}: {message}"
    return code, message, type(exc).__name__


def integrity_message(exc: MigrationIntegrityError) -> str:
    """The refusal of files that disagree with history: one problem per line, then this command's ``--allow-*``."""
    context = click.get_current_context(silent=True)
    offered = {opt for param in context.command.params for opt in param.opts} if context is not None else set()
    flags = [OPTIONS[f"allow_{kind}"].flag for kind in exc.kinds if OPTIONS[f"allow_{kind}"].flag in offered]
    head = str(exc).splitlines()[0]
    lines = [head, *(f"  - {' '.join(problem.split())}" for problem in exc.problems)]
    advice = "Restore the files" + (f", or run again with {' '.join(flags)} to go ahead anyway" if flags else "") + "."
    if "changed" in exc.kinds:
        advice += (
            " If the change to an applied file is intended (a reviewed edit), record the file as it is now with "
            "`iceberg-ops repair`."
        )
    return "\n".join([*lines, advice])


def handles_errors(command: F) -> F:
    """The command line's error handling (one ``error:`` line, the exit code, JSON with ``--json``)."""

    @functools.wraps(command)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        settings: Settings = click.get_current_context().obj
        try:
            return command(*args, **kwargs)
        except (click.exceptions.Exit, click.ClickException, click.Abort):
            raise  # click's own: CommandLine reports them
        except Exception as raised:
            code, message, kind = error_report(settings, raised)
            _exit(settings.as_json, _document(message, kind, code), f"error: {message}", code)

    return wrapper  # type: ignore[return-value]


def report_error(settings: Settings, table: str, exc: Exception) -> tuple[int, dict[str, Any]]:
    """One table's failure among several (``--all``): its line on stderr, its exit code and JSON."""
    if isinstance(exc, click.ClickException):
        code, message, kind = exc.exit_code, exc.format_message(), "UsageError"
    else:
        code, message, kind = error_report(settings, exc)
    click.echo(f"error: {table}: {message.removeprefix(f'{table}: ')}", err=True)  # named once, when it names it
    return code, {"table": table, **_document(message, kind, code)}


def _document(message: str, kind: str, code: int) -> dict[str, Any]:
    """The JSON error object ``--json`` prints."""
    return {"error": message, "type": kind, "exit_code": code}


def _exit(as_json: bool, document: dict[str, Any], line: str, code: int, indent: int | None = None) -> NoReturn:
    """Print ``document`` on stdout (with ``--json``) and ``line`` on stderr, then exit with ``code``."""
    if as_json:
        click.echo(json.dumps(document, indent=indent, default=str))
    click.echo(line, err=True)
    sys.exit(code)


def exit_interrupted(settings: Settings, message: str, document: dict[str, Any] | None = None) -> NoReturn:
    """Say what an interrupted command left and how to go on (``document`` with ``--json``), then exit 130."""
    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGINT, signal.SIG_IGN)
    payload = document or _document(message, "KeyboardInterrupt", EXIT_INTERRUPTED)
    _exit(settings.as_json, payload, f"interrupted: {message}", EXIT_INTERRUPTED, indent=2)


_SYNONYMS = {"migrate": "upgrade", "apply": "upgrade", "up": "upgrade", "rollback": "downgrade", "down": "downgrade"}
"""Commands of other migration tools and ours that does the same (click suggests close spellings itself)."""


def unknown_option(ctx: click.Context, option: str, possibilities: Sequence[str] = ()) -> click.UsageError:
    """The usage error of ``option``, which the command does not have; for a global option, where it goes."""
    root = ctx.find_root()
    if any(option in param.opts or option in param.secondary_opts for param in root.command.params):
        path = ctx.command_path.removeprefix(root.command_path).strip()
        return click.UsageError(
            f"{option} is an option of iceberg-ops itself, not of {path}: put it before the command "
            f"(iceberg-ops {option} ... {path}).",
            ctx,
        )
    if option == "--dry-run" and ctx.command.name in ("upgrade", "downgrade", "stamp"):
        return click.UsageError(
            f"No such option '--dry-run'. To see what {ctx.command.name} would do without changing anything, run "
            "iceberg-ops plan with the same target.",
            ctx,
        )
    return click.NoSuchOption(option, possibilities=possibilities, ctx=ctx)


def _wants_json(args: Sequence[str]) -> bool:
    """Whether the command line asks for JSON (``--json`` anywhere before a ``--``)."""
    return "--json" in (args[: args.index("--")] if "--" in args else args)


class CommandLine(click.Group):
    """The ``iceberg-ops`` group: usage errors and Ctrl-C follow the same contract as every other error.

    With ``--json`` a usage error also prints its JSON error object on stdout; Ctrl-C exits 130 with an
    ``interrupted:`` line, while a declined confirmation still says "Aborted!" and exits 1.
    """

    def main(  # type: ignore[override]
        self,
        args: Sequence[str] | None = None,
        prog_name: str | None = None,
        complete_var: str | None = None,
        standalone_mode: bool = True,
        **extra: Any,
    ) -> Any:
        """Run the command line; in standalone mode, exit with the command's exit code."""
        if not standalone_mode:
            return super().main(args, prog_name, complete_var, standalone_mode, **extra)
        argv = list(sys.argv[1:] if args is None else args)
        try:
            try:
                code = super().main(argv, prog_name, complete_var, standalone_mode=False, **extra)
            except click.NoSuchOption as exc:
                raise (unknown_option(exc.ctx, exc.option_name, exc.possibilities or ()) if exc.ctx else exc) from None
        except click.ClickException as exc:
            if _wants_json(argv):
                click.echo(json.dumps(_document(" ".join(exc.format_message().split()), "UsageError", exc.exit_code)))
            exc.show()
            sys.exit(exc.exit_code)
        except click.Abort as exc:
            if not isinstance(exc.__cause__ or exc.__context__, KeyboardInterrupt):  # a confirmation declined
                click.echo("Aborted!", err=True)
                sys.exit(1)
            message = "stopped by Ctrl-C before the command finished; run it again."
            document = _document(message, "KeyboardInterrupt", EXIT_INTERRUPTED)
            _exit(_wants_json(argv), document, f"interrupted: {message}", EXIT_INTERRUPTED)
        sys.exit(code if isinstance(code, int) else 0)

    def resolve_command(
        self, ctx: click.Context, args: list[str]
    ) -> tuple[str | None, click.Command | None, list[str]]:
        """The command ``args`` name; a command of another migration tool (``migrate``) gets ours suggested."""
        name = args[0] if args else None
        if name in _SYNONYMS and self.get_command(ctx, name) is None:
            ctx.fail(f"No such command {name!r}. Did you mean {_SYNONYMS[name]!r}?")
        return super().resolve_command(ctx, args)
