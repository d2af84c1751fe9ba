"""``iceberg-ops maintain ...``: table maintenance from the shell, one engine call per command.

Each command is :mod:`iceberg_ops_provider.maintenance`'s function with its parameters as options:
``health`` (:func:`table_health_report`), ``compact`` (:func:`compact_small_files_streaming`),
``expire`` (:func:`expire_snapshots`), ``orphans`` (:func:`remove_orphan_files`) and ``manifests``
(:func:`rewrite_manifests`). ``TABLE`` is ``namespace.table`` (or a bare name in ``--namespace``);
with ``--all`` it is a namespace and every table of it is worked on, one after the other (a table's
failure is reported and the others still run).

``--json`` prints the function's ``to_json()`` (the document the Airflow operators push to XCom;
a list with ``--all``). Exit codes: 0 done; 1 ``health`` found maintenance due, or a transient
failure (a commit conflict, storage that did not answer); 2 bad input, naming the option; 130
interrupted (Ctrl-C).
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable
from datetime import datetime
from typing import TYPE_CHECKING, Any

import click

from iceberg_ops_provider.cli.errors import exit_interrupted, handles_errors
from iceberg_ops_provider.cli.progress import ProgressDisplay, StopOnInterrupt
from iceberg_ops_provider.cli.settings import open_catalog
from iceberg_ops_provider.cli.shared import (
    FILE_SIZE,
    OLDER_THAN,
    SIZE,
    bad_input,
    check_filter,
    emit,
    for_each_table,
    json_option,
    pairs,
    resolve_tables,
    text_table,
)
from iceberg_ops_provider.cli.wording import global_options, maintenance_command
from iceberg_ops_provider.progress import size_text

if TYPE_CHECKING:
    from iceberg_ops_provider.cli.settings import Settings

__all__ = ["maintain"]

_TABLE = click.argument("table", required=False, metavar="TABLE")
_ALL = click.option(
    "--all", "every", is_flag=True, help="TABLE is a namespace: work on every table of it (default: --namespace)."
)
_DRY_RUN = click.option("--dry-run", is_flag=True, help="Report what a real run would do; change nothing.")


@click.group()
@json_option
def maintain() -> None:
    """Table maintenance without a JVM: health report, compaction, snapshot expiry, orphan files, manifests.

    TABLE is namespace.table, or with --all a namespace (every table of it). Exit codes: 0 done,
    1 health found maintenance due or a transient failure, 2 bad input, 130 interrupted.
    """


def _run(
    settings: Settings,
    table: str | None,
    every: bool,
    call: Callable[[Any], Any],
    describe: Callable[[Any], str],
    document: Callable[[Any], dict[str, Any]] | None = None,
    display: ProgressDisplay | None = None,
) -> tuple[list[Any], int]:
    """Open the catalog, call ``call`` on each table, print the results; the results and the worst exit code.

    ``display`` (the progress ``call`` reports to) is shown while the tables are worked on and
    closed before the results are printed.
    """
    results: list[Any] = []
    try:
        catalog = open_catalog(settings, create=False)  # every command works on tables that exist already
        names = resolve_tables(settings, catalog, table, every)
    except KeyboardInterrupt:
        exit_interrupted(settings, "stopped before any table was worked on; nothing was changed.")

    def work(name: str) -> tuple[dict[str, Any], str]:
        loaded = catalog.load_table(name)
        try:
            result = call(loaded)
        except Exception as exc:
            raise bad_input(exc) from exc
        results.append(result)
        return (document or (lambda r: r.to_json()))(result), describe(result)

    try:
        with display if display is not None else contextlib.nullcontext():
            documents, human, worst = for_each_table(settings, names, work)
    except KeyboardInterrupt:
        done = ", ".join(r.table for r in results) or "none"
        exit_interrupted(
            settings,
            f"stopped during maintenance (tables finished: {done}). What was committed stays committed and nothing "
            "else changed the tables; run the command again to finish.",
        )
    if every and not names:
        human = [f"No tables in namespace {table or settings.namespace}."]
    emit(settings, documents, human, single=not every)
    return results, worst


def _exit(code: int) -> None:
    if code:
        raise SystemExit(code)


@maintain.command()
@_TABLE
@_ALL
@json_option
@click.option(
    "--target-file-size", type=FILE_SIZE, help="Data file target the files are judged against (default: the table's)."
)
@click.option(
    "--threshold",
    "thresholds",
    multiple=True,
    metavar="NAME=VALUE",
    help="A health threshold (repeatable), e.g. min_input_files=10, max_snapshots=50, max_snapshot_age=86400 "
    "(seconds); see docs/maintenance/table_health_report.md.",
)
@click.option("--max-partitions", type=click.IntRange(min=0), default=100, help="Partitions listed in the JSON.")
@click.pass_obj
@handles_errors
def health(
    settings: Settings,
    table: str | None,
    every: bool,
    target_file_size: int | None,
    thresholds: tuple[str, ...],
    max_partitions: int,
) -> None:
    """Report what TABLE needs (reads metadata only); exit 1 when maintenance is due, so CI can gate on it."""
    from iceberg_ops_provider.maintenance.health import HealthThresholds, table_health_report

    limits = HealthThresholds.from_json(_thresholds(thresholds, target_file_size))
    reports, worst = _run(
        settings,
        table,
        every,
        lambda loaded: table_health_report(loaded, limits),
        lambda report: _describe_health(settings, report),
        document=lambda report: report.to_json(max_partitions=max_partitions),
    )
    _exit(max(worst, 1 if any(report.needs for report in reports) else 0))


def _describe_health(settings: Settings, report: Any) -> str:
    """The report's summary, each recommendation as the ``iceberg-ops maintain`` command that carries it out.

    The command repeats the global options that named the catalog; sizes are written as the size
    options take them (``512MiB``) and a cut-off time as the age it was (``--older-than 5d``).
    """
    prefix = global_options(settings)

    def command(recommendation: Any) -> str:
        typed = maintenance_command(
            recommendation.action, recommendation.params, report.table, at=report.generated_at, prefix=prefix
        )
        return typed or recommendation.call()

    return report.summary(call=command)


def _thresholds(values: tuple[str, ...], target_file_size: int | None) -> dict[str, Any]:
    """``--threshold`` pairs as :meth:`HealthThresholds.from_json` takes them; a usage error for a bad one."""
    from iceberg_ops_provider.maintenance.health import HealthThresholds

    raw = pairs(values, "--threshold", "max_snapshots=100")
    parsed: dict[str, Any] = {}
    for name, text in raw.items():
        lowered = text.lower()
        if lowered in ("none", "null"):
            parsed[name] = None
            continue
        try:
            parsed[name] = int(text)
        except ValueError:
            try:
                parsed[name] = float(text)
            except ValueError:
                raise click.BadParameter(
                    f"{name}={text!r}: the value must be a number or none.", param_hint="'--threshold'"
                ) from None
    if target_file_size is not None:
        parsed["target_file_size_bytes"] = target_file_size
    try:
        HealthThresholds.from_json(parsed)
    except ValueError as exc:
        raise click.BadParameter(str(exc), param_hint="'--threshold'") from exc
    return parsed


@maintain.command()
@_TABLE
@_ALL
@json_option
@click.option(
    "--target-file-size", type=FILE_SIZE, help="Output file size (128MiB, 1GiB; default: the table's, 512 MiB)."
)
@click.option(
    "--min-input-files",
    type=int,
    default=5,
    show_default=True,
    help="Partitions with fewer small files are left alone (1: a lone small file is rewritten too, to sort it or "
    "apply its deletes).",
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
@_DRY_RUN
@click.option("--no-progress", is_flag=True, help="Do not show progress.")
@click.pass_obj
@handles_errors
def compact(
    settings: Settings,
    table: str | None,
    every: bool,
    target_file_size: int | None,
    min_input_files: int,
    where: str | None,
    strategy: str,
    dry_run: bool,
    no_progress: bool,
) -> None:
    """Bin-pack TABLE's small data files into files near the target size, group by group."""
    from iceberg_ops_provider.maintenance.binpack import min_input_files_problem
    from iceberg_ops_provider.maintenance.compaction import compact_small_files_streaming

    problem = min_input_files_problem(min_input_files)  # the engine's rule, before any table is opened
    if problem is not None:
        raise click.BadParameter(f"--min-input-files {problem}.", param_hint="'--min-input-files'")
    where = check_filter(where)
    display = ProgressDisplay("none" if no_progress or dry_run else "auto")
    stop = threading.Event()
    stopping = StopOnInterrupt(
        display.note,
        "Stopping once the group being written is committed (Ctrl-C again stops at once; the files of a group "
        "not committed are deleted)...",
    )
    stopping.stop = stop.set

    def call(loaded: Any) -> Any:
        if stop.is_set():
            raise KeyboardInterrupt  # no further table starts
        result = compact_small_files_streaming(
            loaded,
            target_file_size_bytes=target_file_size,
            min_input_files=min_input_files,
            where=where or None,
            strategy=strategy,  # type: ignore[arg-type]
            dry_run=dry_run,
            on_progress=display,
            should_stop=stop.is_set,
        )
        if result.stopped:  # the engine said after how many groups
            raise KeyboardInterrupt
        return result

    with stopping:
        _, worst = _run(
            settings,
            table,
            every,
            call,
            _describe_compaction,
            display=display,
        )
    _exit(worst)


def _describe_compaction(result: Any) -> str:
    verb = "would rewrite" if result.dry_run else "rewrote"
    head = (
        f"{result.table}: {verb} {result.rewritten_data_files_count} small file(s), "
        f"{size_text(result.rewritten_bytes_count)}, in {result.file_groups_count} group(s)"
    )
    if not result.file_groups_count:
        return f"{result.table}: nothing to compact (no partition has enough small files)."
    if not result.dry_run:
        head += (
            f" into {result.added_data_files_count} file(s), {size_text(result.added_bytes_count)}; "
            f"{result.committed_groups_count} committed in {result.duration_seconds:.1f} s"
        )
    rows = [
        (g.index, g.partition or "-", g.status, len(g.data_files), size_text(g.bytes), len(g.added_data_files))
        for g in result.groups
    ]
    return head + "\n" + text_table(["group", "partition", "status", "files", "size", "written"], rows)


@maintain.command()
@_TABLE
@_ALL
@json_option
@click.option(
    "--older-than",
    type=OLDER_THAN,
    help="Snapshots older than this may go: an age (5d, 12h) or an ISO timestamp (default: the table's "
    "history.expire.max-snapshot-age-ms, 5 days).",
)
@click.option(
    "--retain-last",
    type=click.IntRange(min=1),
    default=1,
    show_default=True,
    help="Latest snapshots of each branch kept whatever their age.",
)
@click.option("--keep-files", is_flag=True, help="Only change the metadata; delete no unreachable files.")
@_DRY_RUN
@click.pass_obj
@handles_errors
def expire(
    settings: Settings,
    table: str | None,
    every: bool,
    older_than: datetime | None,
    retain_last: int,
    keep_files: bool,
    dry_run: bool,
) -> None:
    """Expire TABLE's old snapshots and delete the files no retained snapshot reaches."""
    from iceberg_ops_provider.maintenance.expire import expire_snapshots

    def describe(result: Any) -> str:
        verb = "would expire" if result.dry_run else "expired"
        deleted = (
            f"{result.deleted_data_files_count} data, {result.deleted_manifest_files_count} manifest, "
            f"{result.deleted_manifest_lists_count} manifest-list file(s), {size_text(result.deleted_bytes)}"
        )
        refs = f"; removed refs: {', '.join(result.removed_refs)}" if result.removed_refs else ""
        failed = f"; {len(result.failed_deletes)} file(s) could not be deleted" if result.failed_deletes else ""
        return (
            f"{result.table}: {verb} {len(result.expired_snapshot_ids)} snapshot(s); "
            f"{'would delete' if result.dry_run else 'deleted'} {deleted}{refs}{failed}"
        )

    _, worst = _run(
        settings,
        table,
        every,
        lambda loaded: expire_snapshots(
            loaded, older_than=older_than, retain_last=retain_last, delete_files=not keep_files, dry_run=dry_run
        ),
        describe,
    )
    _exit(worst)


@maintain.command()
@_TABLE
@_ALL
@json_option
@click.option(
    "--older-than",
    type=OLDER_THAN,
    help="Only files older than this are deleted: an age (3d) or an ISO timestamp (default 3 days: newer "
    "files may belong to writes in flight).",
)
@click.option("--location", help="A folder inside the table's location to clean instead of all of it.")
@click.option(
    "--check-nested-tables/--no-check-nested-tables",
    default=True,
    show_default=True,
    help="Ask the catalog for its other tables whose location lies inside the folder and leave their files alone "
    "(lists every namespace and loads every table).",
)
@_DRY_RUN
@click.pass_obj
@handles_errors
def orphans(
    settings: Settings,
    table: str | None,
    every: bool,
    older_than: datetime | None,
    location: str | None,
    check_nested_tables: bool,
    dry_run: bool,
) -> None:
    """Delete the files under TABLE's location that no metadata references."""
    from iceberg_ops_provider.maintenance.orphans import remove_orphan_files

    def describe(result: Any) -> str:
        found = len(result.orphan_file_locations)
        if result.dry_run:
            head = f"{result.table}: {found} orphan file(s) older than {result.older_than} (dry run, none deleted)"
        else:
            head = f"{result.table}: deleted {result.deleted_orphan_files_count} of {found} orphan file(s)"
        head += f"; {result.listed_files_count} file(s) listed, {result.kept_recent_files_count} too recent"
        lines = [head, *(f"  {path}" for path in result.orphan_file_locations[:50])]
        if found > 50:
            lines.append(f"  ... and {found - 50} more (--json lists them all)")
        lines += [f"  could not delete: {failure}" for failure in result.failed_deletes]
        lines += [f"  left alone, table inside: {nested}" for nested in result.nested_tables]
        return "\n".join(lines)

    _, worst = _run(
        settings,
        table,
        every,
        lambda loaded: remove_orphan_files(
            loaded,
            older_than=older_than,
            dry_run=dry_run,
            location=location,
            check_nested_tables=check_nested_tables,
        ),
        describe,
    )
    _exit(worst)


@maintain.command()
@_TABLE
@_ALL
@json_option
@click.option(
    "--target-manifest-size",
    type=SIZE,
    help="Size of the manifests written (default: the table's commit.manifest.target-size-bytes, 8 MiB).",
)
@_DRY_RUN
@click.pass_obj
@handles_errors
def manifests(
    settings: Settings, table: str | None, every: bool, target_manifest_size: int | None, dry_run: bool
) -> None:
    """Merge TABLE's many small manifests into few; data files are untouched."""
    from iceberg_ops_provider.maintenance.manifests import rewrite_manifests

    def describe(result: Any) -> str:
        verb = "would rewrite" if result.dry_run else "rewrote"
        return (
            f"{result.table}: {verb} {result.rewritten_manifests_count} manifest(s) into "
            f"{result.added_manifests_count}; {result.kept_manifests_count} kept"
        )

    _, worst = _run(
        settings,
        table,
        every,
        lambda loaded: rewrite_manifests(loaded, target_manifest_size_bytes=target_manifest_size, dry_run=dry_run),
        describe,
    )
    _exit(worst)
