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
    from iceberg_ops_provider.data_migration.definition import MoveDefinition

__all__ = ["UNTRUSTED_METHODS", "verify_move"]

UNTRUSTED_METHODS = ("count", "sample")
"""Methods that cannot vouch for a target whose move files were rewritten while other writers changed it."""

log = logging.getLogger(__name__)


def verify_move(mover: MoveDefinition, method: str | None = None, *, seed: int | None = None) -> VerifyReport:
    """Compare the source rows the move was defined over with the rows its commits hold in the target.

    Args:
        mover: The move.
        method: ``count``, ``checksum`` or ``sample``; default the ``verify`` given to the mover, else ``count``.
        seed: Seed of the ``sample`` method's choice of rows (recorded in the report).

    Once the move's files were rewritten (a delete, a compaction) its rows are compared with every
    target row matching the move's filter. When other writers changed the target too (or it held rows
    before the move), ``count`` and ``sample`` cannot vouch for it: where they found no difference the
    report is not ok and its ``untrusted`` detail says why; ``checksum`` still compares every value.

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
        target,
        mover.move_id,
        MAIN_BRANCH,
        compared,
        mapping.target_expression(mover.where),
        state.rows,
        replaces_earlier_rows=mover.mode == "overwrite",
    )
    report = verify_rows(
        method, source_stream, target_stream, columns=compared, sample_size=mover.sample_size, seed=seed
    )
    details = {**report.details, **scope, "source_snapshot_id": state.completed_snapshot_id}
    report = replace(report, details=details)
    foreign = scope.get("foreign_changes")
    if method in UNTRUSTED_METHODS and foreign and report.ok:
        # Rows the move did not commit are counted next to its own: a deleted moved row and an appended
        # foreign one cancel out. Only a checksum of every value can still tell.
        untrusted = (
            f"{method} cannot tell the move's rows from others: its files were rewritten and "
            f"{'; '.join(foreign)}; run verify with method checksum"
        )
        report = replace(report, ok=False, details={**details, "untrusted": untrusted})
    log.info(
        "verify (%s) of move %s: %s (%d source rows, %d target rows)",
        method,
        mover.move_id,
        "ok" if report.ok else "DIFFERENT",
        report.source_rows,
        report.target_rows,
    )
    return report
