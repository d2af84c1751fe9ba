"""Forgetting finished data steps: the table properties mirroring their state, removed once nothing reads them.

A data step mirrors its state in ``iceberg-ops.data-step.<step id>``, and a copy step's move in
``iceberg-ops.move.<move id>`` (its move id is the step id), so that a step interrupted before its migration
was recorded resumes even after snapshot expiry. Once the migration is recorded, the step never runs again;
:func:`forget_steps` removes those properties in one commit (docs/data-steps.md, "Forgetting finished steps").
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from typing import TYPE_CHECKING

from iceberg_ops_provider.core.retrying import lost_races
from iceberg_ops_provider.data_migration.state import PROPERTY_PREFIX as MOVE_PREFIX
from iceberg_ops_provider.data_migration.state import property_key as move_key
from iceberg_ops_provider.data_steps.state import PROPERTY_PREFIX, move_id_of

if TYPE_CHECKING:
    from pyiceberg.table import Table

__all__ = ["FORGET_ATTEMPTS", "forget_steps", "state_keys"]

FORGET_ATTEMPTS = 5
"""Attempts of the removal's commit that lose to other writers' commits (each on a fresh read of the table)."""


def state_keys(properties: Mapping[str, str], step_ids: Collection[str], prefixes: Collection[str] = ()) -> list[str]:
    """The keys of ``properties`` that mirror the state of ``step_ids``, or of steps whose ids start with ``prefixes``.

    A step id names its data step's property and its copy's move property; nothing else is matched (not
    ``iceberg-ops.data-step.unit-bytes``, a setting under the same prefix). Sorted.
    """
    wanted = {PROPERTY_PREFIX + step_id for step_id in step_ids}
    wanted |= {move_key(move_id_of(step_id)) for step_id in step_ids}
    starts = tuple(PROPERTY_PREFIX + prefix for prefix in prefixes if prefix)
    starts += tuple(MOVE_PREFIX + move_id_of(prefix) for prefix in prefixes if prefix)
    return sorted(key for key in properties if key in wanted or (starts and key.startswith(starts)))


def forget_steps(table: Table, step_ids: Collection[str], prefixes: Collection[str] = ()) -> list[str]:
    """Remove from ``table`` the properties :func:`state_keys` finds, in one metadata commit; the keys removed.

    Only call it once nothing will run these steps again (their migration is recorded): a step whose
    snapshots were expired and whose property is gone starts afresh. A commit that loses to another
    writer's is tried again on a fresh read of the table, up to :data:`FORGET_ATTEMPTS` times.

    Raises:
        CommitFailedException: Every attempt lost (or whatever else the catalog raised); nothing was removed.
    """
    label = ".".join(table.name())
    for attempt in lost_races(FORGET_ATTEMPTS, what=f"removing the state of finished data steps from {label}"):
        with attempt:
            if attempt.retry_state.attempt_number > 1:
                table.refresh()
            keys = state_keys(table.properties, step_ids, prefixes)
            if keys:
                with table.transaction() as transaction:
                    transaction.remove_properties(*keys)
            return keys
    raise AssertionError("unreachable")  # pragma: no cover
