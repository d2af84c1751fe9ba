"""Verification of a finished move: the source rows it was defined over against the rows it committed."""

from __future__ import annotations

import logging
from dataclasses import replace
from typing import TYPE_CHECKING

from pyiceberg.exceptions import NoSuchTableError
from pyiceberg.table.refs import MAIN_BRANCH

from iceberg_ops_provider.data_migration import move_files
from iceberg_ops_provider.data_migration.audit_branch import is_audit_branch
from iceberg_ops_provider.data_migration.resolution import bound_filter, build_mapping, load_source, metadata_at
from iceberg_ops_provider.data_migration.results import VERIFY_METHODS, VerifyReport
from iceberg_ops_provider.data_migration.state import find_state
from iceberg_ops_provider.data_migration.verify import verify_rows
from iceberg_ops_provider.errors import InvalidMoveError, MoveStateError
from iceberg_ops_provider.messages import Arg, Hint, message

if TYPE_CHECKING:
    from iceberg_ops_provider.data_migration.definition import MoveDefinition

__all__ = ["verify_move"]

log = logging.getLogger(__name__)


def verify_move(mover: MoveDefinition, method: str | None = None, *, seed: int | None = None) -> VerifyReport:
    """Compare the source rows the move was defined over with the rows its commits hold in the target.

    ``method`` defaults to the mover's ``verify``, else ``count``. Once the move's files were rewritten,
    its rows are compared with every target row matching the move's filter; when other writers changed
    the target too, ``count`` and ``sample`` cannot vouch for it: where they found no difference the
    report is not ok and its ``untrusted`` detail says why.

    Raises:
        MoveStateError: The move has not finished (or never ran: its target does not exist).
    """
    method = method or mover.verify_method or "count"
    if method not in VERIFY_METHODS:
        raise InvalidMoveError(
            message(
                f"{{method}} is not one of {', '.join(VERIFY_METHODS)}.", about="method", method=Arg("method", method)
            )
        )
    source = load_source(mover)
    try:
        target = mover.target_catalog.load_table(mover.target)
    except NoSuchTableError as exc:
        raise MoveStateError(
            message(
                f"Move {mover.move_id!r} has not finished: its target {mover.target} does not exist, so nothing was "
                "moved there yet and there is nothing to verify; {run_first}.",
                run_first=Hint(
                    "run_move_first",
                    "run the move first (DataMover.run(); with create_target=True it creates the target)",
                    {"source": mover.source, "target": mover.target},
                ),
            )
        ) from exc
    # A move on a branch of its own is verified there until it is published (its branch removed).
    branch = mover.branch if is_audit_branch(mover.branch) and mover.branch in target.metadata.refs else MAIN_BRANCH
    state, _ = find_state(target.metadata, mover.move_id, branch)
    if state is None or not state.complete:
        done = f"{len(state.done)} of {state.unit_count} units" if state is not None else "nothing"
        raise MoveStateError(
            f"Move {mover.move_id!r} has not finished ({done} committed to {mover.target}); run it first."
        )
    source_metadata = metadata_at(source, state.completed_snapshot_id)
    row_filter = bound_filter(mover, source_metadata.schema())
    mapping = build_mapping(mover, source_metadata.schema(), target)
    compared = list(mapping.compared_columns) if method != "count" else list(mapping.compared_columns[:1])
    source_stream = move_files.source_batches(
        source, source_metadata, state.completed_snapshot_id, row_filter, mapping, compared
    )
    target_filter = mapping.target_expression(row_filter)
    target_stream, scope = move_files.target_batches(target, mover, compared, target_filter, state.rows, branch)
    report = verify_rows(
        method, source_stream, target_stream, columns=compared, sample_size=mover.sample_size, seed=seed
    )
    details = {**report.details, **scope, "source_snapshot_id": state.completed_snapshot_id}
    if branch != MAIN_BRANCH:
        details["branch"] = branch
    report = replace(report, details=details)
    foreign = scope.get("foreign_changes")
    if method != "checksum" and foreign and report.ok:
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
        "ok" if report.ok else ("CANNOT TELL" if report.details.get("untrusted") else "DIFFERENT"),
        report.source_rows,
        report.target_rows,
    )
    return report
