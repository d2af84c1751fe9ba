"""Forgetting a recorded migration's data steps: their state properties removed from its tables, best effort.

A data step's state (and a copy step's move state) is mirrored in a table property so that the migration's
next run can finish the step after a crash. Once the migration's history row is durable, no run looks for
that state again, and :func:`forget_data_steps` removes it: the steps its intent lists, one commit per
table. It is called only after the row is recorded (docs/data-steps.md, "Forgetting finished steps").
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from pyiceberg.exceptions import NoSuchTableError

from iceberg_ops_provider.data_steps.forget import forget_steps, state_keys

if TYPE_CHECKING:
    from pyiceberg.catalog import Catalog
    from pyiceberg.table import Table

    from iceberg_ops_provider.history.intent import Intent

__all__ = ["forget_data_steps", "step_id_prefix"]

log = logging.getLogger("iceberg_ops_provider.runner")


def step_id_prefix(namespace: str, version: str, direction: str) -> str:
    """How the ids of every data step of a migration's upgrade or downgrade start: ``sales/0004/upgrade/``.

    A step id continues with the run and the step's ordinal (``sales/0004/upgrade/<run id>/2``): the run
    that starts a step names it, and a run that resumes it keeps that name.
    """
    return f"{namespace}/{version}/{direction}/"


def forget_data_steps(catalog: Catalog, intent: Intent | None) -> None:
    """Remove the state of ``intent``'s data steps from their tables, once its migration's history row is durable.

    For each table: the properties of the steps the intent lists; after a downgrade's ``restore_data``, also
    those its upgrade's steps left on it (a run killed before removing them), which claim commits the restore
    took off ``main``. Nothing else (settings such as ``iceberg-ops.data-step.unit-bytes``, restore-point tags)
    is touched. A table that is gone is skipped; a failure is logged with the table and the keys, never raised.
    """
    if intent is None:
        return
    wanted: dict[str, tuple[set[str], set[str]]] = {}  # table -> (step ids, step id prefixes)
    for action in intent.actions:
        if action.kind != "data" or not action.receipt:
            continue
        step_ids, prefixes = wanted.setdefault(action.table, (set(), set()))
        if action.operation == "restore_data":
            prefixes.add(step_id_prefix(intent.namespace, intent.version, "upgrade"))
        else:
            step_ids.add(action.receipt)
    for name, (step_ids, prefixes) in wanted.items():
        table: Table | None = None
        try:
            table = catalog.load_table(tuple(name.split(".")))
            removed = forget_steps(table, step_ids, prefixes)
        except NoSuchTableError:
            continue
        except Exception as exc:
            known = state_keys(table.properties, step_ids, prefixes) if table is not None else []
            steps = sorted(step_ids | {f"{prefix}*" for prefix in prefixes})
            keys = ", ".join(known) if known else f"those of steps {', '.join(steps)}"
            log.warning(
                "%s: could not remove the state of the finished data steps of %s (keys: %s; %s: %s). They are "
                "harmless (nothing reads them again) and stay until removed, for example with "
                "ctx.remove_properties(table, *keys) in a later migration.",
                name,
                f"{intent.namespace} {intent.version} ({intent.direction})",
                keys,
                type(exc).__name__,
                exc,
            )
            continue
        if removed:
            log.info("%s: removed the state of finished data steps: %s", name, ", ".join(removed))
