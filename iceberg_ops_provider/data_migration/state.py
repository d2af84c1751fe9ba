"""A move's progress, kept in the target table's snapshot summaries (and mirrored in a table property).

Each commit of a move carries its whole state under :data:`STATE_KEY` and requires the branch head it read
it from, so the move's newest snapshot on the branch holds the complete truth.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable
from dataclasses import asdict, dataclass, field, replace
from itertools import groupby
from typing import TYPE_CHECKING, Any

from pyiceberg.table.snapshots import ancestors_of

from iceberg_ops_provider.errors import MoveStateError
from iceberg_ops_provider.messages import Arg, message

if TYPE_CHECKING:
    from pyiceberg.table.metadata import TableMetadata
    from pyiceberg.table.snapshots import Snapshot

__all__ = [
    "MOVE_ID_KEY",
    "STATE_KEY",
    "MoveState",
    "file_prefix",
    "find_state",
    "format_ranges",
    "moves_from_source",
    "state_of",
    "parse_ranges",
]

MOVE_ID_KEY = "iceberg-ops.move-id"
"""Snapshot summary key: the move a snapshot was committed by."""

STATE_KEY = "iceberg-ops.move-state"
"""Snapshot summary key: the move's state (JSON) as of that snapshot."""

UNIT_KEY = "iceberg-ops.move-unit"
"""Snapshot summary key: the unit a snapshot committed (``index/count``), for people reading the history."""

PROPERTY_PREFIX = "iceberg-ops.move."
"""Table properties ``iceberg-ops.move.<move_id>`` mirror each move's newest state."""

STAGING_BRANCH_PREFIX = "iceberg-ops-move-"
"""An ``overwrite`` move commits its units to the branch ``iceberg-ops-move-<move_id>`` until it publishes."""

STATE_VERSION = 1


def file_prefix(move_id: str) -> str:
    """The start of the names of the data files a move writes (``move-<hash of move_id>-``).

    The move's key survives in the target's file names when its snapshots are expired, so a move
    whose progress was forgotten can still be recognised before it copies rows again.
    """
    return f"move-{hashlib.sha256(move_id.encode()).hexdigest()[:12]}-"


def format_ranges(indexes: Iterable[int]) -> str:
    """``{0, 1, 2, 5, 7, 8}`` as ``"0-2,5,7-8"`` (compact in a summary however many units are done)."""
    runs = [[index for _, index in run] for _, run in groupby(enumerate(sorted(set(indexes))), lambda p: p[1] - p[0])]
    return ",".join(str(run[0]) if len(run) == 1 else f"{run[0]}-{run[-1]}" for run in runs)


def parse_ranges(text: str) -> frozenset[int]:
    """The indexes ``format_ranges`` wrote."""
    indexes: set[int] = set()
    for part in filter(None, text.split(",")):
        low, _, high = part.partition("-")
        indexes.update(range(int(low), int(high or low) + 1))
    return frozenset(indexes)


@dataclass(frozen=True)
class MoveState:
    """What a move has done, as its newest commit recorded it.

    ``source_uuid`` tells a table dropped and created again under the same name from the source;
    ``definition`` fingerprints what the move copies (filter, columns, rename, mode), and resuming
    with another under the same ``move_id`` is refused. ``snapshot_id`` is the source snapshot the
    current run reads, ``from_snapshot_id`` (incremental) the one the previous run finished at, and
    ``completed_snapshot_id`` the newest whose rows are all in the target. ``done`` holds the indexes
    of the units of plan ``plan_id`` committed; ``commit_every_bytes`` is the unit size that plan was
    made with. ``epoch`` counts the runs of an incremental move (0 for the first); ``rows`` the rows
    committed over every run. ``fork_snapshot_id``: for a move that commits to a branch of its own
    (``DataMover(branch=...)``), the snapshot of ``main`` the branch was cut from for this run.
    """

    move_id: str
    source: str
    source_uuid: str
    definition: str
    snapshot_id: int | None
    plan_id: str
    unit_count: int
    commit_every_bytes: int
    done: frozenset[int] = field(default_factory=frozenset)
    from_snapshot_id: int | None = None
    completed_snapshot_id: int | None = None
    epoch: int = 0
    rows: int = 0
    fork_snapshot_id: int | None = None

    @property
    def complete(self) -> bool:
        """Whether every unit of the current plan is committed."""
        return len(self.done) >= self.unit_count

    def with_unit(self, index: int, rows: int) -> MoveState:
        """The state after committing unit ``index`` with ``rows`` rows."""
        done = self.done | {index}
        state = replace(self, done=done, rows=self.rows + rows)
        if len(done) >= self.unit_count:
            state = replace(state, completed_snapshot_id=self.snapshot_id)
        return state

    def to_summary(self) -> dict[str, str]:
        """The summary properties of a commit that records this state."""
        payload = asdict(self)
        payload["done"] = format_ranges(self.done)
        payload["v"] = STATE_VERSION
        if self.fork_snapshot_id is None:  # a move on main: its summaries stay as before branches existed
            del payload["fork_snapshot_id"]
        return {MOVE_ID_KEY: self.move_id, STATE_KEY: json.dumps(payload, sort_keys=True, separators=(",", ":"))}

    @classmethod
    def from_summary(cls, text: str, where: str) -> MoveState:
        """Read the state a commit recorded; ``where`` names the snapshot for the error message."""
        try:
            payload: dict[str, Any] = json.loads(text)
            version = payload.pop("v", None)
            if version == STATE_VERSION:
                payload["done"] = parse_ranges(payload.get("done", ""))
                return cls(**payload)
        except (ValueError, TypeError) as exc:
            raise MoveStateError(
                message(
                    f"The move state in {where} cannot be read ({exc}); the summary was changed by hand? "
                    "Start a new {move_id}.",
                    move_id=Arg("move_id"),
                )
            ) from exc
        raise MoveStateError(
            message(
                f"The move state in {where} has version {version!r}; this release reads version {STATE_VERSION}. "
                "Use the release that started the move to finish it, or start a new {move_id}.",
                move_id=Arg("move_id"),
            )
        )


def _summary_value(snapshot: Snapshot, key: str) -> str | None:
    return snapshot.summary.additional_properties.get(key) if snapshot.summary is not None else None


def property_key(move_id: str) -> str:
    """The table property that mirrors a move's newest state (it outlives snapshot expiry and compaction)."""
    return f"{PROPERTY_PREFIX}{move_id}"


def mirror_properties(state: MoveState, branch: str, snapshot_id: int) -> dict[str, str]:
    """The table property recording ``state`` as committed by ``snapshot_id`` on ``branch``."""
    payload = json.loads(state.to_summary()[STATE_KEY])
    payload["branch"], payload["snapshot"] = branch, snapshot_id
    return {property_key(state.move_id): json.dumps(payload, sort_keys=True, separators=(",", ":"))}


def _mirrored(metadata: TableMetadata, move_id: str, branch: str, ancestry: set[int]) -> MoveState | None:
    """The state the table property keeps, when the branch's history no longer holds one (refused if rolled back)."""
    text = metadata.properties.get(property_key(move_id))
    if text is None:
        return None
    where = f"table property {property_key(move_id)}"
    try:
        payload: dict[str, Any] = json.loads(text)
        recorded_branch, snapshot_id = payload.pop("branch"), int(payload.pop("snapshot"))
    except (ValueError, KeyError, TypeError) as exc:
        raise MoveStateError(
            message(
                f"The {where} cannot be read ({exc}); remove it and use another {{move_id}}.", move_id=Arg("move_id")
            )
        ) from exc
    if recorded_branch != branch:
        return None
    if snapshot_id not in ancestry and metadata.snapshot_by_id(snapshot_id) is not None:
        raise MoveStateError(
            message(
                f"Move {move_id!r} committed target snapshot {snapshot_id}, which is no longer in the history of "
                f"{branch} (the table was rolled back past it): its recorded progress no longer matches the data. "
                "Use another {move_id} ({overwrite} replaces the rows), and remove the property "
                f"{property_key(move_id)}.",
                move_id=Arg("move_id"),
                overwrite=Arg("mode", "overwrite"),
            )
        )
    return MoveState.from_summary(json.dumps(payload), where)


def find_state(metadata: TableMetadata, move_id: str, branch: str) -> tuple[MoveState | None, Snapshot | None]:
    """The newest state of ``move_id`` on ``branch`` and the branch head it was read at.

    The state is read from the newest snapshot of the move on the branch; when expiry removed all of
    them, from the table property mirroring it. Returns ``(None, head)`` when neither knows the move
    (or the branch has no snapshot: ``(None, None)``).
    """
    head = metadata.snapshot_by_name(branch)
    if head is None:
        return None, None
    ancestry: set[int] = set()
    for snapshot in ancestors_of(head, metadata):
        ancestry.add(snapshot.snapshot_id)
        state = state_of(snapshot, move_id)
        if state is not None:
            return state, head
    return _mirrored(metadata, move_id, branch, ancestry), head


def state_of(snapshot: Snapshot, move_id: str) -> MoveState | None:
    """The state of ``move_id`` that ``snapshot``'s summary records, if it records one."""
    if _summary_value(snapshot, MOVE_ID_KEY) != move_id:
        return None
    text = _summary_value(snapshot, STATE_KEY)
    return MoveState.from_summary(text, f"target snapshot {snapshot.snapshot_id}") if text is not None else None


def move_snapshots(metadata: TableMetadata, move_id: str, branch: str) -> list[Snapshot]:
    """Every snapshot on ``branch``'s ancestry committed by ``move_id``, newest first."""
    ancestry = ancestors_of(metadata.snapshot_by_name(branch), metadata)
    return [s for s in ancestry if _summary_value(s, MOVE_ID_KEY) == move_id]


def moves_from_source(metadata: TableMetadata, source_uuid: str) -> dict[str, int]:
    """Rows committed so far by each move whose state the target's properties keep, from source ``source_uuid``.

    A property that cannot be read is left out.
    """
    found: dict[str, int] = {}
    for key, text in metadata.properties.items():
        if not key.startswith(PROPERTY_PREFIX):
            continue
        try:
            payload = json.loads(text)
            if payload.get("source_uuid") == source_uuid:
                found[key.removeprefix(PROPERTY_PREFIX)] = int(payload.get("rows", 0))
        except (ValueError, TypeError, AttributeError):
            continue
    return found
