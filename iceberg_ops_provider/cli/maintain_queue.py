"""``iceberg-ops maintain queue``: the catalog's tables that need maintenance, ranked, as a table or JSON."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

import click

from iceberg_ops_provider.cli.errors import handles_errors
from iceberg_ops_provider.cli.settings import open_catalog
from iceberg_ops_provider.cli.shared import json_option
from iceberg_ops_provider.core.name_hints import closest, did_you_mean, existing_namespaces, listed
from iceberg_ops_provider.progress import size_text

if TYPE_CHECKING:
    from iceberg_ops_provider.cli.settings import Settings

__all__ = ["queue"]

_HELD = {"disabled": "maintenance off by its policy", "quiet_hours": "inside its quiet hours (UTC)"}


@click.command()
@click.option("--namespace", "namespace", help="Only this namespace's tables (default: every namespace).")
@json_option
@click.pass_obj
@handles_errors
def queue(settings: Settings, namespace: str | None) -> None:
    """The tables that need maintenance, ranked by benefit per MiB rewritten (reads metadata only).

    Tables whose policy is off or in its quiet hours are listed apart; exit 1 when a table could not be read.
    """
    from pyiceberg.exceptions import NoSuchNamespaceError

    from iceberg_ops_provider.maintenance.queue import maintenance_queue

    catalog = open_catalog(settings, access="read")
    namespace = namespace or settings.namespace
    try:
        found = maintenance_queue(catalog, namespace)
    except NoSuchNamespaceError:
        existing = existing_namespaces(catalog)
        raise click.BadParameter(
            f"namespace {namespace!r} does not exist in the catalog (existing namespaces: {listed(existing)})."
            + did_you_mean(closest(namespace or "", existing)),
            param_hint="'--namespace'",
        ) from None
    if settings.as_json:
        click.echo(json.dumps(found.to_json(), indent=2, default=str))
    else:
        click.echo(_describe(found))
    if found.errors:
        raise SystemExit(1)


def _describe(found: Any) -> str:
    """The queue as a table for a person, then the held and unreadable tables."""
    where = ", ".join(found.namespaces) or "no namespace"
    lines = [
        f"Maintenance queue of {where}: {len(found.ranked)} table(s) need work, {len(found.held)} held by policy, "
        f"{len(found.errors)} could not be read, {len(found.healthy)} healthy."
    ]
    if found.ranked:
        rows = [("rank", "table", "score", "needs", "files -", "manifests -", "snapshots -", "rewrites")]
        for rank, entry in enumerate(found.ranked, 1):
            rows.append(
                (
                    str(rank),
                    entry.table,
                    f"{entry.score:g}",
                    ", ".join(entry.needs),
                    f"{entry.files_removed:,}",
                    f"{entry.manifests_removed:,}",
                    f"{entry.snapshots_expired:,}",
                    size_text(entry.rewrite_bytes),
                )
            )
        widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
        for row in rows:
            lines.append("  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True)).rstrip())
        lines.append("score: (files + manifests + snapshots removed) per MiB rewritten (docs/maintenance/queue.md)")
    for entry in found.ranked + found.held:
        if entry.over_budget:
            lines.append(
                f"over budget: {entry.table}: its compaction rewrites {size_text(entry.compaction_bytes)}, more than "
                f"the {size_text(entry.max_rewrite_bytes)} one run may rewrite "
                "(iceberg-ops.maintenance.max-rewrite-bytes): runs take it a budget at a time, and none rewrites "
                "a group larger than that"
            )
    for entry in found.held:
        needs = f"; would need {', '.join(entry.needs)}" if entry.needs else ""
        lines.append(f"held: {entry.table}: {_HELD.get(entry.held, entry.held)}{needs}")
    for error in found.errors:
        message = (error.message or "").removeprefix(f"{error.table}: ")  # the line names the table already
        detail = f": {message}" if message else ""
        lines.append(f"could not be read: {error.table}: {error.kind} ({error.error}){detail}")
    return "\n".join(lines)
