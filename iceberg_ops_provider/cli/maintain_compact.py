"""``iceberg-ops maintain compact``: bin-pack a table's small files, whole or as units (``--plan``, ``--units``)."""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING, Any

import click

from iceberg_ops_provider.cli.compact_units import (
    PlannedUnits,
    describe_plan,
    plan_document,
    read_units,
    select_units,
    units_by_table,
)
from iceberg_ops_provider.cli.errors import handles_errors
from iceberg_ops_provider.cli.maintain_tables import (
    ALL_OPTION,
    DRY_RUN_OPTION,
    TABLE_ARGUMENT,
    run_on_tables,
)
from iceberg_ops_provider.cli.progress import ProgressDisplay, StopOnInterrupt
from iceberg_ops_provider.cli.shared import FILE_SIZE, Size, check_filter, json_option, text_table
from iceberg_ops_provider.cli.wording import OPTIONS
from iceberg_ops_provider.progress import size_text

if TYPE_CHECKING:
    from iceberg_ops_provider.cli.settings import Settings

__all__ = ["compact"]


def _warn_restorable(table: Any, columns: list[str], verb: str) -> None:
    """Warn that compacting ``table`` loses the values of dropped ``columns`` that ``restore_column`` could restore."""
    name = ".".join(table.name()[-1:])
    listed = ", ".join(columns)
    click.echo(
        f"warning: {'.'.join(table.name())}: compaction {verb} data files that still hold the values of dropped "
        f"column{'s' if len(columns) > 1 else ''} {listed}; the rewritten files leave them out, and "
        f'ctx.restore_column("{name}", "{columns[0]}") would then bring back nulls for those rows. To keep them, '
        "restore the column in a migration before compacting.",
        err=True,
    )


@click.command()
@TABLE_ARGUMENT
@ALL_OPTION
@json_option
@click.option(
    "--target-file-size", type=FILE_SIZE, help="Output file size (128MiB, 1GiB; default: the table's, 512 MiB)."
)
@click.option(
    "--min-input-files",
    type=int,
    help="Partitions with fewer small files are left alone (1: a lone small file is rewritten too, to sort it or "
    "apply its deletes; default: the table's policy, iceberg-ops.maintenance.min-input-files, 5).",
)
@click.option(
    "--where", metavar="FILTER", help="Only files that may hold rows matching this filter: \"day >= '2026-11-01'\"."
)
@click.option(
    "--strategy",
    type=click.Choice(["binpack", "sort"]),
    default="binpack",
    show_default=True,
    help="sort also sorts each output file by the table's sort order.",
)
@DRY_RUN_OPTION
@click.option(
    "--plan",
    "show_plan",
    is_flag=True,
    help="Print the units a compaction would rewrite, each committed on its own (with --json: the document "
    "--units takes); change nothing.",
)
@click.option(
    "--units",
    "units_file",
    metavar="FILE",
    help="Run the units in FILE (what --plan --json printed; - reads standard input), each exactly once: a unit "
    "another run already compacted is skipped.",
)
@click.option(
    "--unit",
    "unit_ids",
    multiple=True,
    metavar="ID",
    help="Only this unit: its id or number in the plan (repeat for several); from --units FILE, or a fresh plan.",
)
@click.option(
    "--commit-every",
    type=Size(maximum=(2**40, "1 TiB"), minimum=0),
    metavar="SIZE",
    help="Commit the groups written, as one snapshot, once their input reaches SIZE (default: the target size; "
    "0: every group its own snapshot).",
)
@click.option(
    "--concurrent-groups",
    type=click.IntRange(min=1),
    metavar="N",
    help="Groups written side by side (default: 2 with --strategy binpack, 1 with --strategy sort).",
)
@click.option("--no-progress", is_flag=True, help="Do not show progress.")
@click.pass_obj
@handles_errors
def compact(
    settings: Settings,
    table: str | None,
    every: bool,
    target_file_size: int | None,
    min_input_files: int | None,
    where: str | None,
    strategy: str,
    dry_run: bool,
    show_plan: bool,
    units_file: str | None,
    unit_ids: tuple[str, ...],
    commit_every: int | None,
    concurrent_groups: int | None,
    no_progress: bool,
) -> None:
    """Bin-pack TABLE's small data files into files near the target size, group by group.

    --plan shows the groups as units; --units FILE and --unit ID run some of them, so several shells
    or machines can share one table's compaction.
    """
    from iceberg_ops_provider.maintenance.binpack import min_input_files_problem
    from iceberg_ops_provider.maintenance.compaction import compact_small_files_streaming
    from iceberg_ops_provider.maintenance.policy import table_policy
    from iceberg_ops_provider.migration.restore import restorable_columns

    problem = None if min_input_files is None else min_input_files_problem(min_input_files)  # before any table opens
    if problem is not None:
        raise click.BadParameter(f"--min-input-files {problem}.", param_hint="'--min-input-files'")
    where = check_filter(where)
    if show_plan or units_file or unit_ids:
        batching = [
            flag
            for flag, value in (("--commit-every", commit_every), ("--concurrent-groups", concurrent_groups))
            if value is not None
        ]
        if batching:
            raise click.UsageError(
                f"{' and '.join(batching)} with {'--plan' if show_plan else '--units/--unit'}: units are written one "
                "at a time and each is its own commit. Drop it, or compact the whole table without units."
            )
        plan_options = {
            "target_file_size_bytes": target_file_size,
            "min_input_files": min_input_files,
            "where": where or None,
            "strategy": strategy,
        }
        _compact_units(settings, table, every, show_plan, units_file, unit_ids, dry_run, plan_options, no_progress)
        return
    display, stop, stopping = _stoppable(
        no_progress or dry_run,
        "Stopping once the groups being written are committed (Ctrl-C again stops at once; the files of groups "
        "not committed are deleted)...",
    )

    def call(loaded: Any) -> Any:
        if stop.is_set():
            raise KeyboardInterrupt  # no further table starts
        restorable = restorable_columns(loaded.metadata, loaded.io)
        if restorable and not dry_run:
            _warn_restorable(loaded, restorable, "rewrites")
        policy = table_policy(loaded)
        result = compact_small_files_streaming(
            loaded,
            target_file_size_bytes=target_file_size,
            min_input_files=policy.min_input_files if min_input_files is None else min_input_files,
            max_rewrite_bytes=policy.max_rewrite_bytes,
            where=where or None,
            strategy=strategy,  # type: ignore[arg-type]
            dry_run=dry_run,
            on_progress=display,
            should_stop=stop.is_set,
            commit_every_bytes=commit_every,
            max_concurrent_groups=concurrent_groups,
        )
        if result.stopped:  # the engine said after how many groups
            raise KeyboardInterrupt
        if restorable and dry_run and result.file_groups_count:
            _warn_restorable(loaded, restorable, "would rewrite")
        return result

    with stopping:
        run_on_tables(settings, table, every, call, _describe_compaction, display=display)


def _compact_units(
    settings: Settings,
    table: str | None,
    every: bool,
    show_plan: bool,
    units_file: str | None,
    unit_ids: tuple[str, ...],
    dry_run: bool,
    plan_options: dict[str, Any],
    no_progress: bool,
) -> None:
    """``compact --plan``, ``--units FILE`` and ``--unit ID`` (see :mod:`.compact_units`)."""
    from iceberg_ops_provider.maintenance.compaction_units import (
        plan_compaction_units,
        planning_arguments,
        run_compaction_units,
    )
    from iceberg_ops_provider.maintenance.policy import table_policy

    given = {name: value for name, value in plan_options.items() if value is not None}
    planning_flags = [OPTIONS[name].flag for name in planning_arguments(given)]

    if show_plan and units_file:
        raise click.UsageError("--plan and --units: the file is a plan already; give one of them.")
    if units_file and dry_run:
        raise click.UsageError("--dry-run with --units: the units are a plan already (--plan shows one); drop one.")
    if units_file and planning_flags:
        raise click.UsageError(
            f"{', '.join(planning_flags)} with --units: each unit carries the strategy and target size it was "
            "planned with. Give these when planning (--plan), not when running its units."
        )
    if every and (units_file or unit_ids):
        raise click.UsageError("--all with --units or --unit: units belong to one table; name it as TABLE.")

    def planned(loaded: Any) -> list[Any]:
        policy = table_policy(loaded)
        minimum = plan_options["min_input_files"] or policy.min_input_files
        return plan_compaction_units(
            loaded, **{**plan_options, "min_input_files": minimum}, max_rewrite_bytes=policy.max_rewrite_bytes
        )

    if show_plan:

        def plan(loaded: Any) -> PlannedUnits:
            units = planned(loaded)
            if unit_ids:
                chosen = {unit["unit_id"] for unit in select_units(_json(units), unit_ids, "the plan")}
                units = [unit for unit in units if unit.unit_id in chosen]
            return PlannedUnits(".".join(loaded.name()), tuple(units))

        run_on_tables(settings, table, every, plan, describe_plan, document=plan_document, changes=False)
        return

    from_file: dict[str, list[dict[str, Any]]] | None = None
    if units_file:
        grouped = units_by_table(select_units(read_units(units_file), unit_ids, units_file))
        if table:
            name = table if "." in table else f"{settings.namespace}.{table}"
            if name not in grouped:
                raise click.BadParameter(
                    f"{units_file} has no unit of {name} (it has units of {', '.join(grouped) or 'no table'}).",
                    param_hint="'--units'",
                )
            table, from_file = name, {name: grouped[name]}
        elif len(grouped) == 1:
            table, from_file = next(iter(grouped)), grouped
        else:
            raise click.UsageError(
                f"{units_file} has units of {len(grouped)} tables ({', '.join(grouped)}): name one as TABLE."
            )
    display, stop, stopping = _stoppable(
        no_progress,
        "Stopping once the unit being written is committed (Ctrl-C again stops at once; its files are deleted)...",
    )

    def run(loaded: Any) -> Any:
        name = ".".join(loaded.name())
        units = from_file[name] if from_file is not None else select_units(_json(planned(loaded)), unit_ids, "the plan")
        result = run_compaction_units(loaded, units, on_progress=display, should_stop=stop.is_set)
        if result.stopped:
            raise KeyboardInterrupt
        return result

    with stopping:
        run_on_tables(settings, table, False, run, _describe_compaction, display=display)


def _stoppable(quiet: bool, message: str) -> tuple[ProgressDisplay, threading.Event, StopOnInterrupt]:
    """The progress display, the stop request the first Ctrl-C sets (printing ``message``), and that handler."""
    display = ProgressDisplay("none" if quiet else "auto")
    stop = threading.Event()
    stopping = StopOnInterrupt(display.note, message)
    stopping.stop = stop.set
    return display, stop, stopping


def _json(units: list[Any]) -> list[dict[str, Any]]:
    return [unit.to_json() for unit in units]


def _describe_compaction(result: Any) -> str:
    verb = "would rewrite" if result.dry_run else "rewrote"
    head = (
        f"{result.table}: {verb} {result.rewritten_data_files_count} small file(s), "
        f"{size_text(result.rewritten_bytes_count)}, in "
        f"{result.file_groups_count - result.skipped_groups_count} group(s)"
    )
    deferred = (
        f"; {result.deferred_groups_count} group(s), {size_text(result.deferred_bytes_count)}, left for a later run "
        "(the policy's iceberg-ops.maintenance.max-rewrite-bytes)"
        if result.deferred_groups_count
        else ""
    )
    if not result.file_groups_count:
        if result.deferred_groups_count:
            return f"{result.table}: nothing compacted: no group fits in the run's limit{deferred}."
        return f"{result.table}: nothing to compact (no partition has enough small files)."
    if not result.dry_run:
        head += (
            f" into {result.added_data_files_count} file(s), {size_text(result.added_bytes_count)}; "
            f"{result.committed_groups_count} committed in {result.duration_seconds:.1f} s"
        )
        if result.skipped_groups_count:
            head += f"; {result.skipped_groups_count} skipped (another run had already compacted their files)"
    head += deferred
    rows = [
        (g.index, g.partition or "-", g.status, len(g.data_files), size_text(g.bytes), len(g.added_data_files))
        for g in result.groups
    ]
    return head + "\n" + text_table(["group", "partition", "status", "files", "size", "written"], rows)
