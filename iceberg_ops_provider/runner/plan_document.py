"""The plan as a versioned JSON document: ``plan`` in JSON and ``IcebergMigrateOperator(action="plan")``.

``plan_format`` 1, described with its fields and stability rules in ``docs/plan-format.md``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from iceberg_ops_provider.lint import lint_paths
from iceberg_ops_provider.runner.commit_modes import commit_mode_label

if TYPE_CHECKING:
    from iceberg_ops_provider.runner.migration_runner import MigrationRunner
    from iceberg_ops_provider.runner.planning import PlanStep

__all__ = ["COMMIT_MODES", "PLAN_FORMAT", "plan_document"]

PLAN_FORMAT = 1
"""The version of the document's layout."""

COMMIT_MODES = {"atomic": "all-or-nothing", "per-table": "table-by-table", "unknown": "unknown"}
"""The words of the document (and of the command line) for each commit mode of ``MigrationRunner.status()``."""
_TABLE_CHANGES = ("update-table", "create-table")


def plan_document(
    runner: MigrationRunner, steps: Sequence[PlanStep], target: str, *, lint: bool = True
) -> dict[str, Any]:
    """The document for ``steps`` (from an inspecting plan of ``runner`` to ``target``).

    Args:
        runner: The runner the plan was made with (its namespace, catalog and commit mode).
        steps: The inspected steps.
        target: The target as given.
        lint: Add each step's lint findings (``iceberg-ops lint``'s rules, judged against the live tables).
    """
    mode = COMMIT_MODES[commit_mode_label(runner.commit_mode())]
    return {
        "plan_format": PLAN_FORMAT,
        "namespace": runner.namespace,
        "target": target,
        "direction": steps[0].direction if steps else None,
        "commit_mode": mode,
        "steps": [_step(runner, step, mode, lint) for step in steps],
    }


def _step(runner: MigrationRunner, step: PlanStep, mode: str, lint: bool) -> dict[str, Any]:
    findings: list[dict[str, Any]] = []
    if lint and step.script is not None:
        report = lint_paths([step.script.path], catalog=runner.catalog, namespace=runner.namespace)
        findings = [f.to_json() for f in report.findings if f.function in (None, step.direction)]
    table_changes = any(change["operation"] in _TABLE_CHANGES for change in step.changes)
    return {
        "version": step.version,
        "direction": step.direction,
        "description": step.description,
        "risk": step.risk,
        "complete": step.risk not in ("unknown", "failed"),
        "commit_mode": mode if mode != "all-or-nothing" or table_changes else "table-by-table",
        "operations": list(step.operations),
        "findings": findings,
        "changes": list(step.changes) if step.risk != "irreversible" else [],
    }
