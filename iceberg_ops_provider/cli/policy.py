"""``iceberg-ops policy show|set``: a table's maintenance policy, kept in its properties, from the shell.

Each is a call of :mod:`iceberg_ops_provider.maintenance.policy` (docs/maintenance/policy.md).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import click

from iceberg_ops_provider.cli.errors import handles_errors
from iceberg_ops_provider.cli.settings import open_catalog
from iceberg_ops_provider.cli.shared import json_option, resolve_tables, text_table

if TYPE_CHECKING:
    from pyiceberg.table import Table

    from iceberg_ops_provider.cli.settings import Settings

__all__ = ["policy"]


def _table(settings: Settings, name: str, *, changes: bool) -> Table:
    """The table ``name`` (``namespace.table``, or a table of ``--namespace``); a usage error when there is none."""
    catalog = open_catalog(settings, access="write" if changes else "read")
    return catalog.load_table(resolve_tables(settings, catalog, name, False, offers_all=False)[0])


@click.group()
@json_option
def policy() -> None:
    """A table's maintenance policy: which maintenance runs, when, and how much (kept in its properties).

    TABLE is namespace.table. Exit codes: 0 done, 1 the catalog failed, 2 bad input or a bad policy value.
    """


@policy.command("show")
@json_option
@click.argument("table")
@click.pass_obj
@handles_errors
def show(settings: Settings, table: str) -> None:
    """Show the effective policy of TABLE: each key, its value, and where it comes from (default or property)."""
    from iceberg_ops_provider.maintenance.policy import table_policy

    effective = table_policy(_table(settings, table, changes=False))
    rows = [(value.key.property, value.key.text(value.value), value.source) for value in effective.values()]
    state = "on" if effective.enabled else "off (no maintenance runs)"
    if effective.enabled and effective.quiet_at():
        state += ", in its quiet hours now (no maintenance starts)"
    human = f"{effective.table}: maintenance {state}\n" + text_table(("key", "value", "source"), rows)
    settings.emit(effective.to_json(), human)


@policy.command("set")
@json_option
@click.argument("table")
@click.argument("assignments", nargs=-1, required=True, metavar="KEY=VALUE...")
@click.pass_obj
@handles_errors
def set_(settings: Settings, table: str, assignments: tuple[str, ...]) -> None:
    """Set policy keys of TABLE in one commit, after checking them all; KEY= removes one (its default applies).

    KEY is a property key (write.target-file-size-bytes, iceberg-ops.maintenance.quiet-hours), or a key of
    iceberg-ops without its iceberg-ops.maintenance. prefix (quiet-hours, enabled).
    """
    from iceberg_ops_provider.maintenance.policy import set_table_policy

    updates: dict[str, str] = {}
    for assignment in assignments:
        key, sep, value = assignment.partition("=")
        key = key.strip()
        if not sep or not key:
            raise click.BadParameter(
                f"{assignment!r} is not KEY=VALUE (for example quiet-hours=01-05, or quiet-hours= to remove it).",
                param_hint="'KEY=VALUE'",
            )
        if key in updates:
            raise click.BadParameter(f"{key!r} is given twice.", param_hint="'KEY=VALUE'")
        updates[key] = value.strip()
    change = set_table_policy(_table(settings, table, changes=True), updates)
    lines = [f"{change.table}: set {key}={value}" for key, value in change.set.items()]
    lines += [f"{change.table}: removed {key} (its default applies)" for key in change.removed]
    lines += [f"{change.table}: {key} unchanged" for key in change.unchanged]
    if not change.committed:
        lines.append(f"{change.table}: nothing to change; no commit made")
    settings.emit(change.to_json(), "\n".join(lines))
