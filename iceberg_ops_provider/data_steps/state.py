"""A data step's progress, kept in the summary of each of its commits and mirrored in a table property.

Every unit commit carries the step's whole state (plan snapshot, unit count, done units, rows), so the
newest snapshot of the step on ``main`` holds the truth; the property outlives snapshot expiry.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field, replace
from typing import TYPE_CHECKING, Any

from pyiceberg.table.snapshots import ancestors_of

from iceberg_ops_provider.data_migration.state import MOVE_ID_KEY, format_ranges, parse_ranges
from iceberg_ops_provider.errors import DataStepStateError

if TYPE_CHECKING:
    from pyiceberg.table import Table
    from pyiceberg.table.metadata import TableMetadata
    from pyiceberg.table.snapshots import Snapshot

__all__ = [
    "STATE_KEY",
    "STEP_KEY",
    "UNIT_KEY",
    "StepState",
    "find_step_state",
    "mirror_property",
    "move_id_of",
    "property_key",
    "recorded_step",
    "step_state",
]

STEP_KEY = "iceberg-ops.data-step"
"""Snapshot summary key: the id of the step that made the commit."""

STATE_KEY = "iceberg-ops.data-state"
"""Snapshot summary key: the step's whole state after the commit (JSON)."""

UNIT_KEY = "iceberg-ops.data-unit"
"""Snapshot summary key: the index of the unit the commit applied."""

PROPERTY_PREFIX = "iceberg-ops.data-step."
"""Table property prefix: ``<prefix><step id>`` mirrors the step's newest state."""

STATE_VERSION = 1


@dataclass(frozen=True)
class StepState:
    """What a step has done, as its newest commit recorded it.

    ``plan_snapshot_id``: the snapshot the step reads; ``plan_id`` fingerprints its units (re-planned
    from that snapshot with ``unit_bytes`` on resume); ``done``: indexes of the committed units;
    ``rows``: rows changed so far; ``definition``: the step's fingerprint.
    """

    step_id: str
    definition: str
    plan_snapshot_id: int
    plan_id: str
    units_total: int
    unit_bytes: int
    done: frozenset[int] = field(default_factory=frozenset)
    rows: int = 0

    @property
    def units_done(self) -> int:
        """How many units are committed."""
        return len(self.done)

    @property
    def complete(self) -> bool:
        """Whether every unit is committed."""
        return len(self.done) >= self.units_total

    def with_unit(self, index: int, rows: int) -> StepState:
        """The state after committing unit ``index``, which changed ``rows`` rows."""
        return replace(self, done=self.done | {index}, rows=self.rows + rows)

    def to_json(self) -> str:
        """The state as the summary and the property record it."""
        payload: dict[str, Any] = asdict(self)
        payload["done"] = format_ranges(self.done)
        payload["v"] = STATE_VERSION
        return json.dumps(payload, sort_keys=True, separators=(",", ":"))

    @classmethod
    def from_json(cls, text: str, where: str) -> StepState:
        """Read a recorded state; ``where`` names its place for the error message.

        Raises:
            DataStepStateError: It cannot be read, or a newer release wrote it.
        """
        try:
            payload: dict[str, Any] = json.loads(text)
            version = payload.pop("v", None)
            payload.pop("snapshot", None)
            if version == STATE_VERSION:
                payload["done"] = parse_ranges(payload.get("done", ""))
                return cls(**payload)
        except (ValueError, TypeError) as exc:
            raise DataStepStateError(f"The data step state in {where} cannot be read ({exc}).") from exc
        raise DataStepStateError(
            f"The data step state in {where} has version {version!r}; this release reads version {STATE_VERSION}."
        )

    def summary(self) -> dict[str, str]:
        """The snapshot summary properties of a commit recording this state."""
        return {STEP_KEY: self.step_id, STATE_KEY: self.to_json()}


def property_key(step_id: str) -> str:
    """The table property mirroring the newest state of ``step_id``."""
    return f"{PROPERTY_PREFIX}{step_id}"


def mirror_property(state: StepState, snapshot_id: int) -> dict[str, str]:
    """The table property recording ``state`` as committed by ``snapshot_id``."""
    payload = json.loads(state.to_json())
    payload["snapshot"] = snapshot_id
    return {property_key(state.step_id): json.dumps(payload, sort_keys=True, separators=(",", ":"))}


def find_step_state(metadata: TableMetadata, step_id: str) -> StepState | None:
    """The newest state of ``step_id``: from ``main``'s ancestry, else from the mirroring property."""
    head = metadata.current_snapshot()
    if head is not None:
        for snapshot in ancestors_of(head, metadata):
            properties = snapshot.summary.additional_properties if snapshot.summary is not None else {}
            if properties.get(STEP_KEY) == step_id and STATE_KEY in properties:
                return StepState.from_json(properties[STATE_KEY], f"snapshot {snapshot.snapshot_id}")
    text = metadata.properties.get(property_key(step_id))
    return StepState.from_json(text, f"table property {property_key(step_id)}") if text is not None else None


def step_state(table: Table, step_id: str) -> StepState | None:
    """The recorded state of ``step_id`` on ``table`` (as loaded), or ``None`` when it never committed a unit.

    Raises:
        DataStepStateError: The recorded state cannot be read.
    """
    return find_step_state(table.metadata, step_id)


def move_id_of(step_id: str) -> str:
    """The data mover's move id of a copy run as data step ``step_id``: the step id itself.

    A resumed step (same id) continues the same move, and each of the move's commits names the step.
    """
    return step_id


def recorded_step(snapshot: Snapshot) -> str | None:
    """The data step that committed ``snapshot``: a step's id, or the move id of a copy step; else ``None``."""
    properties = snapshot.summary.additional_properties if snapshot.summary is not None else {}
    return properties.get(STEP_KEY) or properties.get(MOVE_ID_KEY)
