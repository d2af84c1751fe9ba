"""``iceberg-ops maintain ...``: table maintenance from the shell, one engine call per command.

Each command is a :mod:`~iceberg_ops_provider.maintenance` function, its parameters as options; ``--json``
prints the result's ``to_json()`` (a list with ``--all``).
"""

from __future__ import annotations

import contextlib
from datetime import datetime
from functools import partial
from typing import TYPE_CHECKING, Any

import click

from iceberg_ops_provider.cli.errors import handles_errors
from iceberg_ops_provider.cli.maintain_compact import compact
from iceberg_ops_provider.cli.maintain_queue import queue
from iceberg_ops_provider.cli.maintain_tables import (
    ALL_OPTION,
    DRY_RUN_OPTION,
    TABLE_ARGUMENT,
    run_on_tables,
)
from iceberg_ops_provider.cli.shared import FILE_SIZE, OLDER_THAN, SIZE, json_option, pairs
from iceberg_ops_provider.cli.wording import global_options, maintenance_command
from iceberg_ops_provider.progress import size_text

if TYPE_CHECKING:
    from iceberg_ops_provider.cli.settings import Settings

__all__ = ["maintain"]


@click.group()
@json_option
def maintain() -> None:
    """Table maintenance without a JVM: health report, compaction, snapshot expiry, orphan files, manifests.

    TABLE is namespace.table, or with --all a namespace (every table of it). Exit codes: 0 done,
    1 health found maintenance due, queue could not read a table, or a transient failure, 2 bad input,
    130 interrupted.
    """


@maintain.command()
@TABLE_ARGUMENT
@ALL_OPTION
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
    from iceberg_ops_provider.maintenance.health import table_health_report

    limits = _thresholds(thresholds, target_file_size) if thresholds or target_file_size is not None else None
    reports = run_on_tables(
        settings,
        table,
        every,
        lambda loaded: table_health_report(loaded, limits),
        lambda report: _describe_health(settings, report),
        document=lambda report: report.to_json(max_partitions=max_partitions),
        changes=False,
    )
    if any(report.needs for report in reports):
        raise SystemExit(1)


def _describe_health(settings: Settings, report: Any) -> str:
    """The report's summary, each recommendation as the ``iceberg-ops maintain`` command that carries it out."""
    prefix = global_options(settings)

    def command(recommendation: Any) -> str:
        typed = maintenance_command(
            recommendation.action, recommendation.params, report.table, at=report.generated_at, prefix=prefix
        )
        return typed or recommendation.call()

    return report.summary(call=command)


def _thresholds(values: tuple[str, ...], target_file_size: int | None) -> Any:
    """The ``HealthThresholds`` of the ``--threshold`` pairs; a usage error for a bad one."""
    from iceberg_ops_provider.maintenance.health import HealthThresholds

    def number(name: str, text: str) -> float | None:
        if text.lower() in ("none", "null"):
            return None
        for read in (int, float):
            with contextlib.suppress(ValueError):
                return read(text)
        raise click.BadParameter(f"{name}={text!r}: the value must be a number or none.", param_hint="'--threshold'")

    parsed = {name: number(name, text) for name, text in pairs(values, "--threshold", "max_snapshots=100").items()}
    if target_file_size is not None:
        parsed["target_file_size_bytes"] = target_file_size
    try:
        return HealthThresholds.from_json(parsed)
    except ValueError as exc:
        raise click.BadParameter(str(exc), param_hint="'--threshold'") from exc


@maintain.command()
@TABLE_ARGUMENT
@ALL_OPTION
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
@DRY_RUN_OPTION
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
        count = len(result.expired_snapshot_ids)
        cutoff = f" (older than {result.older_than}; at least the last {retain_last} of each branch stay)"
        return (
            f"{result.table}: {verb} {count} snapshot{'' if count == 1 else 's'}{cutoff}; "
            f"{'would delete' if result.dry_run else 'deleted'} {deleted}{refs}{failed}"
        )

    call = partial(
        expire_snapshots, older_than=older_than, retain_last=retain_last, delete_files=not keep_files, dry_run=dry_run
    )
    run_on_tables(settings, table, every, call, describe, changes=not dry_run)


@maintain.command()
@TABLE_ARGUMENT
@ALL_OPTION
@json_option
@click.option(
    "--older-than",
    type=OLDER_THAN,
    help="Only files older than this are deleted: an age (3d) or an ISO timestamp (default: the table's policy, "
    "iceberg-ops.maintenance.orphan-age, 3 days: newer files may belong to writes in flight).",
)
@click.option("--location", help="A folder inside the table's location to clean instead of all of it.")
@click.option(
    "--check-nested-tables/--no-check-nested-tables",
    default=True,
    show_default=True,
    help="Ask the catalog for its other tables whose location lies inside the folder and leave their files alone "
    "(lists every namespace and loads every table).",
)
@DRY_RUN_OPTION
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

    def call(loaded: Any) -> Any:
        from iceberg_ops_provider.maintenance.policy import table_policy

        return remove_orphan_files(
            loaded,
            older_than=table_policy(loaded).orphan_age if older_than is None else older_than,
            dry_run=dry_run,
            location=location,
            check_nested_tables=check_nested_tables,
        )

    run_on_tables(settings, table, every, call, describe, changes=not dry_run)


@maintain.command()
@TABLE_ARGUMENT
@ALL_OPTION
@json_option
@click.option(
    "--target-manifest-size",
    type=SIZE,
    help="Size of the manifests written (default: the table's commit.manifest.target-size-bytes, 8 MiB).",
)
@DRY_RUN_OPTION
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

    call = partial(rewrite_manifests, target_manifest_size_bytes=target_manifest_size, dry_run=dry_run)
    run_on_tables(settings, table, every, call, describe, changes=not dry_run)


maintain.add_command(compact)
maintain.add_command(queue)
