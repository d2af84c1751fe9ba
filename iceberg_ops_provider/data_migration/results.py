"""What the data mover plans, reports and verifies: plain, JSON-serializable records.

A :class:`MoveUnit` crosses process boundaries (an Airflow planning task hands units to mapped move
tasks through XCom), so every record here round-trips through ``to_json()`` / ``from_json()``.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from iceberg_ops_provider.core.documents import read_back

__all__ = ["MovePlan", "MoveResult", "MoveUnit", "VerifyReport", "VERIFY_METHODS"]

VERIFY_METHODS = ("count", "checksum", "sample")
"""The verification methods: row counts, an order-independent content checksum, N random rows compared."""


@dataclass(frozen=True)
class MoveUnit:
    """One unit of work of a move: a group of source data files committed to the target together.

    Attributes:
        plan_id: Fingerprint of the plan (source snapshot, filter, mapping and grouping); a unit is
            only run under the plan it came from.
        index: Position of the unit in the plan (0-based); the target records finished units by index.
        count: Number of units in the plan.
        files: Source data file locations the unit reads.
        bytes: Their total size on storage.
        records: Their total record count before filters and deletes.
    """

    move_id: str
    plan_id: str
    source_snapshot_id: int
    index: int
    count: int
    files: tuple[str, ...]
    bytes: int
    records: int

    def to_json(self) -> dict[str, Any]:
        """A JSON-serializable dict (``from_json`` reads it back)."""
        return {**asdict(self), "files": list(self.files)}

    @classmethod
    def from_json(cls, payload: dict[str, Any]) -> MoveUnit:
        """The unit ``to_json`` described.

        Raises:
            ValueError: Not a mapping, a key missing or a value of the wrong type; the message names it.
        """
        return read_back(
            cls, payload, "A move unit", "pass units as DataMover.plan() returned them (MoveUnit.to_json())"
        )


@dataclass(frozen=True)
class MovePlan:
    """What a move will do: its source snapshot and its units, with what is already done.

    Attributes:
        move_id: The move's identifier (the key of its progress in the target's snapshot summaries).
        source_snapshot_id: The source snapshot the move reads (pinned when the move first committed).
        from_snapshot_id: For an incremental move, the source snapshot the previous run finished at.
        done: Indexes of the units already committed.
        target_exists: Whether the target exists (``False`` only with ``create_target=True``).
        notes: What the plan decided that a reader should know (reconciliation, resumption).
    """

    move_id: str
    plan_id: str
    source: str
    target: str
    source_snapshot_id: int | None
    mode: str
    units: tuple[MoveUnit, ...]
    done: frozenset[int] = frozenset()
    from_snapshot_id: int | None = None
    target_exists: bool = True
    notes: tuple[str, ...] = ()

    @property
    def pending(self) -> tuple[MoveUnit, ...]:
        """The units not yet committed."""
        return tuple(unit for unit in self.units if unit.index not in self.done)

    @property
    def complete(self) -> bool:
        """Whether every unit is committed (a run would change nothing)."""
        return not self.pending

    @property
    def bytes(self) -> int:
        """Total source bytes of the plan."""
        return sum(unit.bytes for unit in self.units)

    @property
    def records(self) -> int:
        """Total source records of the plan (before filters and deletes)."""
        return sum(unit.records for unit in self.units)

    def to_json(self) -> dict[str, Any]:
        """A JSON-serializable dict."""
        units = [unit.to_json() for unit in self.units]
        return {**asdict(self), "units": units, "done": sorted(self.done), "notes": list(self.notes)} | {
            "bytes": self.bytes,
            "records": self.records,
        }


@dataclass(frozen=True)
class VerifyReport:
    """The outcome of comparing the source's rows with the rows the move wrote to the target.

    ``details`` holds method-specific facts: the two checksums, the sampled rows that had no match
    (with their values), the columns compared, the seed.
    """

    ok: bool
    method: str
    source_rows: int
    target_rows: int
    details: dict[str, Any] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        """A JSON-serializable dict."""
        return asdict(self)


@dataclass(frozen=True)
class MoveResult:
    """What a call to ``DataMover.run()`` did (the counts are this call's).

    Attributes:
        units_skipped: Units this call found already committed when it came to them: by another worker
            meanwhile, or, when ``units`` were named, by an earlier run (a run of a finished move names
            none and skips none).
        complete: Whether the whole move is now committed.
        verify: The verification report, when one ran.
    """

    move_id: str
    source: str
    target: str
    mode: str
    source_snapshot_id: int | None
    units_total: int
    units_committed: int
    units_skipped: int
    rows: int
    bytes_read: int
    bytes_written: int
    files_written: int
    seconds: float
    complete: bool
    target_snapshot_ids: tuple[int, ...] = ()
    verify: VerifyReport | None = None

    def to_json(self) -> dict[str, Any]:
        """A JSON-serializable dict (what the Airflow operator pushes to XCom)."""
        return {**asdict(self), "target_snapshot_ids": list(self.target_snapshot_ids)}
