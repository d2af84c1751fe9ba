"""``maintain compact --plan``, ``--units FILE`` and ``--unit ID``: compaction as units, from the shell.

``--plan --json`` prints ``{"table": ..., "units": [...]}`` (a list of them with ``--all``); ``--units FILE``
reads such a document (or a bare list of units); ``--unit ID`` picks units by id or plan index.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import click

from iceberg_ops_provider.cli.shared import text_table
from iceberg_ops_provider.progress import size_text

__all__ = [
    "PLAN_COMMAND",
    "PlannedUnits",
    "describe_plan",
    "plan_document",
    "read_units",
    "select_units",
    "units_by_table",
]

PLAN_COMMAND = "iceberg-ops maintain compact TABLE --plan --json"


def read_units(source: str) -> list[dict[str, Any]]:
    """The units of a ``--units`` file (``-``: standard input), each checked to be a unit.

    Raises:
        click.BadParameter: The file is missing, not JSON, or holds something that is not a unit.
    """
    hint = "'--units'"
    try:
        text = click.get_text_stream("stdin").read() if source == "-" else Path(source).read_text()
    except OSError as exc:
        raise click.BadParameter(f"cannot read {source}: {exc.strerror or exc}.", param_hint=hint) from exc
    try:
        document = json.loads(text)
    except ValueError as exc:
        raise click.BadParameter(
            f"{source} is not JSON ({exc}); give the document `{PLAN_COMMAND}` prints.", param_hint=hint
        ) from exc
    units = _units_of(document)
    if units is None:
        raise click.BadParameter(
            f"{source} holds no units: give the document `{PLAN_COMMAND}` prints (or a list of its units).",
            param_hint=hint,
        )
    from iceberg_ops_provider.maintenance.compaction_units import CompactionUnit

    for position, unit in enumerate(units, start=1):
        try:
            CompactionUnit.from_json(unit)
        except ValueError as exc:
            reason = str(exc).split(":", 1)[0]
            raise click.BadParameter(
                f"entry {position} of {source} is not a compaction unit ({reason}); give units as `{PLAN_COMMAND}` "
                "prints them.",
                param_hint=hint,
            ) from exc
    return units


def _units_of(document: Any) -> list[Any] | None:
    """The units in a plan document, a list of plan documents (``--all``), or a bare list of units."""
    if isinstance(document, dict):
        units = document.get("units")
        return list(units) if isinstance(units, list) else None
    if isinstance(document, list):
        if all(isinstance(item, dict) and "units" in item for item in document):
            return [unit for item in document for unit in (item["units"] or [])]
        return list(document)
    return None


def select_units(units: Sequence[dict[str, Any]], wanted: Sequence[str], source: str) -> list[dict[str, Any]]:
    """The units ``--unit`` names (by ``unit_id`` or plan ``index``), in plan order; all when none is named.

    Raises:
        click.BadParameter: A ``--unit`` matching no unit, listing the ids there are.
    """
    if not wanted:
        return list(units)
    missing = [w for w in wanted if not any(_matches(unit, w) for unit in units)]
    if missing:
        known = ", ".join(f"{unit['index']} ({unit.get('unit_id', '?')})" for unit in units) or "none"
        raise click.BadParameter(
            f"{', '.join(missing)} is not a unit of {source} (units: {known}). A unit already compacted is no "
            "longer in a fresh plan: give the file with --units to see it skipped.",
            param_hint="'--unit'",
        )
    return [unit for unit in units if any(_matches(unit, w) for w in wanted)]


def _matches(unit: dict[str, Any], wanted: str) -> bool:
    return wanted == str(unit.get("unit_id")) or (wanted.isdigit() and int(wanted) == unit.get("index"))


def units_by_table(units: Sequence[dict[str, Any]]) -> dict[str, list[dict[str, Any]]]:
    """Units grouped by their table, in the order met."""
    tables = dict.fromkeys(str(unit["table"]) for unit in units)
    return {table: [unit for unit in units if str(unit["table"]) == table] for table in tables}


@dataclass(frozen=True)
class PlannedUnits:
    """A table's units as ``--plan`` shows them."""

    table: str
    units: tuple[Any, ...]


def plan_document(planned: PlannedUnits) -> dict[str, Any]:
    """The ``--plan --json`` document of a table: its units as ``to_json()``."""
    return {"table": planned.table, "units": [unit.to_json() for unit in planned.units]}


def describe_plan(planned: PlannedUnits) -> str:
    """The human ``--plan``: one line per unit, and how to run some of them."""
    table, units = planned.table, planned.units
    if not units:
        return f"{table}: nothing to compact (no partition has enough small files)."
    files = sum(len(unit.data_files) for unit in units)
    head = (
        f"{table}: {len(units)} unit(s), {files} small file(s), {size_text(sum(unit.bytes for unit in units))}; "
        "each unit commits on its own"
    )
    rows = [
        (unit.index, unit.unit_id, unit.partition or "-", len(unit.data_files), size_text(unit.bytes)) for unit in units
    ]
    advice = (
        f"Run some: iceberg-ops maintain compact {table} --unit {units[0].index}; or save the plan with --json and "
        "give it to --units FILE (each unit runs once, wherever it is run)."
    )
    return "\n".join([head, text_table(["unit", "id", "partition", "files", "size"], rows), advice])
