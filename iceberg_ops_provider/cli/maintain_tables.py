"""What every ``maintain`` command shares: its TABLE/--all/--dry-run options, the loop over the tables, the exit.

A command gives :func:`run_on_tables` the engine call for one loaded table and how to describe its
result; the loop opens the catalog (never creating it), resolves TABLE or ``--all``, reports a
table's failure and goes on with the others, prints JSON or text, and turns Ctrl-C into the
interrupted exit with what was finished.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import click

from iceberg_ops_provider.cli.errors import exit_interrupted
from iceberg_ops_provider.cli.progress import ProgressDisplay
from iceberg_ops_provider.cli.settings import open_catalog
from iceberg_ops_provider.cli.shared import bad_input, emit, for_each_table, resolve_tables

if TYPE_CHECKING:
    from iceberg_ops_provider.cli.settings import Settings

__all__ = ["ALL_OPTION", "DRY_RUN_OPTION", "TABLE_ARGUMENT", "exit_with", "run_on_tables"]

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
) -> tuple[list[Any], int]:
    """Open the catalog, call ``call`` on each table, print the results; the results and the worst exit code.

    ``display`` (the progress ``call`` reports to) is shown while the tables are worked on and
    closed before the results are printed. ``changes=False``: the command only reads (the catalog
    opens read-only). Every command works on tables that exist already: nothing is created.
    """
    results: list[Any] = []
    try:
        catalog = open_catalog(settings, access="write" if changes else "read")
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


def exit_with(code: int) -> None:
    """End the command with ``code`` (nothing for 0)."""
    if code:
        raise SystemExit(code)
