"""Pure migration logic, without I/O: compare files with history, resolve targets into ordered steps.

Targets: ``head`` (everything), ``base`` (nothing), an exact version (``0003``, ``3``), ``+N``
(the next N pending) and ``-N`` (the last N applied).
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass, field, replace
from typing import Any, Literal

from iceberg_ops_provider.errors import MigrationIntegrityError, MigrationTargetError
from iceberg_ops_provider.history.records import HistoryRow
from iceberg_ops_provider.messages import Arg, Hint, message
from iceberg_ops_provider.migration.discovery import BrokenFile, MigrationScript, checksum_matches

__all__ = [
    "Direction",
    "NamespaceState",
    "PlanStep",
    "classify",
    "downgrade_steps",
    "infer_direction",
    "relative_hint",
    "stamp_changes",
    "upgrade_steps",
]

Direction = Literal["upgrade", "downgrade"]

_RELATIVE = re.compile(r"^([+-])([0-9]+)$")
_VERSION = re.compile(r"^[0-9]+$")


@dataclass(frozen=True)
class PlanStep:
    """One step a run would take.

    Attributes:
        script: The loaded file (``None`` only for a missing file, which cannot run).
        operations: With an inspecting plan: what the step's body asks for, each with its risk.
        risk: With an inspecting plan: the step's highest risk (``safe``, ``review``,
            ``destructive``), ``irreversible`` when its ``downgrade()`` raises
            ``IrreversibleMigrationError`` (a rollback stops there), ``failed`` when a dry run of its
            body raised, or ``unknown`` when its body could not be followed to its end dry.
        changes: With an inspecting plan: what the step would send the catalog, in order: catalog
            operations and each table's requirements and updates, shaped as the REST catalog
            specification names them (see :mod:`~iceberg_ops_provider.migration.staged_changes`);
            up to where a dry run had to stop, for an ``unknown`` or ``failed`` step.
    """

    direction: Direction
    version: str
    description: str
    script: MigrationScript | None = field(default=None, compare=False, repr=False)
    operations: tuple[dict[str, Any], ...] = field(default=(), compare=False)
    risk: str | None = field(default=None, compare=False)
    changes: tuple[dict[str, Any], ...] = field(default=(), compare=False)

    def to_json(self) -> dict[str, Any]:
        """JSON-able form."""
        data: dict[str, Any] = {"direction": self.direction, "version": self.version, "description": self.description}
        if self.risk is not None:
            data["risk"] = self.risk
            data["operations"] = list(self.operations)
        return data


@dataclass(frozen=True)
class NamespaceState:
    """Files and history of one namespace, compared.

    Attributes:
        scripts: Every migration file, by version order.
        rows: The history rows, keyed by version.
        applied: Versions whose latest status is ``applied``, ascending.
        pending: Files not applied (never run, rolled back or failed), ascending.
        failed: Versions whose latest status is ``failed``.
        changed: Applied versions whose code changed since (comments, layout and docstrings do not count).
        missing: Applied versions whose file is gone.
        out_of_order: Pending files numbered below the current version.
        broken: Files that could not be loaded, in a read-only report (``status``, ``check``); an
            applied one is not ``missing``, an unapplied one is ``pending``.
    """

    scripts: tuple[MigrationScript, ...]
    rows: dict[str, HistoryRow]
    applied: tuple[str, ...]
    pending: tuple[str, ...]
    failed: tuple[str, ...]
    changed: tuple[str, ...]
    missing: tuple[str, ...]
    out_of_order: tuple[str, ...]
    broken: tuple[BrokenFile, ...] = ()

    @property
    def current(self) -> str | None:
        """The highest applied version, or ``None`` at base."""
        return self.applied[-1] if self.applied else None

    def script(self, version: str) -> MigrationScript | None:
        """The file of ``version`` (matched by number), if present."""
        return self._by_number.get(int(version))

    @functools.cached_property
    def _by_number(self) -> dict[int, MigrationScript]:
        return {script.number: script for script in self.scripts}

    def description(self, version: str) -> str:
        """The description from the file, else from the history."""
        script = self.script(version)
        if script is not None:
            return script.description
        row = self.rows.get(version)
        if row is not None:
            return row.description
        file = next((file for file in self.broken if file.version and int(file.version) == int(version)), None)
        return file.slug if file is not None else ""

    def problems_by_kind(self) -> dict[str, list[str]]:
        """Human lines for everything odd, by kind: ``changed``, ``missing`` and ``out_of_order``."""
        return {
            "changed": [
                f"{v} was applied but its file has changed since (checksum differs): {self.script(v).path.name}"  # type: ignore[union-attr]
                for v in self.changed
            ],
            "missing": [
                f"{v} was applied but its file is missing ({self.rows[v].description!r})" for v in self.missing
            ],
            "out_of_order": [
                f"{v} is pending but numbered below the current version {self.current}" for v in self.out_of_order
            ],
        }

    def problems(self) -> list[str]:
        """Human lines for everything odd: changed, missing and out-of-order migrations."""
        return [line for lines in self.problems_by_kind().values() for line in lines]


def classify(
    scripts: list[MigrationScript], rows: list[HistoryRow], broken: tuple[BrokenFile, ...] = ()
) -> NamespaceState:
    """Compare the files with the history rows of one namespace.

    ``broken`` lists files that could not be loaded (a read-only report goes on without them): an
    applied one is not counted as missing, an unapplied one counts as pending.
    """
    by_version = {row.version: row for row in rows}
    by_number = {int(row.version): row for row in rows}
    applied_numbers = sorted(number for number, row in by_number.items() if row.status == "applied")
    applied = tuple(by_number[number].version for number in applied_numbers)
    script_numbers = {script.number: script for script in scripts}
    broken_versions = {int(file.version): file.version for file in broken if file.version is not None}
    present = {number: script.version for number, script in script_numbers.items()}
    present.update({number: v for number, v in broken_versions.items() if number not in present})
    pending = tuple(
        present[number]
        for number in sorted(present)
        if number not in by_number or by_number[number].status != "applied"
    )
    current = applied_numbers[-1] if applied_numbers else None
    changed = tuple(
        by_number[n].version
        for n in applied_numbers
        if n in script_numbers and not checksum_matches(by_number[n].checksum, script_numbers[n])
    )
    missing = tuple(by_number[n].version for n in applied_numbers if n not in present)
    out_of_order = tuple(v for v in pending if current is not None and int(v) < current)
    failed = tuple(row.version for row in sorted(rows, key=lambda r: int(r.version)) if row.status == "failed")
    return NamespaceState(tuple(scripts), by_version, applied, pending, failed, changed, missing, out_of_order, broken)


def _known_version(state: NamespaceState, target: str) -> str:
    found = next((v for v in [*(s.version for s in state.scripts), *state.rows] if int(v) == int(target)), None)
    if found is not None:
        return found
    known = ", ".join(s.version for s in state.scripts) or "none"
    raise MigrationTargetError(f"Unknown target version {target!r}. Known versions: {known}.")


def _check_target_syntax(target: str) -> None:
    if not isinstance(target, str) or not (
        target in ("head", "base") or _VERSION.match(target) or _RELATIVE.match(target)
    ):
        raise MigrationTargetError(
            f"Target {target!r} is not valid. Use 'head', 'base', a version such as '0003', '+N' or '-N'."
        )


def infer_direction(state: NamespaceState, target: str) -> Direction:
    """Which way ``target`` points from the current state (``plan`` uses it when not told)."""
    _check_target_syntax(target)
    if target == "base" or target.startswith("-"):
        return "downgrade"
    if target == "head" or target.startswith("+"):
        return "upgrade"
    version = _known_version(state, target)
    above = [v for v in state.applied if int(v) > int(version)]
    return "downgrade" if above else "upgrade"


def check_integrity(
    state: NamespaceState,
    namespace: str,
    *,
    allow_changed: bool = False,
    allow_missing: bool = False,
    allow_out_of_order: bool = False,
) -> None:
    """Refuse to migrate when files and history disagree, unless the caller allows each kind.

    Raises:
        MigrationIntegrityError: Lists every problem not allowed, and the arguments that allow them.
    """
    by_kind = state.problems_by_kind()
    allowed = {"changed": allow_changed, "missing": allow_missing, "out_of_order": allow_out_of_order}
    problems = [line for kind, lines in by_kind.items() if not allowed[kind] for line in lines]
    if problems:
        raise MigrationIntegrityError(
            namespace,
            problems,
            message(
                "Restore the files, or allow this explicitly: {changed} / {missing} / {out_of_order}. If a change "
                "to an applied file is intended (a reviewed edit), record the file as it is now with {repair}.",
                changed=Arg("allow_changed", True),
                missing=Arg("allow_missing", True),
                out_of_order=Arg("allow_out_of_order", True),
                repair=Hint("repair", "MigrationRunner.repair()"),
            ),
            kinds=[kind for kind, lines in by_kind.items() if lines and not allowed[kind]],
        )


def restricted_to(state: NamespaceState, versions: set[str]) -> NamespaceState:
    """``state`` with its problems limited to ``versions`` (what a downgrade will touch)."""
    return replace(
        state,
        changed=tuple(v for v in state.changed if v in versions),
        missing=tuple(v for v in state.missing if v in versions),
        out_of_order=(),
    )


def _step(state: NamespaceState, direction: Direction, version: str) -> PlanStep:
    return PlanStep(direction, version, state.description(version), state.script(version))


def _first(target: str, versions: list[str], what: str, state: str) -> list[str]:
    """The first N of ``versions`` for a relative target ``+N``/``-N``."""
    count = int(target[1:])
    if count < 1:
        raise MigrationTargetError(f"'{target[0]}N' needs N of at least 1.")
    if count > len(versions):
        raise MigrationTargetError(f"Target {target!r} asks for {count} {what} but {len(versions)} are {state}.")
    return versions[:count]


def upgrade_steps(state: NamespaceState, target: str = "head") -> list[PlanStep]:
    """The migrations an upgrade to ``target`` applies, in order.

    Raises:
        MigrationTargetError: The target points down (``base``, ``-N``, a version below the
            current one), is unknown, or asks for more steps than are pending.
    """
    _check_target_syntax(target)
    if target == "base" or target.startswith("-"):
        raise MigrationTargetError(f"Target {target!r} points down; use downgrade.")
    pending = list(state.pending)
    if target == "head":
        chosen = pending
    elif target.startswith("+"):
        chosen = _first(target, pending, "migrations", "pending")
    else:
        version = _known_version(state, target)
        if state.script(version) is None:
            raise MigrationTargetError(f"Version {version} has no migration file, so it cannot be upgraded to.")
        current = state.current
        if current is not None and int(version) < int(current) and version in state.applied:
            raise MigrationTargetError(
                f"Version {version} is below the current version {current}; use downgrade to go back."
            )
        chosen = [v for v in pending if int(v) <= int(version)]
    return [_step(state, "upgrade", version) for version in chosen]


def downgrade_steps(state: NamespaceState, target: str) -> list[PlanStep]:
    """The migrations a downgrade to ``target`` rolls back, newest first.

    An exact version stays applied: ``downgrade("0003")`` leaves 0003 as the current version.

    Raises:
        MigrationTargetError: The target points up, is unknown, or asks for more steps than are applied.
    """
    _check_target_syntax(target)
    if target == "head" or target.startswith("+"):
        raise MigrationTargetError(f"Target {target!r} points up; use upgrade.")
    applied = list(reversed(state.applied))
    if target == "base":
        chosen = applied
    elif target.startswith("-"):
        chosen = _first(target, applied, "rollbacks", "applied")
    else:
        try:
            version = _known_version(state, target)
        except MigrationTargetError as exc:
            raise MigrationTargetError(f"{exc}{relative_hint(state, target)}") from exc
        current = state.current
        if current is None or int(version) > int(current):
            raise MigrationTargetError(
                f"Version {version} is above the current version {current or 'base'}, so a downgrade cannot go "
                "there: a target written as a number is an absolute version (it stays applied), while '-N' is "
                f"relative and rolls back the last N applied migrations.{relative_hint(state, target)}"
                " To go forward, use upgrade."
            )
        chosen = [v for v in applied if int(v) > int(version)]
    return [_step(state, "downgrade", version) for version in chosen]


def relative_hint(state: NamespaceState, target: str) -> str:
    """For a downgrade target written as a bare number: `` Did you mean '-N'? ...`` when ``-N`` can work; else empty.

    ``1`` is the absolute version 0001 and ``-1`` the last applied migration, so a forgotten minus
    points a downgrade at an old version (or up, or nowhere). A number written with leading zeros
    (``0001``) is a version on purpose and gets no hint.
    """
    if not _VERSION.match(str(target)) or target != str(int(target)):
        return ""
    count = int(target)
    if not 1 <= count <= len(state.applied):
        return ""
    try:
        absolute = f"version {_known_version(state, target)}"
    except MigrationTargetError:
        absolute = f"version number {count}"
    last = ", ".join(reversed(state.applied[-count:]))
    return (
        f" Did you mean '-{count}'? It rolls back the last {count} applied migration(s) ({last}); "
        f"'{target}' is {absolute}."
    )


def stamp_changes(state: NamespaceState, target: str) -> tuple[list[str], list[str]]:
    """What ``stamp(target)`` records: versions to mark applied, and versions to mark rolled back.

    After a stamp, exactly the files up to ``target`` count as applied (``head``: all, ``base``: none).

    Raises:
        MigrationTargetError: Relative targets, or an unknown version.
    """
    _check_target_syntax(target)
    if _RELATIVE.match(target):
        raise MigrationTargetError("stamp takes 'head', 'base' or a version, not a relative target.")
    if target == "head":
        limit = max((s.number for s in state.scripts), default=-1)
    elif target == "base":
        limit = -1
    else:
        limit = int(_known_version(state, target))
    to_apply = [s.version for s in state.scripts if s.number <= limit and s.version not in state.applied]
    to_roll_back = [v for v in reversed(state.applied) if int(v) > limit]
    return to_apply, to_roll_back
