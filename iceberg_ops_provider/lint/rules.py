"""The rules ``iceberg-ops lint`` checks migration files against, each with a stable id.

An id names what a change does (``drop-column``), never a number, so an allowance in a file reads
on its own (``# iceberg-ops: allow=drop-column reason="..."``) and stays valid across releases: ids
are only ever added. Each rule says what the change does to data and how to make it safe; the
page ``docs/lint.md`` shows every rule with an example and the safe alternative.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Literal

__all__ = ["RULES", "Rule", "Severity", "rule"]

Severity = Literal["error", "warning", "info"]


@dataclass(frozen=True)
class Rule:
    """One lint rule.

    Attributes:
        id: The stable id, used in allowances and in the output.
        title: What the rule finds, in a few words.
        effect: What the change does to data or to readers.
        fix: How to make the change safe, or how to allow it knowingly.
        severity: ``error`` fails the lint unless allowed; ``warning`` also fails it (it names a
            risk a reviewer must accept); ``info`` is reported and never fails it.
    """

    id: str
    title: str
    effect: str
    fix: str
    severity: Severity = "error"


_ALL = (
    Rule(
        "drop-table",
        "a table is dropped",
        "every row of the table becomes unreachable once the snapshots holding it are expired; readers and "
        "writers of the table fail",
        "rename the table aside (ctx.rename_table) and drop it in a later migration once nothing reads it, or "
        'allow it: # iceberg-ops: allow=drop-table reason="..."',
    ),
    Rule(
        "drop-column",
        "a column is dropped",
        "the column's values disappear from every read (data files keep them until they are rewritten); "
        "readers that select it fail",
        "stop reading and writing the column first and drop it in a later migration, or allow it: "
        '# iceberg-ops: allow=drop-column reason="..."',
    ),
    Rule(
        "rename-column",
        "a column is renamed",
        "readers, views and queries that use the old name fail (Iceberg keeps the data: ids, not names, "
        "identify columns)",
        "add the new column and keep the old one until every reader moved, or allow it once they have",
        severity="warning",
    ),
    Rule(
        "rename-table",
        "a table is renamed",
        "readers and writers that use the old name fail",
        "move readers first, or allow it once they use the new name",
        severity="warning",
    ),
    Rule(
        "add-required-column",
        "a required column is added",
        "refused on a table that holds rows (existing rows have no value for it); writers that do not set it fail",
        "add it as optional (required=False) and fill it: Iceberg cannot make an optional column required later, "
        "so a required column belongs on a new or empty table only; allow it for such a table",
    ),
    Rule(
        "drop-partition-field",
        "a partition field is removed",
        "queries filtering on it stop pruning files written from now on; the data stays",
        "keep the field, or allow it with the reason the layout changes",
        severity="warning",
    ),
    Rule(
        "restore-column",
        "a dropped column is restored",
        "its old values reappear in rows of data files written before the drop; rows written after it, or "
        "rewritten since (compaction, copy-on-write deletes), read null",
        "nothing to fix: with a catalog, lint says how many live rows still hold its data",
        severity="info",
    ),
    Rule(
        "irreversible-downgrade",
        "downgrade() raises IrreversibleMigrationError",
        "a rollback stops at this migration: nothing before it can be rolled back past it",
        "write a downgrade that undoes upgrade(), or allow it with the reason it cannot be undone",
    ),
    Rule(
        "direct-write",
        "the body reaches tables through ctx.catalog or ctx.load_table",
        "what it writes there is not staged or tracked: a crash leaves it partial, a rollback does not undo it, "
        "and plan cannot show it",
        "use the ctx operations (ctx.add_column, ctx.set_properties, ...), or allow it with the reason",
    ),
    Rule(
        "version-gap",
        "a version number is skipped",
        "usually a file deleted or renamed by mistake; the history then differs between environments",
        "renumber the file to follow the previous version, or allow it",
        severity="warning",
    ),
    Rule(
        "duplicate-version",
        "two migrations have the same version number",
        "the runner refuses the folder: nothing runs until one is renumbered",
        "renumber the newer file to follow the last version",
    ),
    Rule(
        "duplicate-slug",
        "two migrations have the same slug",
        "reviews and logs name the step by its slug: two of them are easily confused",
        "give the newer file a slug that says what it does",
        severity="warning",
    ),
    Rule(
        "allowance-without-reason",
        "an allowance gives no reason",
        "nobody reviewing the file later knows why the change was accepted",
        'give one: # iceberg-ops: allow=<rule-id> reason="why this is safe"',
    ),
    Rule(
        "unknown-rule",
        "an allowance names a rule that does not exist",
        "it allows nothing: the finding it meant is still reported",
        "use one of the rule ids iceberg-ops lint --list-rules prints",
    ),
    Rule(
        "malformed-allowance",
        "an iceberg-ops comment or allow attribute cannot be read",
        "it allows nothing",
        '# iceberg-ops: allow=<rule-id> reason="...", or allow = {"<rule-id>": "reason"} on the Migration class',
    ),
    Rule(
        "unreadable-file",
        "the file cannot be parsed",
        "it cannot run either",
        "fix the syntax error",
    ),
)

RULES: Mapping[str, Rule] = MappingProxyType({each.id: each for each in _ALL})
"""Every rule, by id."""


def rule(rule_id: str) -> Rule:
    """The rule with id ``rule_id``.

    Raises:
        KeyError: No rule has that id.
    """
    return RULES[rule_id]
