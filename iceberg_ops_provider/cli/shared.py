"""What the ``maintain`` and ``move`` command groups share: catalogs, option types, tables, exits.

The command groups are fronts over the engine: they parse options (sizes, times, ``a=b`` pairs)
into the engine's arguments, open the catalog the global options describe, resolve ``TABLE`` (or a
namespace with ``--all``), and turn the engine's results and errors into output and exit codes.
Bad input is a click usage error naming the option (exit 2).
"""

from __future__ import annotations

import functools
import json
import re
import signal
import sys
import threading
from collections.abc import Callable, Mapping, Sequence
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any, NoReturn, TypeVar

import click

if TYPE_CHECKING:
    from pyiceberg.catalog import Catalog

    from iceberg_ops_provider.cli.main import _Settings

__all__ = [
    "EXIT_INTERRUPTED",
    "FILE_SIZE",
    "OLDER_THAN",
    "SIZE",
    "AgeOrTime",
    "CommandLine",
    "Size",
    "bad_input",
    "check_filter",
    "emit",
    "exit_interrupted",
    "for_each_table",
    "handles_errors",
    "json_option",
    "open_catalog",
    "pairs",
    "report_error",
    "resolve_tables",
    "text_table",
]

F = TypeVar("F", bound=Callable[..., Any])

EXIT_INTERRUPTED = 130
"""The exit code of a command stopped by Ctrl-C (128 + SIGINT), as shells report it."""

_UNITS = {
    "": 1,
    "b": 1,
    "k": 2**10,
    "kib": 2**10,
    "kb": 10**3,
    "m": 2**20,
    "mib": 2**20,
    "mb": 10**6,
    "g": 2**30,
    "gib": 2**30,
    "gb": 10**9,
    "t": 2**40,
    "tib": 2**40,
    "tb": 10**12,
}
_SIZE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([a-z]*)\s*$", re.IGNORECASE)
_CATALOG_FLAGS = ("conn_id", "catalog_kind", "catalog_name", "catalog_uri", "db_path")


def handles_errors(command: F) -> F:
    """The command line's error handling (one ``error:`` line, the exit code, JSON with ``--json``).

    :mod:`iceberg_ops_provider.cli.main` is imported when the command runs, so that module can register
    the command groups when it is imported itself.
    """

    @functools.wraps(command)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        from iceberg_ops_provider.cli.main import _handles_errors

        return _handles_errors(command)(*args, **kwargs)

    return wrapper  # type: ignore[return-value]


def _json_given(ctx: click.Context, param: click.Parameter, value: bool) -> None:
    if value and ctx.find_root().obj is not None:
        ctx.find_root().obj.as_json = True


json_option = click.option(
    "--json",
    is_flag=True,
    expose_value=False,
    is_eager=True,
    callback=_json_given,
    help="Print machine-readable JSON (as --json before the command group does).",
)
"""``--json`` for a subcommand: the same as the global ``--json`` (``maintain health T --json``)."""


def _wants_json(args: Sequence[str]) -> bool:
    """Whether the command line asks for JSON (``--json`` anywhere before a ``--``)."""
    for arg in args:
        if arg == "--":
            return False
        if arg == "--json":
            return True
    return False


class CommandLine(click.Group):
    """The ``iceberg-ops`` group: usage errors and Ctrl-C follow the same contract as every other error.

    With ``--json`` a usage error prints ``{"error", "type": "UsageError", "exit_code": 2}`` on stdout
    next to click's usage text on stderr. Ctrl-C that no command handles itself exits 130 with an
    ``interrupted:`` line (and the JSON error object with ``--json``) instead of click's "Aborted!"
    and exit 1; a declined confirmation still says "Aborted!" and exits 1.
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
            code = super().main(argv, prog_name, complete_var, standalone_mode=False, **extra)
        except click.ClickException as exc:
            if _wants_json(argv):
                document = {"error": " ".join(exc.format_message().split()), "type": "UsageError"}
                click.echo(json.dumps({**document, "exit_code": exc.exit_code}))
            exc.show()
            sys.exit(exc.exit_code)
        except click.Abort as exc:
            if not isinstance(exc.__cause__ or exc.__context__, KeyboardInterrupt):  # a confirmation declined
                click.echo("Aborted!", err=True)
                sys.exit(1)
            message = "stopped by Ctrl-C before the command finished; run it again."
            if _wants_json(argv):
                click.echo(json.dumps({"error": message, "type": "KeyboardInterrupt", "exit_code": EXIT_INTERRUPTED}))
            click.echo(f"interrupted: {message}", err=True)
            sys.exit(EXIT_INTERRUPTED)
        sys.exit(code if isinstance(code, int) else 0)


def text_table(headers: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    """A plain text table, as the other commands print them."""
    from iceberg_ops_provider.cli.main import _table

    return _table(headers, rows)


class Size(click.ParamType):
    """A positive number of bytes: ``134217728``, ``128MiB``, ``128M`` (binary), ``100MB`` (decimal), ``1GiB``.

    Args:
        maximum: The largest size accepted and how to write it (``(2**40, "1 TiB")``); above it, a usage
            error names the option. Default: no bound.
    """

    name = "size"

    def __init__(self, maximum: tuple[int, str] | None = None) -> None:
        self.maximum = maximum

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> int:
        """The number of bytes, or a usage error naming the option."""
        if isinstance(value, int) and not isinstance(value, bool):
            number = value
        else:
            match = _SIZE.match(str(value))
            unit = match.group(2).lower() if match else ""
            if match is None or unit not in _UNITS:
                self.fail(
                    f"{value!r} is not a size: pass bytes (134217728) or a number with a unit such as 128MiB, "
                    "128M, 100MB or 1GiB.",
                    param,
                    ctx,
                )
            number = int(float(match.group(1)) * _UNITS[unit])
        if number < 1:
            self.fail(f"{value!r} must be at least 1 byte.", param, ctx)
        if self.maximum is not None and number > self.maximum[0]:
            self.fail(f"{value!r} is more than {self.maximum[1]}, the largest size accepted.", param, ctx)
        return number


class AgeOrTime(click.ParamType):
    """An age (``3d``, ``12h``, ``30m``, ``0s``) or a past ISO timestamp (naive ones are UTC), as a UTC datetime."""

    name = "age|timestamp"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> datetime:
        """The cut-off, or a usage error naming the option and the forms accepted."""
        if isinstance(value, datetime):
            return value
        from iceberg_ops_provider.maintenance.times import parse_older_than

        try:
            parsed = parse_older_than(str(value))
        except (ValueError, TypeError, OverflowError):
            parsed = None
        if parsed is None:
            self.fail(
                f"{value!r} is not an age or a time: pass an age such as 3d, 12h or 30m, or an ISO timestamp "
                "such as 2026-11-01T00:00:00+00:00.",
                param,
                ctx,
            )
        now = datetime.now(UTC)
        if parsed > now + timedelta(seconds=1):
            self.fail(
                f"{value!r} is in the future ({parsed.isoformat()}, now is {now.replace(microsecond=0).isoformat()}): "
                "everything would count as old. Pass an age (0s means now) or a past timestamp.",
                param,
                ctx,
            )
        return parsed


SIZE = Size()
FILE_SIZE = Size(maximum=(2**40, "1 TiB"))
"""A data file size: at most 1 TiB (a larger target is a typo, and no engine writes such files)."""
OLDER_THAN = AgeOrTime()


def pairs(values: Sequence[str], option: str, example: str = "old_name=new_name") -> dict[str, str]:
    """``["a=b", ...]`` as ``{"a": "b"}``; a usage error naming ``option`` (and showing ``example``) otherwise.

    A repeated key is refused too.
    """
    found: dict[str, str] = {}
    for value in values:
        key, sep, item = value.partition("=")
        key, item = key.strip(), item.strip()
        if not sep or not key or not item:
            raise click.BadParameter(f"{value!r} is not NAME=VALUE (for example {example}).", param_hint=option)
        if key in found:
            raise click.BadParameter(f"{key!r} is given twice.", param_hint=option)
        found[key] = item
    return found


def check_filter(text: str | None, option: str = "--where") -> str | None:
    """``text`` when it parses as a PyIceberg filter (empty: ``None``); else a short usage error naming ``option``.

    The parser's own message lists its whole grammar; this one says where parsing stopped.
    """
    if text is None or not text.strip():
        return None
    from pyiceberg.expressions.parser import parse

    try:
        parse(text)
    except Exception as exc:
        where = re.search(r"\(at char (\d+)\)", str(exc))
        at = f" at character {int(where.group(1)) + 1}" if where else ""
        raise click.BadParameter(
            f"{text!r} does not parse as a filter{at}. Write comparisons of a column with a literal (strings in "
            "single quotes), joined with and/or: \"day >= '2026-11-01' and region in ('eu', 'us')\".",
            param_hint=f"'{option}'",
        ) from exc
    return text


def bad_input(exc: Exception, options: Mapping[str, str]) -> Exception:
    """A usage error naming the option for an engine's plain ``ValueError`` about one of its arguments.

    ``options`` maps the engine's argument names (``where``) to the options that set them
    (``--where``). Any other exception is returned as it is.
    """
    if type(exc) not in (ValueError, TypeError):
        return exc
    message = " ".join(str(exc).split())
    for argument, option in options.items():
        if re.match(rf"{re.escape(argument)}[=\s]", message) or f"pass {argument}" in message:
            error = click.BadParameter(message, param_hint=f"'{option}'")
            error.__cause__ = exc
            return error
    return exc


def open_catalog(settings: _Settings) -> Catalog:
    """The catalog of the global options: ``iceberg-ops.yaml``, ``--catalog*`` flags or ``--conn-id``.

    A project file is needed only when no option names a catalog (a cron job or a CI step can pass
    ``--catalog sqlite --db-path ...`` or ``--conn-id`` alone).
    """
    explicit = any(getattr(settings, name) for name in _CATALOG_FLAGS)
    return settings.config(required=not explicit).build_catalog()


def _namespace_of(settings: _Settings) -> str | None:
    explicit = any(getattr(settings, name) for name in _CATALOG_FLAGS)
    return settings.namespace or settings.config(required=not explicit).namespace


def resolve_tables(settings: _Settings, catalog: Catalog, table: str | None, every: bool) -> list[str]:
    """The tables a maintenance command works on: ``TABLE``, or every table of a namespace with ``--all``.

    ``TABLE`` is ``namespace.table``, or a bare name in the namespace of ``--namespace`` (or the
    project file). With ``--all`` it is the namespace (default: that namespace).

    Raises:
        click.BadParameter: No table or namespace given, or one that does not exist.
    """
    from pyiceberg.exceptions import NoSuchNamespaceError

    if every:
        namespace = table or _namespace_of(settings)
        if not namespace:
            raise click.BadParameter("name the namespace whose tables to work on (or pass --namespace).", "'TABLE'")
        try:
            found = catalog.list_tables(namespace)
        except NoSuchNamespaceError:
            found = None
        if found is None and "." in namespace.strip(".") and catalog.table_exists(namespace):
            raise click.BadParameter(
                f"{namespace!r} is a table, not a namespace: leave out --all to work on that table.",
                param_hint="'TABLE'",
            )
        if found is None or (not found and not catalog.namespace_exists(namespace)):
            raise click.BadParameter(f"namespace {namespace!r} does not exist in the catalog.", param_hint="'TABLE'")
        return sorted(".".join(identifier) for identifier in found)
    if not table:
        raise click.BadParameter("name a table (namespace.table), or a namespace with --all.", param_hint="'TABLE'")
    if "." not in table.strip("."):
        namespace = _namespace_of(settings)
        if not (namespace and catalog.table_exists(f"{namespace}.{table}")) and catalog.namespace_exists(table):
            raise click.BadParameter(
                f"{table!r} is a namespace: pass --all to work on every table of it, or name a table as {table}.TABLE.",
                param_hint="'TABLE'",
            )
        if not namespace:
            raise click.BadParameter(
                f"{table!r} has no namespace: name it as namespace.table (or pass --namespace, or --all for every "
                "table of a namespace).",
                param_hint="'TABLE'",
            )
        table = f"{namespace}.{table}"
    if not catalog.table_exists(table):
        namespace = table.rsplit(".", 1)[0]
        if catalog.namespace_exists(namespace):
            names = sorted(identifier[-1] for identifier in catalog.list_tables(namespace))
            listed = ", ".join(names[:20]) + (", ..." if len(names) > 20 else "") if names else "none"
            hint = f" (tables of {namespace}: {listed}; with --all, {namespace} means every one of them)"
        else:
            hint = f" (namespace {namespace!r} does not exist either)"
        raise click.BadParameter(f"table {table!r} does not exist in the catalog{hint}.", param_hint="'TABLE'")
    return [table]


def emit(settings: _Settings, documents: list[dict[str, Any]], human: list[str], single: bool) -> None:
    """Print the results: their JSON (one document, or a list for several tables) or the human text."""
    if settings.as_json:
        payload: Any = documents[0] if single and len(documents) == 1 else documents
        click.echo(json.dumps(payload, indent=2, default=str))
    else:
        click.echo("\n\n".join(text for text in human if text))


def exit_interrupted(settings: _Settings, message: str, document: dict[str, Any] | None = None) -> NoReturn:
    """Say what an interrupted command left and how to go on, then exit 130.

    With ``--json``, stdout gets ``document`` (what the command did before it stopped) or an error
    object like every other error's. Further Ctrl-C is ignored from here on: the process is exiting.
    """
    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGINT, signal.SIG_IGN)
    if settings.as_json:
        payload = document or {"error": message, "type": "KeyboardInterrupt", "exit_code": EXIT_INTERRUPTED}
        click.echo(json.dumps(payload, indent=2, default=str))
    click.echo(f"interrupted: {message}", err=True)
    sys.exit(EXIT_INTERRUPTED)


def report_error(settings: _Settings, table: str, exc: Exception) -> tuple[int, dict[str, Any]]:
    """One table's failure among several (``--all``): its line on stderr, its exit code and JSON."""
    from iceberg_ops_provider.cli.main import _error_report

    if isinstance(exc, click.ClickException):
        code, message, kind = exc.exit_code, exc.format_message(), "UsageError"
    else:
        code, message, kind = _error_report(settings, exc)
    click.echo(f"error: {table}: {message}", err=True)
    return code, {"table": table, "error": message, "type": kind, "exit_code": code}


def for_each_table(
    settings: _Settings,
    tables: list[str],
    work: Callable[[str], tuple[dict[str, Any], str]],
) -> tuple[list[dict[str, Any]], list[str], int]:
    """Run ``work`` on each table; with several, a failure is reported and the others still run.

    Returns the JSON documents, the human texts and the highest exit code of the failures (0 when none).
    One table's failure propagates as it is, so its error prints as any command's would.
    """
    documents: list[dict[str, Any]] = []
    human: list[str] = []
    worst = 0
    for table in tables:
        try:
            document, text = work(table)
        except Exception as exc:
            if len(tables) == 1:
                raise
            code, document = report_error(settings, table, exc)
            worst = max(worst, code)
            text = ""
        documents.append(document)
        human.append(text)
    return documents, human, worst
