"""What defines a move, as the steps of a move read it: tables, filter, columns, mode and identity.

:class:`MoveDefinition` is the read-only view that resolution, the run of units and verification
take instead of the :class:`~iceberg_ops_provider.data_migration.mover.DataMover` itself, so they
depend on nothing above them: ``DataMover`` satisfies it structurally (its validated arguments and
the identity it derives from them). This module imports nothing of the package at run time.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from pyiceberg.catalog import Catalog
    from pyiceberg.expressions import BooleanExpression
    from pyiceberg.table import Table

__all__ = ["MoveDefinition"]


class MoveDefinition(Protocol):
    """The settings of one move that every step of it reads (validated, as ``DataMover`` holds them).

    Attributes:
        source_catalog: The catalog holding the source table.
        target_catalog: The target's catalog (the source's when none was given).
        source_table: The source table when it was given loaded (refreshed before use), else ``None``.
        source: The source table's identifier, ``namespace.table``.
        target: The target table's identifier, ``namespace.table``.
        where: The rows to move (``AlwaysTrue()`` for every row), on source columns.
        where_text: The filter as it was given, for messages (``None`` for every row).
        columns: The source columns to move (``None`` for all).
        rename: ``{source_column: target_column}`` for the columns whose names differ.
        create_target: Whether a missing target may be created from the source's schema, spec and sort order.
        mode: ``append``, ``overwrite`` or ``incremental``.
        move_id: The move's name: its state and files in the target are keyed by it.
        branch: The branch units commit to: ``main``, or an overwrite's staging branch.
        definition: The fingerprint of the target, filter, columns, renames and mode, recorded in the move's state.
        source_snapshot_id: The source snapshot asked for when the move starts (``None``: the current one).
        commit_every_bytes: Source bytes per unit, for a move that starts now.
        verify_method: The verification asked for (``count``, ``checksum``, ``sample``), or ``None``.
        sample_size: Rows compared by the ``sample`` verification.
    """

    source_catalog: Catalog
    target_catalog: Catalog
    source_table: Table | None
    source: str
    target: str
    where: BooleanExpression
    where_text: str | None
    columns: list[str] | None
    rename: dict[str, str]
    create_target: bool
    mode: str
    move_id: str
    branch: str
    definition: str
    source_snapshot_id: int | None
    commit_every_bytes: int
    verify_method: str | None
    sample_size: int
