"""A migration's ``copy_rows``: the data mover run as one of its data steps.

The move is named by the step id (:func:`~iceberg_ops_provider.data_steps.state.move_id_of`), so a run
resumed under the interrupted run's step ids continues the same move, unit by unit, and no row is copied
twice; the intent judges the step by the move's own state (docs/migrations.md, "Data operations").
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

from iceberg_ops_provider.data_migration import DEFAULT_COMMIT_EVERY_BYTES, DataMover
from iceberg_ops_provider.data_migration.planning import fingerprint
from iceberg_ops_provider.data_steps.state import move_id_of

if TYPE_CHECKING:
    from collections.abc import Callable

    from pyiceberg.catalog import Catalog

    from iceberg_ops_provider.data_migration import MoveResult
    from iceberg_ops_provider.migration.data_operations import CopyRows
    from iceberg_ops_provider.migration.staging import Identifier
    from iceberg_ops_provider.progress import Progress

__all__ = ["Copied", "copy_fingerprint", "copy_mover", "run_copy"]


def copy_mover(
    catalog: Catalog,
    operation: CopyRows,
    source: Identifier,
    target: Identifier,
    step_id: str,
    unit_bytes: int | None = None,
) -> DataMover:
    """The mover of a copy step: appends to ``target`` on ``main``, its move id derived from ``step_id``.

    Raises:
        InvalidMoveError: A bad ``where``, ``columns`` or ``rename``, or a copy of a table into itself.
    """
    return DataMover(
        catalog,
        ".".join(source),
        ".".join(target),
        where=operation.where,
        columns=list(operation.columns) if operation.columns is not None else None,
        rename=dict(operation.rename),
        move_id=move_id_of(step_id),
        commit_every_bytes=unit_bytes or DEFAULT_COMMIT_EVERY_BYTES,
    )


def copy_fingerprint(mover: DataMover) -> str:
    """What the intent records of a copy step: the source and the move's own definition."""
    return fingerprint({"kind": "copy_rows", "source": mover.source, "definition": mover.definition})


@dataclass(frozen=True)
class Copied:
    """What a copy step's run did: the data mover's result for step ``step_id``."""

    step_id: str
    result: MoveResult

    def to_json(self) -> dict[str, Any]:
        """JSON-able form, beside the other data steps' results."""
        return {"kind": "copy_rows", "step_id": self.step_id, **self.result.to_json()}


def run_copy(mover: DataMover, step_id: str, what: str, report: Callable[[str], None] | None = None) -> Copied:
    """Run the move to its end, resuming from its last committed unit; ``report`` hears of each unit committed."""
    if report is not None:
        units_seen = [-1]

        def on_progress(progress: Progress) -> None:
            # The mover reports on this thread (the one committing units), at most twice a second while a
            # unit is copied: only a unit committed is an event of the migration (and the moment the runner
            # checks its lease).
            if progress.units_done != units_seen[0]:
                units_seen[0] = progress.units_done
                report(replace(progress, label=what).describe())

        mover.on_progress = on_progress
    return Copied(step_id, mover.run())
