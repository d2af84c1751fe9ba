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
    """The settings of one move that every step of it reads (validated, as ``DataMover`` holds them)."""

    @property
    def source_catalog(self) -> Catalog:
        """The catalog holding the source table."""
        ...

    @property
    def target_catalog(self) -> Catalog:
        """The target's catalog (the source's when none was given)."""
        ...

    @property
    def source_table(self) -> Table | None:
        """The source table when it was given loaded (refreshed before use), else ``None``."""
        ...

    @property
    def source(self) -> str:
        """The source table's identifier, ``namespace.table``."""
        ...

    @property
    def target(self) -> str:
        """The target table's identifier, ``namespace.table``."""
        ...

    @property
    def where(self) -> BooleanExpression:
        """The rows to move (``AlwaysTrue()`` for every row), on source columns."""
        ...

    @property
    def where_text(self) -> str | None:
        """The filter as it was given, for messages (``None`` for every row)."""
        ...

    @property
    def columns(self) -> list[str] | None:
        """The source columns to move (``None`` for all)."""
        ...

    @property
    def rename(self) -> dict[str, str]:
        """``{source_column: target_column}`` for the columns whose names differ."""
        ...

    @property
    def create_target(self) -> bool:
        """Whether a missing target may be created from the source's schema, spec and sort order."""
        ...

    @property
    def mode(self) -> str:
        """``append``, ``overwrite`` or ``incremental``."""
        ...

    @property
    def move_id(self) -> str:
        """The move's name: its state and files in the target are keyed by it."""
        ...

    @property
    def branch(self) -> str:
        """The branch units commit to: ``main``, or an overwrite's staging branch."""
        ...

    @property
    def definition(self) -> str:
        """The fingerprint of the target, filter, columns, renames and mode, recorded in the move's state."""
        ...

    @property
    def source_snapshot_id(self) -> int | None:
        """The source snapshot asked for when the move starts (``None``: the current one)."""
        ...

    @property
    def commit_every_bytes(self) -> int:
        """Source bytes per unit, for a move that starts now."""
        ...

    @property
    def verify_method(self) -> str | None:
        """The verification asked for (``count``, ``checksum``, ``sample``), or ``None``."""
        ...

    @property
    def sample_size(self) -> int:
        """Rows compared by the ``sample`` verification."""
        ...
