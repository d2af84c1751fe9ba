"""The rules ``iceberg-ops lint`` checks migration files against (``docs/lint.md``).

An id names what a change does (``drop-column``), so an allowance reads on its own; ids are only ever added.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass
from types import MappingProxyType
from typing import Literal

__all__ = ["RULES", "Rule", "Severity", "allowance", "rule"]

Severity = Literal["error", "warning", "info"]


@dataclass(frozen=True)
class Rule:
    """One lint rule: its stable id, what it finds (``title``), what the change does (``effect``) and the ``fix``.

    ``error`` and ``warning`` fail the lint unless allowed, ``info`` never; ``not_allowable`` says why no
    allowance accepts its findings (``None``: one can).
    """

    id: str
    title: str
    effect: str
    fix: str
    severity: Severity = "error"
    not_allowable: str | None = None

    @property
    def allowable(self) -> bool:
        """Whether an allowance can accept its findings."""
        return self.not_allowable is None

    def to_json(self) -> dict[str, str | bool]:
        """JSON-able form: id, title, effect, fix, severity and whether it can be allowed."""
        return {**{k: v for k, v in asdict(self).items() if k != "not_allowable"}, "allowable": self.allowable}


def allowance(rule_id: str) -> str:
    """The comment that allows rule ``rule_id`` on a line: ``# iceberg-ops: allow=<id> reason="..."``."""
    return f'# iceberg-ops: allow={rule_id} reason="..."'


_ABOUT_ALLOWANCES = "it is about an allowance itself: correct the allowance instead"


_ALL = (
    Rule(
        "drop-table",
        "a table is dropped",
        "every row of the table becomes unreachable once the snapshots holding it are expired; readers and "
        "writers of the table fail",
        "rename the table aside (ctx.rename_table) and drop it in a later migration once nothing reads it, or "
        f"allow it: {allowance('drop-table')}",
    ),
    Rule(
        "drop-column",
        "a column is dropped",
        "the column's values disappear from every read (data files keep them until they are rewritten); "
        "readers that select it fail",
        f"stop reading and writing the column first and drop it in a later migration, or allow it: "
        f"{allowance('drop-column')}",
    ),
    Rule(
        "rename-column",
        "a column is renamed",
        "readers, views and queries that use the old name fail (Iceberg keeps the data: ids, not names, "
        "identify columns)",
        "add the new column and keep the old one until every reader moved, or allow it once they have: "
        f"{allowance('rename-column')}",
        severity="warning",
    ),
    Rule(
        "rename-table",
        "a table is renamed",
        "readers and writers that use the old name fail",
        f"move readers first, or allow it once they use the new name: {allowance('rename-table')}",
        severity="warning",
    ),
    Rule(
        "add-required-column",
        "a required column is added",
        "refused on a table that holds rows (existing rows have no value for it); writers that do not set it fail",
        "add it as optional (required=False) and fill it: Iceberg cannot make an optional column required later, "
        f"so a required column belongs on a new or empty table only; allow it for such a table: "
        f"{allowance('add-required-column')}",
    ),
    Rule(
        "drop-partition-field",
        "a partition field is removed",
        "queries filtering on it stop pruning files written from now on; the data stays",
        f"keep the field, or allow it with the reason the layout changes: {allowance('drop-partition-field')}",
        severity="warning",
    ),
    Rule(
        "restore-column",
        "a dropped column is restored",
        "its old values reappear in rows of data files written before the drop; rows written after it, or "
        "rewritten since (compaction, copy-on-write deletes), read null",
        "nothing to fix: with a catalog, lint says how many live rows still hold its data; when it finds that no "
        "schema of the table ever had the column, check the table and column names, or (when a migration "
        f"before it adds that column) allow it: {allowance('restore-column')}",
        severity="info",
    ),
    Rule(
        "irreversible-downgrade",
        "downgrade() raises IrreversibleMigrationError",
        "a rollback stops at this migration: nothing before it can be rolled back past it",
        "write a downgrade that undoes upgrade(), or allow it with the reason it cannot be undone: "
        f"{allowance('irreversible-downgrade')}",
    ),
    Rule(
        "direct-write",
        "the body reaches tables through ctx.catalog or ctx.load_table",
        "what it writes there is not staged or tracked: a crash leaves it partial, a rollback does not undo it, "
        "and plan cannot show it",
        "use the ctx operations (ctx.add_column, ctx.set_properties, ...), or allow it with the reason: "
        f"{allowance('direct-write')}",
    ),
    Rule(
        "delete-all-rows",
        "rows are deleted without a where",
        "with no where (or where=None), every row of the table is deleted; restore_data in downgrade() brings them "
        "back only while nothing else has committed to the table",
        "name the rows to delete (ctx.delete_rows(table, \"region = 'eu'\")), or allow it: "
        f"{allowance('delete-all-rows')}",
    ),
    Rule(
        "update-all-rows",
        "rows are updated without a where",
        "with no where (or where=None), every row of the table gets the new values and every data file is rewritten",
        f"name the rows to change (where=...), or allow it when every row must change: {allowance('update-all-rows')}",
        severity="warning",
    ),
    Rule(
        "data-on-dropped-table",
        "a data operation names a table the same migration drops or renames",
        "a migration's data operations run after all its schema changes, when no table has that name: the runner "
        "refuses the migration before it commits anything",
        "change the rows in an earlier migration, or name the table as the migration leaves it",
        not_allowable="the runner refuses the migration whatever lint says",
    ),
    Rule(
        "maintenance-policy-value",
        "set_properties gives a maintenance policy key a value it does not accept",
        "the migration step fails before its commit: ctx.set_properties checks the table's maintenance policy "
        "keys (docs/maintenance/policy.md)",
        "give the key a value it accepts (the message says which), or fix the key's spelling",
        not_allowable="ctx.set_properties refuses the value whatever lint says",
    ),
    Rule(
        "version-gap",
        "a version number is skipped",
        "usually a file deleted or renamed by mistake; the history then differs between environments",
        f"renumber the file to follow the previous version, or allow it on line 1: {allowance('version-gap')}",
        severity="warning",
    ),
    Rule(
        "duplicate-version",
        "two migrations have the same version number",
        "the runner refuses the folder: nothing runs until one is renumbered",
        "renumber the newer file to follow the last version",
        not_allowable="the runner refuses two files with one version whatever lint says",
    ),
    Rule(
        "duplicate-slug",
        "two migrations have the same slug",
        "reviews and logs name the step by its slug: two of them are easily confused",
        f"give the newer file a slug that says what it does, or allow it on line 1: {allowance('duplicate-slug')}",
        severity="warning",
    ),
    Rule(
        "allowance-without-reason",
        "an allowance gives no reason",
        "nobody reviewing the file later knows why the change was accepted",
        'give one: # iceberg-ops: allow=<rule-id> reason="why this is safe"',
        not_allowable=_ABOUT_ALLOWANCES,
    ),
    Rule(
        "unknown-rule",
        "an allowance names a rule that does not exist",
        "it allows nothing: the finding it meant is still reported",
        "use the id of an existing rule (the lint command lists them)",
        not_allowable=_ABOUT_ALLOWANCES,
    ),
    Rule(
        "malformed-allowance",
        "an iceberg-ops comment or allow attribute cannot be read",
        "it allows nothing",
        '# iceberg-ops: allow=<rule-id> reason="...", or allow = {"<rule-id>": "reason"} on the Migration class',
        not_allowable=_ABOUT_ALLOWANCES,
    ),
    Rule(
        "not-allowable",
        "an allowance names a rule no allowance can accept",
        "it allows nothing: the finding it meant still fails",
        "fix what the finding says (the lint command lists which rules can be allowed)",
        not_allowable=_ABOUT_ALLOWANCES,
    ),
    Rule(
        "unused-allowance",
        "an allowance accepts no finding",
        "it allows nothing: it is not where a finding of its rule is",
        "put it on a line of the operation's call, on line 1 for the rules about the whole file (version-gap, "
        'duplicate-slug), or on the Migration class (allow = {"<rule-id>": "reason"}); or remove it',
        severity="info",
        not_allowable=_ABOUT_ALLOWANCES,
    ),
    Rule(
        "unreadable-file",
        "the file cannot be parsed",
        "it cannot run either",
        "fix the syntax error",
        not_allowable="the runner cannot load the file whatever lint says",
    ),
)

RULES: Mapping[str, Rule] = MappingProxyType({each.id: each for each in _ALL})
"""Every rule, by id."""


def rule(rule_id: str) -> Rule:
    """The rule with id ``rule_id`` (``KeyError`` when no rule has it)."""
    return RULES[rule_id]
