"""``iceberg-ops move ...``: the data mover from the shell.

``move SOURCE TARGET [options]`` runs a move (:meth:`DataMover.run`), ``move plan SOURCE TARGET``
shows its units and what is done (:meth:`DataMover.plan`, changes nothing), and ``move verify
SOURCE TARGET`` compares the moved rows with the source's (:meth:`DataMover.verify`). ``move`` is a
group whose first argument, when it is not ``plan``, ``verify`` or ``run``, starts the arguments of
``run`` (:class:`MoveGroup`); table names always hold a dot, so they never collide with those names.

A move is named by its ``--move-id``, by default a hash of source, target, filter, columns, renames
and mode: running the same command again resumes it, and a finished move run again changes
nothing. The first Ctrl-C stops the move between units (the unit being committed finishes), the
second abandons that unit at once; either way the target holds whole units only, and the command
says how to resume and exits 130.

The source lives in the catalog of the global options; ``--target-conn-id`` or
``--target-catalog*`` put the target in another catalog (the source's settings with those
replaced).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import click

from iceberg_ops_provider.cli_shared import (
    SIZE,
    bad_input,
    check_filter,
    exit_interrupted,
    handles_errors,
    json_option,
    open_catalog,
    pairs,
    text_table,
)
from iceberg_ops_provider.progress import size_text

if TYPE_CHECKING:
    from pyiceberg.catalog import Catalog

    from iceberg_ops_provider.cli import _Settings
    from iceberg_ops_provider.data_migration import DataMover

__all__ = ["MoveGroup", "move"]

_ENGINE_OPTIONS = {
    "where": "--where",
    "columns": "--columns",
    "rename": "--rename",
    "commit_every_bytes": "--commit-every-bytes",
    "parallelism": "--parallelism",
    "sample_size": "--sample-size",
}
_TARGET_OPTIONS = (
    "target_conn_id",
    "target_catalog",
    "target_catalog_uri",
    "target_catalog_name",
    "target_db_path",
    "target_warehouse",
)


class MoveGroup(click.Group):
    """A group that runs its ``run`` command when the first argument names no subcommand.

    ``move a.t b.t --where ...`` is ``move run a.t b.t --where ...``; ``move plan ...``, ``move
    verify ...`` and ``move run ...`` are the subcommands; ``move`` alone or ``move --help`` shows
    the group's help.
    """

    default_command = "run"

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        """Put the default command's name in front of arguments that do not start with a subcommand's."""
        if args and args[0] not in self.commands and args[0] not in ctx.help_option_names:
            args = [self.default_command, *args]
        return super().parse_args(ctx, args)


def _definition(command: Callable[..., Any]) -> Callable[..., Any]:
    """The arguments and options that define a move (and its default id), shared by run, plan and verify."""
    decorators = [
        click.argument("source"),
        click.argument("target"),
        click.option(
            "--where", metavar="FILTER", help="Rows to move, a filter on source columns: \"day >= '2026-11-01'\"."
        ),
        click.option(
            "--columns", "columns", multiple=True, metavar="A,B,...", help="Source columns to move (default all)."
        ),
        click.option(
            "--rename",
            "rename",
            multiple=True,
            metavar="OLD=NEW",
            help="Source column OLD is target column NEW (repeatable).",
        ),
        click.option(
            "--mode",
            type=click.Choice(["append", "overwrite", "incremental"]),
            default="append",
            show_default=True,
            help="append; overwrite (the target's rows matching --where are replaced at the end); incremental "
            "(run again later: only what was appended to the source since).",
        ),
        click.option(
            "--move-id", help="Name of the move (default: derived from the tables, filter, columns, renames, mode)."
        ),
        click.option("--create-target", is_flag=True, help="Create the target from the source's schema when missing."),
        click.option(
            "--commit-every-bytes",
            type=SIZE,
            metavar="SIZE",
            help="Source bytes per unit, one commit each (default 256MiB; a resumed move keeps its first size).",
        ),
        click.option("--source-snapshot-id", type=int, help="Source snapshot a new move reads (default: current)."),
        click.option("--target-conn-id", metavar="NAME", help="The target's catalog from this Airflow connection."),
        click.option("--target-catalog", metavar="KIND", help="The target's catalog kind (sqlite, sql, rest, ...)."),
        click.option("--target-catalog-uri", metavar="URL", help="The target catalog's uri."),
        click.option(
            "--target-catalog-name", metavar="NAME", help="A catalog PyIceberg loads by name, for the target."
        ),
        click.option("--target-db-path", metavar="PATH", help="The target's SQLite catalog database."),
        click.option("--target-warehouse", metavar="PATH", help="The target's sqlite or sql catalog warehouse."),
        json_option,
    ]
    for decorator in reversed(decorators):
        command = decorator(command)
    return command


def _target_catalog(settings: _Settings, options: dict[str, Any]) -> Catalog | None:
    """The target's catalog when a ``--target-*`` option names one: the source's settings with those replaced."""
    from iceberg_ops_provider.cli import _without_airflow_logging
    from iceberg_ops_provider.errors import ProjectConfigError

    if not any(options.get(name) for name in _TARGET_OPTIONS):
        return None
    try:
        config = settings.config(required=False).with_overrides(
            conn_id=options.get("target_conn_id"),
            catalog_kind=options.get("target_catalog"),
            catalog_name=options.get("target_catalog_name"),
            catalog_uri=options.get("target_catalog_uri"),
            db_path=options.get("target_db_path"),
            warehouse=options.get("target_warehouse"),
        )
    except ProjectConfigError as exc:
        raise ProjectConfigError(f"The target's catalog (--target-* options): {exc}") from exc
    if config.airflow_conn_id:
        _without_airflow_logging(lambda: config.catalog_timeout)  # reads the connection, keeping stdout clean
    return config.build_catalog()


_ARGUMENTS = (
    "where|columns|rename|mode|move_id|commit_every_bytes|create_target|verify|parallelism|sample_size|"
    "source_snapshot_id|rewrite"
)
_FLAG = re.compile(rf"(?<![\w-])({_ARGUMENTS})=True\b")  # create_target=True: --create-target
_VALUE = re.compile(rf"(?<![\w-])({_ARGUMENTS})=(?=['\"\w\[{{(-])")  # where='x': --where='x'
_BARE = re.compile(rf"(?<![\w-])({_ARGUMENTS})=")  # "add it to columns=": --columns


def _in_option_words(exc: Exception) -> Exception:
    """A mover's bad-input error with the engine's argument names (``columns=``) written as options (``--columns``)."""
    from iceberg_ops_provider.errors import InvalidMoveError, MoveStateError, ReconciliationError

    if type(exc) not in (InvalidMoveError, ReconciliationError, MoveStateError):
        return exc

    def option(match: re.Match[str]) -> str:
        return "--" + match.group(1).replace("_", "-")

    message = _FLAG.sub(option, str(exc))
    message = _VALUE.sub(lambda match: option(match) + "=", message)
    translated = type(exc)(_BARE.sub(option, message))
    translated.__cause__ = exc
    return translated


def _engine(call: Callable[[], Any]) -> Any:
    """``call()``, with the mover's bad-input errors naming the options."""
    try:
        return call()
    except Exception as exc:
        raise _in_option_words(exc) from exc


def _mover(settings: _Settings, options: dict[str, Any], **extra: Any) -> DataMover:
    """The mover the options describe, on the catalogs of the global and ``--target-*`` options."""
    from iceberg_ops_provider.data_migration import DEFAULT_COMMIT_EVERY_BYTES, DataMover

    columns = [name.strip() for value in options["columns"] for name in value.split(",") if name.strip()]
    source_catalog = open_catalog(settings)
    try:
        return DataMover(
            source_catalog,
            options["source"],
            options["target"],
            _target_catalog(settings, options),
            where=check_filter(options["where"]),
            columns=columns or None,
            rename=pairs(options["rename"], "--rename") or None,
            create_target=options["create_target"],
            mode=options["mode"],
            move_id=options["move_id"] or None,
            commit_every_bytes=options["commit_every_bytes"] or DEFAULT_COMMIT_EVERY_BYTES,
            source_snapshot_id=options["source_snapshot_id"],
            **extra,
        )
    except Exception as exc:
        raise bad_input(_in_option_words(exc), _ENGINE_OPTIONS) from exc


@click.group(cls=MoveGroup)
def move() -> None:
    """Copy the rows of SOURCE into TARGET exactly once, resumably: `move SOURCE TARGET [options]`.

    `move plan SOURCE TARGET` shows the units and what is done; `move verify SOURCE TARGET` compares
    the moved rows with the source's. Run the same command again to resume. The first Ctrl-C stops
    between units, the second at once; exit 130, and the same command resumes.
    """


@move.command("run")
@_definition
@click.option(
    "--verify",
    type=click.Choice(["count", "checksum", "sample"]),
    help="Verify once the move is complete; exit 1 when the target does not hold the source's rows.",
)
@click.option("--rewrite", is_flag=True, help="Re-encode every row instead of copying unchanged files as they are.")
@click.option("--parallelism", type=click.IntRange(min=1), help="Lanes reading and writing at once (default: CPUs).")
@click.option(
    "--sample-size", type=click.IntRange(min=1), default=100, show_default=True, help="Rows --verify sample compares."
)
@click.option("--no-progress", is_flag=True, help="Do not show progress.")
@click.pass_obj
@handles_errors
def run_move(settings: _Settings, **options: Any) -> None:
    """Move the rows of SOURCE into TARGET (the same command again resumes; Ctrl-C stops between units)."""
    from iceberg_ops_provider.cli_progress import ProgressDisplay, StopOnInterrupt

    result = None
    mover: DataMover | None = None
    abandoned = False
    display = ProgressDisplay("none" if options["no_progress"] else "auto")
    stopping = StopOnInterrupt(
        display.note,
        "Stopping once the unit being committed is in (Ctrl-C again abandons it at once; either is safe)...",
    )
    with stopping:
        try:
            with display:
                mover = _mover(
                    settings,
                    options,
                    verify=options["verify"],
                    rewrite=options["rewrite"],
                    parallelism=options["parallelism"],
                    sample_size=options["sample_size"],
                    on_progress=display,
                )
                stopping.stop = mover.stop
                result = _engine(mover.run)
                stopping.finished()
        except KeyboardInterrupt:  # while preparing, or a second Ctrl-C
            abandoned = True
        stopping.finished()
        if abandoned or (stopping.requested and result is not None and not result.complete):
            _interrupted(settings, mover, display.last, result)
        assert result is not None
        settings.emit(result.to_json(), _describe_result(result))
        if not result.complete:
            click.echo(
                f"error: move {result.move_id} is not complete ({result.units_committed} unit(s) committed by this "
                "run); run the same command again.",
                err=True,
            )
            raise SystemExit(1)


def _interrupted(settings: _Settings, mover: DataMover | None, last: Any, result: Any) -> None:
    """Say what an interrupted move left and how to resume it; exit 130."""
    if mover is None:
        exit_interrupted(settings, "stopped before the move started; nothing was written.")
    done = f"{last.units_done} of {last.units_total} units" if last is not None and last.units_total else "whole units"
    exit_interrupted(
        settings,
        f"move {mover.move_id}: {done} committed; the target holds exactly the rows of its committed units. Run the "
        f"same command again to resume (or pass --move-id {mover.move_id} with the same options).",
        result.to_json() if result is not None else None,
    )


def _describe_result(result: Any) -> str:
    state = "complete" if result.complete else "NOT complete"
    lines = [
        f"move {result.source} -> {result.target} ({result.mode}, move id {result.move_id}): {state}",
        f"this run: {result.units_committed} unit(s) committed, {result.units_skipped} skipped, of "
        f"{result.units_total}; {result.rows:,} rows, {size_text(result.bytes_read)} read, "
        f"{size_text(result.bytes_written)} written in {result.files_written} file(s), {result.seconds:.1f} s",
    ]
    if result.verify is not None:
        lines.append(_describe_report(result.verify))
    return "\n".join(lines)


def _describe_report(report: Any) -> str:
    untrusted = report.details.get("untrusted")
    verdict = "ok" if report.ok else ("CANNOT TELL" if untrusted else "DIFFERENT")
    text = (
        f"verify ({report.method}): {verdict}, {report.source_rows:,} source rows, {report.target_rows:,} target rows"
    )
    return f"{text}\n  {untrusted}" if untrusted else text


@move.command("plan")
@_definition
@click.pass_obj
@handles_errors
def plan_move(settings: _Settings, **options: Any) -> None:
    """Show the move's units, their sizes and which are done; changes nothing."""
    try:
        plan = _engine(_mover(settings, options).plan)
    except KeyboardInterrupt:
        exit_interrupted(settings, "stopped while planning the move; plan changes nothing.")
    head = (
        f"move {plan.source} -> {plan.target} ({plan.mode}, move id {plan.move_id})\n"
        f"source snapshot {plan.source_snapshot_id}; {len(plan.units)} unit(s), {size_text(plan.bytes)}, "
        f"{plan.records:,} records; {len(plan.done)} done, {len(plan.pending)} pending"
        + ("" if plan.target_exists else "; the target is created when the move runs")
    )
    rows = [
        (u.index, len(u.files), size_text(u.bytes), f"{u.records:,}", "done" if u.index in plan.done else "pending")
        for u in plan.units
    ]
    lines = [head, text_table(["unit", "files", "size", "records", "status"], rows)]
    lines += [f"note: {note}" for note in plan.notes]
    settings.emit(plan.to_json(), "\n".join(line for line in lines if line))


@move.command("verify")
@_definition
@click.option(
    "--method",
    type=click.Choice(["count", "checksum", "sample"]),
    default="count",
    show_default=True,
    help="Row counts, an order-independent checksum of every value, or sampled rows looked up.",
)
@click.option("--sample-size", type=click.IntRange(min=1), default=100, show_default=True, help="Rows sample compares.")
@click.option("--seed", type=int, help="Seed of the sample's choice of rows (recorded in the report).")
@click.pass_obj
@handles_errors
def verify_move(settings: _Settings, method: str, seed: int | None, **options: Any) -> None:
    """Compare the rows a finished move wrote with the source's; exit 1 when they differ."""
    sample_size = options.pop("sample_size")
    try:
        mover = _mover(settings, options, sample_size=sample_size)
        report = _engine(lambda: mover.verify(method, seed=seed))
    except KeyboardInterrupt:
        exit_interrupted(settings, "stopped while verifying the move; verify changes nothing.")
    settings.emit(report.to_json(), _describe_report(report))
    if not report.ok:
        raise SystemExit(1)
