"""Lint migration files: each file's findings, its folder's (version gaps, duplicate slugs), allowances applied.

With a catalog, a drop from a table that holds no rows (or does not exist yet), or a delete or update of
every row of one, loses nothing and becomes ``info``; without one, every finding keeps its rule's severity.
"""

from __future__ import annotations

import logging
import os
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pyiceberg.schema import index_by_name

from iceberg_ops_provider.lint.rules import RULES, allowance
from iceberg_ops_provider.lint.source import Finding, SourceFile, read_source
from iceberg_ops_provider.migration.discovery import MIGRATION_FILE
from iceberg_ops_provider.migration.restore import dropped_column, rows_holding, total_records

if TYPE_CHECKING:
    from pyiceberg.catalog import Catalog

__all__ = ["LintReport", "lint_paths", "migration_files", "rule_list", "rules_json"]

log = logging.getLogger(__name__)

_ROW_LOSSES = ("drop-table", "drop-column", "delete-all-rows", "update-all-rows")
"""The rules whose change loses nothing on a table that holds no rows."""


@dataclass(frozen=True)
class LintReport:
    """What ``iceberg-ops lint`` found: the files read, and every finding (allowed ones too) by file and line."""

    files: tuple[str, ...]
    findings: tuple[Finding, ...]

    @property
    def failed(self) -> tuple[Finding, ...]:
        """The findings that fail the lint: neither allowed nor informational."""
        return tuple(finding for finding in self.findings if finding.fails)

    @property
    def ok(self) -> bool:
        """Whether the lint passes (exit 0)."""
        return not self.failed

    def to_json(self) -> dict[str, Any]:
        """JSON-able form: ``ok``, the files, and each finding."""
        return {"ok": self.ok, "files": list(self.files), "findings": [f.to_json() for f in self.findings]}

    def text(self) -> str:
        """The findings as ``path:line: [rule] message`` lines, then a summary line."""
        lines = []
        for finding in self.findings:
            state = f"allowed: {finding.allowed}" if finding.allowed is not None else finding.severity
            lines.append(f"{finding.path}:{finding.line}: [{finding.rule}] ({state}) {finding.message}")
            if finding.fails:
                lines.append(f"    fix: {finding.fix}")
        failing = len(self.failed)
        summary = f"{len(self.files)} file(s), {len(self.findings)} finding(s), {failing} not allowed"
        lines.append(summary if failing else f"{summary}: ok")
        return "\n".join(lines)

    def github(self) -> str:
        """The findings as GitHub Actions workflow commands (annotations on the pull request's files).

        A file under the working directory (where a workflow runs) is named relative to it, any other absolutely.
        """
        lines = []
        for finding in self.findings:
            level = "notice" if finding.allowed is not None or finding.severity == "info" else finding.severity
            message = finding.message
            if finding.allowed is not None:
                message += f" (allowed: {finding.allowed})"
            elif finding.fails:
                message += f"\nFix: {finding.fix}"
            where = f"file={_escape_property(_repository_path(finding.path))},line={finding.line},title={finding.rule}"
            lines.append(f"::{level} {where}::{_escape(message)}")
        return "\n".join(lines)


def _repository_path(path: str) -> str:
    """``path`` relative to the working directory when it is under it, else absolute."""
    absolute = Path(os.path.abspath(path))
    try:
        return absolute.relative_to(Path.cwd()).as_posix()
    except ValueError:
        return absolute.as_posix()


def _escape(text: str) -> str:
    return text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def _escape_property(text: str) -> str:
    return _escape(text).replace(":", "%3A").replace(",", "%2C")


def migration_files(paths: Iterable[str | Path]) -> list[Path]:
    """The migration files among ``paths``: files as given, folders and subfolders searched for ``NNNN_slug.py``.

    A folder's own files come first, then those of each folder directly in it (``migrations/<namespace>/``).
    """
    found: list[Path] = []
    for each in map(Path, paths):
        if each.is_dir():
            for folder in [each, *sorted(p for p in each.iterdir() if p.is_dir())]:
                found.extend(sorted(p for p in folder.iterdir() if MIGRATION_FILE.match(p.name) and p.is_file()))
        else:
            found.append(each)
    return list(dict.fromkeys(found))


def lint_paths(
    paths: Sequence[str | Path], *, catalog: Catalog | None = None, namespace: str | None = None
) -> LintReport:
    """Lint the migration files ``paths`` name (files, or folders of them and their immediate subfolders).

    Version gaps and duplicate slugs are looked for among every migration file of each file's folder.
    With ``catalog``, drops are judged against its tables (bare names in ``namespace``).

    Raises:
        FileNotFoundError: A path does not exist.
    """
    files = migration_files(paths)
    if missing := [str(path) for path in files if not path.is_file()]:
        raise FileNotFoundError(f"No such migration file: {', '.join(missing)}")
    if misnamed := [str(path) for path in files if not MIGRATION_FILE.match(path.name)]:
        raise ValueError(
            f"Not a migration file name (NNNN_slug.py: four or more digits, an underscore, letters, digits and _): "
            f"{', '.join(misnamed)}"
        )
    sources = {path: read_source(path) for path in files}
    for folder in dict.fromkeys(path.parent for path in files):
        _folder_findings(folder, {path.name for path in files if path.parent == folder}, sources)
    findings = [finding for path in files for finding in sources[path].allowed()]
    if catalog is not None:
        # A drop of a name an earlier rename gives a table drops that table's rows, whatever the catalog holds now.
        renamed_to = {f.column for f in findings if f.rule == "rename-table" and f.column}
        drops = [f for f in findings if f.rule == "drop-column" and f.function == "upgrade" and f.column]
        findings = [_judged(finding, catalog, namespace, renamed_to, drops) for finding in findings]
    findings.sort(key=lambda f: (f.path, f.line, f.rule))
    return LintReport(tuple(str(path) for path in files), tuple(findings))


def _folder_findings(folder: Path, asked: set[str], sources: dict[Path, SourceFile]) -> None:
    every = sorted(
        (int(match.group("version")), match.group("slug"), name)
        for name in (p.name for p in folder.iterdir())
        if (match := MIGRATION_FILE.match(name))
    )
    by_slug: dict[str, list[str]] = defaultdict(list)
    by_number: dict[int, list[str]] = defaultdict(list)
    previous: int | None = None
    for number, slug, name in every:
        by_slug[slug].append(name)
        by_number[number].append(name)
        if name in asked:
            add = sources[folder / name].add
            if len(by_number[number]) > 1:
                add(1, "duplicate-version", f"{name} has the version number of {by_number[number][0]}")
            if previous is not None and number > previous + 1:
                add(
                    1,
                    "version-gap",
                    f"{name} follows version {previous:04d}: {number - previous - 1} version(s) skipped",
                )
            if len(by_slug[slug]) > 1:
                add(1, "duplicate-slug", f"{name} has the slug {slug!r} of {by_slug[slug][0]}")
        previous = number


def _judged(
    finding: Finding, catalog: Catalog, namespace: str | None, renamed_to: set[str], drops: Sequence[Finding]
) -> Finding:
    if finding.table is None:
        return finding
    restore = finding.rule == "restore-column" and finding.column is not None
    if not restore and (finding.rule not in _ROW_LOSSES or finding.allowed is not None or finding.table in renamed_to):
        return finding
    if "." not in finding.table and namespace is None:
        return replace(
            finding,
            message=f"{finding.message} (not judged live: no namespace to find {finding.table} in; give "
            f"the namespace, or name the table with its namespace: <namespace>.{finding.table})",
        )
    identifier = finding.table if "." in finding.table else f"{namespace}.{finding.table}"
    if restore:
        dropped_first = next((drop for drop in drops if _drops_before(drop, finding)), None)
        return _restore_judged(finding, catalog, identifier, dropped_first)
    try:
        table = catalog.load_table(identifier)
    except Exception as exc:  # a table that does not exist yet holds nothing; a catalog error keeps the finding
        if type(exc).__name__ != "NoSuchTableError":
            log.warning("lint: could not look at %s (%s); the finding keeps its severity", identifier, exc)
            return finding
        return _nothing_lost(finding, f"{identifier} does not exist: nothing to lose")
    rows = total_records(table.current_snapshot())
    if rows:
        return replace(finding, message=f"{finding.message} ({identifier} holds {rows:,} rows)")
    return _nothing_lost(finding, f"{identifier} holds no rows: nothing is lost")


def _nothing_lost(finding: Finding, why: str) -> Finding:
    """``finding`` as ``info``, saying why nothing is lost."""
    return replace(finding, severity="info", message=f"{finding.message} ({why})", fix=f"nothing to fix: {why}")


def _drops_before(drop: Finding, restore: Finding) -> bool:
    """Whether the upgrade() ``drop`` runs before ``restore`` (in the file, or an earlier one) and drops its column."""
    if (drop.table, drop.column) != (restore.table, restore.column):
        return False
    if drop.path == restore.path:
        return restore.function == "downgrade" or drop.line < restore.line
    before, after = Path(drop.path), Path(restore.path)
    return (
        restore.function == "upgrade" and before.parent == after.parent and _version(before.name) < _version(after.name)
    )


def _version(name: str) -> int:
    match = MIGRATION_FILE.match(name)
    return int(match.group("version")) if match else 0


def _restore_judged(finding: Finding, catalog: Catalog, identifier: str, dropped_first: Finding | None) -> Finding:
    """``finding`` with how many live rows of ``identifier`` still hold the restored column's data.

    A column that ``dropped_first`` (an upgrade that runs before the restore) drops is not judged yet.
    """
    column = finding.column or ""
    try:
        table = catalog.load_table(identifier)
        if dropped_first is not None and column in index_by_name(table.schema()):
            return replace(
                finding,
                severity="info",
                message=f"{finding.message} ({identifier}.{column} is live now: it is judged once the upgrade that "
                f"drops it ({Path(dropped_first.path).name}) has run)",
            )
        dropped = dropped_column(table.metadata, column, identifier)
    except Exception as exc:  # the restore itself will say what is wrong; lint only reports
        if "no schema of the table ever had it" in str(exc):  # nothing the migrations before it change
            return replace(
                finding,
                severity="error",
                message=f"{finding.message} (it cannot work: {exc})",
                fix=f"check the table and column names: no schema of {identifier} ever had {column}; if a migration "
                f"that runs before it adds the column, allow it: {allowance('restore-column')}",
            )
        return replace(finding, message=f"{finding.message} (cannot be judged now: {exc})")
    holding = rows_holding(table.metadata, table.io, dropped.field)
    return replace(finding, message=f"{finding.message} ({identifier}: {holding.describe()})")


def rule_list() -> str:
    """Every rule as ``id  severity  title`` lines."""
    width = max(map(len, RULES))
    return "\n".join(f"{rule.id:<{width}}  {rule.severity:<7}  {rule.title}" for rule in RULES.values())


def rules_json() -> list[dict[str, str | bool]]:
    """Every rule, JSON-able: id, severity, title, effect, fix and whether it can be allowed."""
    return [rule.to_json() for rule in RULES.values()]
