"""What every ``maintain`` command shares: its TABLE/--all/--dry-run options, the loop over the tables, the exit."""

from __future__ import annotations

import contextlib
import json
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import click

from iceberg_ops_provider.cli.errors import exit_interrupted, report_error
from iceberg_ops_provider.cli.progress import ProgressDisplay
from iceberg_ops_provider.cli.settings import open_catalog
from iceberg_ops_provider.cli.shared import resolve_tables
from iceberg_ops_provider.cli.wording import usage_error

if TYPE_CHECKING:
    from iceberg_ops_provider.cli.settings import Settings

__all__ = ["ALL_OPTION", "DRY_RUN_OPTION", "TABLE_ARGUMENT", "run_on_tables"]

TABLE_ARGUMENT = click.argument("table", required=False, metavar="TABLE")
ALL_OPTION = click.option(
    "--all", "every", is_flag=True, help="TABLE is a namespace: work on every table of it (default: --namespace)."
)
DRY_RUN_OPTION = click.option("--dry-run", is_flag=True, help="Report what a real run would do; change nothing.")


def run_on_tables(
    settings: Settings,
    table: str | None,
    every: bool,
    call: Callable[[Any], Any],
    describe: Callable[[Any], str],
    document: Callable[[Any], dict[str, Any]] | None = None,
    display: ProgressDisplay | None = None,
    *,
    changes: bool = True,
) -> list[Any]:
    """Open the catalog, call ``call`` on each table, print the results and return them; exit when a table failed.

    With several tables, a table's failure is reported and the others still run; one table's failure
    propagates as it is. ``display`` (the progress ``call`` reports to) is closed before the results are
    printed. ``changes=False``: the catalog opens read-only. Nothing is created. With ``changes``, a table
    whose maintenance policy is off or in its quiet hours is skipped (said so, not a failure), and one whose
    policy holds a bad value fails with that error.
    """
    results: list[Any] = []
    documents: list[dict[str, Any]] = []
    human: list[str] = []
    worst = 0
    try:
        catalog = open_catalog(settings, access="write" if changes else "read")
        names = resolve_tables(settings, catalog, table, every)
    except KeyboardInterrupt:
        exit_interrupted(settings, "stopped before any table was worked on; nothing was changed.")
    try:
        with display if display is not None else contextlib.nullcontext():
            for name in names:
                try:
                    loaded = catalog.load_table(name)
                    skipped = _skipped(loaded) if changes else None
                    if skipped is not None:
                        documents.append(skipped[0])
                        human.append(skipped[1])
                        continue
                    try:
                        result = call(loaded)
                    except Exception as exc:
                        raise (usage_error(exc) or exc) from exc
                    results.append(result)
                    documents.append((document or (lambda r: r.to_json()))(result))
                    human.append(describe(result))
                except Exception as exc:
                    if len(names) == 1:
                        raise
                    code, failed = report_error(settings, name, exc)
                    worst = max(worst, code)
                    documents.append(failed)
    except KeyboardInterrupt:
        done = ", ".join(r.table for r in results) or "none"
        exit_interrupted(
            settings,
            f"stopped during maintenance (tables finished: {done}). What was committed stays committed and nothing "
            "else changed the tables; run the command again to finish.",
        )
    if every and not names:
        human = [f"No tables in namespace {table or settings.namespace}."]
    if settings.as_json:
        click.echo(json.dumps(documents[0] if not every and len(documents) == 1 else documents, indent=2, default=str))
    else:
        click.echo("\n\n".join(text for text in human if text))
    if worst:
        raise SystemExit(worst)
    return results


def _skipped(table: Any) -> tuple[dict[str, Any], str] | None:
    """The JSON and the line of ``table`` skipped by its maintenance policy (off, or in quiet hours); else ``None``.

    Raises:
        MaintenancePolicyError: The policy holds a bad value.
    """
    from iceberg_ops_provider.maintenance.policy import ENABLED_KEY, PREFIX, table_policy

    policy = table_policy(table)
    reason = policy.skip_reason()
    if reason is None:
        return None
    if reason == "disabled":
        why = f"maintenance is off by its policy ({ENABLED_KEY}=false)"
    else:
        hours = next(value for value in policy.values() if value.key.name == "quiet_hours")
        why = f"inside its quiet hours ({PREFIX}quiet-hours={hours.key.text(hours.value)}, UTC); run again after them"
    return {"table": policy.table, "skipped": reason}, f"{policy.table}: skipped: {why}"
