"""Verification of a finished move: the source rows it was defined over against the rows it committed."""

from __future__ import annotations

import logging
from dataclasses import replace
from typing import TYPE_CHECKING

from pyiceberg.table.refs import MAIN_BRANCH

from iceberg_ops_provider.data_migration import move_files
from iceberg_ops_provider.data_migration.resolution import build_mapping, load_source, load_target, metadata_at
from iceberg_ops_provider.data_migration.results import VERIFY_METHODS, VerifyReport
from iceberg_ops_provider.data_migration.state import find_state
from iceberg_ops_provider.data_migration.verify import verify_rows
from iceberg_ops_provider.errors import InvalidMoveError, MoveStateError

if TYPE_CHECKING:
    from iceberg_ops_provider.data_migration.mover import DataMover

__all__ = ["verify_move"]

log = logging.getLogger(__name__)


def verify_move(mover: DataMover, method: str | None = None, *, seed: int | None = None) -> VerifyReport:
    """Compare the source rows the move was defined over with the rows its commits hold in the target.

    Args:
        mover: The move.
        method: ``count``, ``checksum`` or ``sample``; default the ``verify`` given to the mover, else ``count``.
        seed: Seed of the ``sample`` method's choice of rows (recorded in the report).

    Raises:
        MoveStateError: The move has not finished (or never ran).
    """
    method = method or mover.verify_method or "count"
    if method not in VERIFY_METHODS:
        raise InvalidMoveError(f"method={method!r} is not one of {', '.join(VERIFY_METHODS)}.")
    source = load_source(mover)
    target = load_target(mover)
    state, _ = find_state(target.metadata, mover.move_id, MAIN_BRANCH) if target is not None else (None, None)
    if state is None or not state.complete:
        done = f"{len(state.done)} of {state.unit_count} units" if state is not None else "nothing"
        raise MoveStateError(
            f"Move {mover.move_id!r} has not finished ({done} committed to {mover.target}); run it first."
        )
    assert target is not None
    source_metadata = metadata_at(source, state.completed_snapshot_id)
    mapping = build_mapping(mover, source_metadata.schema(), target)
    compared = list(mapping.compared_columns) if method != "count" else list(mapping.compared_columns[:1])
    source_stream = move_files.source_batches(
        source,
        source_metadata,
        state.completed_snapshot_id,
        mover.where,
        mapping.source_columns,
        mapping.convert,
        mapping.file_names,
        compared,
    )
    target_stream, scope = move_files.target_batches(
        target, mover.move_id, MAIN_BRANCH, compared, mapping.target_expression(mover.where), state.rows
    )
    report = verify_rows(
        method, source_stream, target_stream, columns=compared, sample_size=mover.sample_size, seed=seed
    )
    details = {**report.details, **scope, "source_snapshot_id": state.completed_snapshot_id}
    report = replace(report, details=details)
    log.info(
        "verify (%s) of move %s: %s (%d source rows, %d target rows)",
        method,
        mover.move_id,
        "ok" if report.ok else "DIFFERENT",
        report.source_rows,
        report.target_rows,
    )
    return report
