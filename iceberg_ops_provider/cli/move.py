"""``iceberg-ops move ...``: the data mover from the shell (:meth:`DataMover.run`, ``plan``, ``verify``).

The first Ctrl-C stops a move between units, the second abandons the unit being committed; either way
the target holds whole units only, and the command says how to resume and exits 130.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from iceberg_ops_provider.catalogs import empty_catalog
from iceberg_ops_provider.cli.airflow_connections import without_airflow_logging
from iceberg_ops_provider.cli.catalog_flags import CatalogFlags, with_flags
from iceberg_ops_provider.cli.errors import exit_interrupted, handles_errors
from iceberg_ops_provider.cli.settings import open_catalog
from iceberg_ops_provider.cli.shared import SIZE, check_filter, json_option, pairs, text_table
from iceberg_ops_provider.cli.wording import global_options, move_command, usage_error
from iceberg_ops_provider.errors import CatalogNotFoundError, IcebergOpsError, MoveStateError
from iceberg_ops_provider.messages import Message
from iceberg_ops_provider.progress import size_text

if TYPE_CHECKING:
    from pyiceberg.catalog import Catalog
    from pyiceberg.table import Table

    from iceberg_ops_provider.cli.settings import Settings
    from iceberg_ops_provider.data_migration import DataMover

__all__ = ["MoveGroup", "definition", "move", "mover_for"]


def _target_options(options: dict[str, Any]) -> dict[str, Any]:
    """The ``--target-*`` options (the target's catalog) as given."""
    return {name: value for name, value in options.items() if name.startswith("target_")}


def _columns(ctx: click.Context, param: click.Parameter, values: tuple[str, ...]) -> list[str]:
    columns = [name.strip() for value in values for name in value.split(",")]
    if "" in columns:
        raise click.BadParameter(
            f"{','.join(values)!r} has an empty column name: list names separated by single commas (id,day,amount)."
        )
    return columns


class MoveGroup(click.Group):
    """A group that runs its ``run`` command when the first argument names no subcommand (table names hold a dot)."""

    default_command = "run"

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        """Put the default command's name in front of arguments that do not start with a subcommand's.

        Flags typed between ``move`` and a subcommand (``move --json plan A B``) are the subcommand's.
        """
        if args and args[0] not in ctx.help_option_names:
            first = next((i for i, arg in enumerate(args) if not arg.startswith("-")), None)
            if first and args[first] in self.commands and all(arg.startswith("--") for arg in args[:first]):
                args = [args[first], *args[:first], *args[first + 1 :]]
            elif args[0] not in self.commands:
                args = [self.default_command, *args]
        return super().parse_args(ctx, args)


def definition(command: Callable[..., Any]) -> Callable[..., Any]:
    """The arguments and options that define a move (and its default id), shared by its subcommands."""
    decorators = [
        click.argument("source"),
        click.argument("target"),
        click.option(
            "--where", metavar="FILTER", help="Rows to move, a filter on source columns: \"day >= '2026-11-01'\"."
        ),
        click.option(
            "--columns",
            multiple=True,
            callback=_columns,
            metavar="A,B,...",
            help="Source columns to move (default all).",
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
            "--branch",
            metavar="NAME",
            help="Write-audit-publish: the move commits to this branch of the target, cut from main; "
            "`move audit` checks it, `move publish` makes it main's.",
        ),
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


def _target_catalog(settings: Settings, options: dict[str, Any], *, read_only: bool = False) -> Catalog | None:
    """The target's catalog when a ``--target-*`` option names one: the source's settings with those replaced.

    ``--target-db-path`` alone keeps the target's data beside its database (``<name>_warehouse``).
    ``read_only``: a missing target database is not created; the target is then found missing.
    """
    if not any(_target_options(options).values()):
        return None
    warehouse = options.get("target_warehouse")
    db_path = options.get("target_db_path")
    if db_path and not warehouse:
        path = Path(db_path).expanduser().resolve()
        warehouse = str(path.with_name(f"{path.stem}_warehouse"))
    flags = CatalogFlags(
        conn_id=options.get("target_conn_id"),
        kind=options.get("target_catalog"),
        name=options.get("target_catalog_name"),
        uri=options.get("target_catalog_uri"),
        db_path=db_path,
        warehouse=warehouse,
    )
    spec = None
    try:
        config = with_flags(settings.config(required=False), flags, role="target")
        if config.airflow_conn_id:
            without_airflow_logging(lambda: config.catalog_spec)  # reads the connection, keeping stdout clean
        spec = config.catalog_spec
        return config.open_catalog(access="read" if read_only else "create")
    except CatalogNotFoundError:
        if read_only:
            return empty_catalog()  # the target is then found missing, as a target nothing was moved to
        raise
    except Exception as exc:
        raise _for_target(exc, spec) from exc


def _for_target(exc: Exception, spec: Any) -> Exception:
    """An error met opening the target's catalog, saying so; its type (and so the exit code) stays."""
    from iceberg_ops_provider.catalogs import CatalogSpec, translate

    translated = translate(exc, spec if isinstance(spec, CatalogSpec) else CatalogSpec(kind="pyiceberg")) or exc
    if not isinstance(translated, IcebergOpsError):
        return exc
    found = translated.args[0] if len(translated.args) == 1 else str(translated)
    said = found if isinstance(found, Message) else Message((str(found),))
    first = said.parts[0] if said.parts else ""
    if isinstance(first, str) and first.startswith("The "):
        said = Message(("t" + first[1:], *said.parts[1:]), said.about)
    return _reworded(translated, "The target catalog: " + said)


def _reworded(error: IcebergOpsError, message: Message) -> IcebergOpsError:
    """A copy of ``error`` (same type and attributes, so the same exit code) saying ``message``."""
    renamed = type(error).__new__(type(error))
    renamed.__dict__.update(error.__dict__)
    renamed.args = (message,)
    return renamed


def mover_for(settings: Settings, options: dict[str, Any], *, read_only: bool = False, **extra: Any) -> DataMover:
    """The mover the options describe; ``--where`` is bound to the source's columns before anything is printed."""
    from iceberg_ops_provider.data_migration import DEFAULT_COMMIT_EVERY_BYTES, DataMover
    from iceberg_ops_provider.data_migration.resolution import bound_filter, load_source

    elsewhere = any(_target_options(options).values())  # then the source is only read
    source_catalog = open_catalog(settings, access="read" if read_only or elsewhere else "create")
    try:
        mover = DataMover(
            source_catalog,
            options["source"],
            options["target"],
            _target_catalog(settings, options, read_only=read_only),
            where=check_filter(options["where"]),
            columns=options["columns"] or None,
            rename=pairs(options["rename"], "--rename") or None,
            create_target=options["create_target"],
            mode=options["mode"],
            move_id=options["move_id"] or None,
            commit_every_bytes=options["commit_every_bytes"] or DEFAULT_COMMIT_EVERY_BYTES,
            source_snapshot_id=options["source_snapshot_id"],
            branch=options["branch"] or None,
            **extra,
        )
        if mover.where_text is not None:
            bound_filter(mover, load_source(mover).schema())
    except Exception as exc:
        raise (usage_error(exc) or exc) from exc
    if options["source_snapshot_id"] is not None:
        _check_snapshot(mover, options["source_snapshot_id"])
    return mover


def _target_table(mover: DataMover) -> Table | None:
    """The target as the catalog has it now (``None``: not there yet)."""
    from pyiceberg.exceptions import NoSuchTableError

    try:
        return mover.target_catalog.load_table(mover.target)
    except NoSuchTableError:
        return None


def _check_snapshot(mover: DataMover, snapshot_id: int) -> None:
    """Refuse a ``--source-snapshot-id`` the source does not have, when it starts a new move."""
    from pyiceberg.exceptions import NoSuchTableError

    from iceberg_ops_provider.data_migration.resolution import current_state

    try:
        source = mover.source_catalog.load_table(mover.source)
    except NoSuchTableError:
        return  # the engine says the source does not exist
    if source.metadata.snapshot_by_id(snapshot_id) is not None:
        return
    if current_state(mover, _target_table(mover)) is not None:
        return  # a move under way reads the snapshot it started with
    current = source.metadata.current_snapshot_id
    raise click.BadParameter(
        f"{snapshot_id} is not a snapshot of {mover.source} (expired, or of another table); its current snapshot "
        f"is {current}. Pass one of its snapshots, or leave the option out to move the current one.",
        param_hint="'--source-snapshot-id'",
    )


def _resume_notes(mover: DataMover) -> list[str]:
    """What a run resumes (the units already committed, their size), or the other moves a new move's target holds."""
    from iceberg_ops_provider.data_migration.resolution import current_state

    target = _target_table(mover)
    state = current_state(mover, target)
    if state is None:
        return _other_moves_notes(mover, target)
    if state.complete:
        return []
    notes = [f"resuming: {len(state.done)} of {state.unit_count} units committed"]
    if state.commit_every_bytes != mover.commit_every_bytes:
        notes.append(f"units of {size_text(state.commit_every_bytes)} each, as the move started with")
    return notes


def _other_moves_notes(mover: DataMover, target: Table | None) -> list[str]:
    """For a new move: the other moves from the same source ``target`` holds, and what that means."""
    from pyiceberg.exceptions import NoSuchTableError

    from iceberg_ops_provider.data_migration.state import PROPERTY_PREFIX, moves_from_source

    if target is None or not any(key.startswith(PROPERTY_PREFIX) for key in target.metadata.properties):
        return []  # no earlier move: the source need not be loaded
    try:
        source = mover.source_catalog.load_table(mover.source)
    except NoSuchTableError:
        return []  # the move itself says the source does not exist
    others = moves_from_source(target.metadata, str(source.metadata.table_uuid))
    others.pop(mover.move_id, None)
    if not others:
        return []
    listed = ", ".join(f"{move_id} ({rows:,} rows)" for move_id, rows in sorted(others.items()))
    head = f"{mover.target} already holds rows of {len(others)} other move(s) from {mover.source}: {listed}. "
    try:
        selected: int | None = target.scan(row_filter=mover.where).count()
    except Exception:  # a --where naming source columns the target renamed: not known
        selected = None
    if selected == 0:  # moving day after day, each with its own --where
        return [head + f"These options make a new move ({mover.move_id}); none of the rows they select is there yet"]
    overlap = "rows of it may already match" if selected is None else f"{selected:,} of its rows already match"
    return [
        f"warning: {head}These options make a new move ({mover.move_id}), and {overlap} what this move selects: "
        "the move copies those rows again, so they will be there twice. "
        "To avoid duplicates, go on with the earlier move instead (run it with its own options or pass its "
        "--move-id), narrow --where to rows not moved yet, or pass --mode overwrite to replace the rows the "
        "--where selects"
    ]


@click.group(cls=MoveGroup)
def move() -> None:
    """Copy the rows of SOURCE into TARGET exactly once, resumably: `move SOURCE TARGET [options]`.

    `move plan SOURCE TARGET` shows the units and what is done; `move verify SOURCE TARGET` compares
    the moved rows with the source's. Run the same command again to resume. The first Ctrl-C stops
    between units, the second at once; exit 130, and the same command resumes.
    """


@move.command("run")
@definition
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
def run_move(settings: Settings, **options: Any) -> None:
    """Move the rows of SOURCE into TARGET (the same command again resumes; Ctrl-C stops between units)."""
    from iceberg_ops_provider.cli.progress import ProgressDisplay, StopOnInterrupt

    result = None
    mover: DataMover | None = None
    notes: list[str] = []
    abandoned = False
    display = ProgressDisplay("none" if options["no_progress"] else "auto")
    stopping = StopOnInterrupt(
        display.note,
        "Stopping once the unit being committed is in (Ctrl-C again abandons it at once; either is safe)...",
    )
    with stopping:
        try:
            with display:
                mover = mover_for(
                    settings,
                    options,
                    verify=options["verify"],
                    rewrite=options["rewrite"],
                    parallelism=options["parallelism"],
                    sample_size=options["sample_size"],
                    on_progress=display,
                )
                stopping.stop = mover.stop
                notes = _resume_notes(mover)
                for note in notes:
                    display.note(note if note.startswith("warning: ") else f"note: {note}")
                result = mover.run()
                stopping.finished()
        except KeyboardInterrupt:  # while preparing, or a second Ctrl-C
            abandoned = True
        stopping.finished()
        if abandoned or (stopping.requested and result is not None and not result.complete):
            _interrupted(settings, mover, display.last, result, notes)
        assert result is not None
        settings.emit({**result.to_json(), "notes": notes}, _describe_result(result, options["branch"]))
        if not result.complete:
            click.echo(
                f"error: move {result.move_id} is not complete ({result.units_committed} unit(s) committed by this "
                "run); run the same command again.",
                err=True,
            )
            raise SystemExit(1)


def _interrupted(settings: Settings, mover: DataMover | None, last: Any, result: Any, notes: list[str]) -> None:
    """Say what an interrupted move left and how to resume it; exit 130."""
    if mover is None:
        exit_interrupted(settings, "stopped before the move started; nothing was written.")
    if last is not None and last.units_total and last.units_done:
        done = (
            f"{last.units_done} of {last.units_total} units committed; the target holds exactly the rows of its "
            "committed units"
        )
    else:  # no unit reported done: at most the one whose commit was under way is in, and whole
        before = next((note.removeprefix("resuming: ") for note in notes if note.startswith("resuming: ")), None)
        done = (
            f"{before} before this run, none by it" if before else "no unit committed before the stop"
        ) + " (a unit being committed then is in whole or not at all)"
    exit_interrupted(
        settings,
        f"move {mover.move_id}: {done}. Run the same command again to resume (or pass --move-id {mover.move_id} "
        "with the same options).",
        {**result.to_json(), "notes": notes} if result is not None else None,
    )


def _describe_result(result: Any, branch: str | None = None) -> str:
    state = "complete" if result.complete else "NOT complete"
    on = f" on branch {branch}" if branch else ""
    lines = [
        f"move {result.source} -> {result.target}{on} ({result.mode}, move id {result.move_id}): {state}",
        f"this run: {result.units_committed} unit(s) committed, {result.units_skipped} skipped"
        f"{' (already committed by another run)' if result.units_skipped else ''}, of "
        f"{result.units_total}; {result.rows:,} rows, {size_text(result.bytes_read)} read, "
        f"{size_text(result.bytes_written)} written in {result.files_written} file(s), {result.seconds:.1f} s",
    ]
    if result.verify is not None:
        lines.append(_describe_report(result.verify))
    if branch and result.complete and not result.units_total and not result.target_snapshot_ids:
        lines.append("nothing new to move since the published run: no branch was cut, nothing to audit or publish")
    elif branch and result.complete:
        lines.append(
            f"main of {result.target} is unchanged until the branch is audited and published: `iceberg-ops move "
            "audit`, then `move publish`, with the same arguments"
        )
    return "\n".join(lines)


def _describe_report(report: Any) -> str:
    untrusted = report.details.get("untrusted")
    verdict = "ok" if report.ok else ("CANNOT TELL" if untrusted else "DIFFERENT")
    text = (
        f"verify ({report.method}): {verdict}, {report.source_rows:,} source rows, "
        f"{report.target_rows:,} rows of this move in the target"
    )
    return f"{text}\n  {untrusted}" if untrusted else text


@move.command("plan")
@definition
@click.pass_obj
@handles_errors
def plan_move(settings: Settings, **options: Any) -> None:
    """Show the move's units, their sizes and which are done; changes nothing."""
    try:
        plan = mover_for(settings, options, read_only=True).plan()
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
@definition
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
def verify_move(settings: Settings, method: str, seed: int | None, **options: Any) -> None:
    """Compare the rows a finished move wrote with the source's; exit 1 when they differ."""
    sample_size = options.pop("sample_size")
    try:
        mover = mover_for(settings, options, read_only=True, sample_size=sample_size)
        try:
            report = mover.verify(method, seed=seed)
        except MoveStateError as exc:
            raise _with_move_command(exc, settings, options) from exc
    except KeyboardInterrupt:
        exit_interrupted(settings, "stopped while verifying the move; verify changes nothing.")
    settings.emit(report.to_json(), _describe_report(report))
    if not report.ok:
        raise SystemExit(1)


def _with_move_command(error: IcebergOpsError, settings: Settings, options: dict[str, Any]) -> IcebergOpsError:
    """``error`` with the move it advises to run first written as this command line's move, to paste as it is."""
    from iceberg_ops_provider.messages import Hint

    found = error.args[0] if len(error.args) == 1 else None
    if not isinstance(found, Message) or not any(
        isinstance(part, Hint) and part.key == "run_move_first" for part in found.parts
    ):
        return error
    arguments = {
        "where": options["where"],
        "columns": options["columns"],
        "rename": pairs(options["rename"], "--rename"),
        "mode": options["mode"],
        "move_id": options["move_id"],
        "commit_every_bytes": options["commit_every_bytes"],
        "source_snapshot_id": options["source_snapshot_id"],
        "branch": options["branch"],
    }
    command = move_command(
        options["source"],
        options["target"],
        arguments,
        target_options=_target_options(options),
        prefix=global_options(settings),
    )
    parts = tuple(
        Hint(part.key, part.python, {**part.details, "command": command})
        if isinstance(part, Hint) and part.key == "run_move_first"
        else part
        for part in found.parts
    )
    return _reworded(error, Message(parts, found.about))
