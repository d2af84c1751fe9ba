"""What defines a move, as the steps of a move read it: tables, filter, columns, mode and identity.

Resolution, the run of units and verification take this view instead of
:class:`~iceberg_ops_provider.data_migration.mover.DataMover`, which satisfies it structurally.
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

    ``source_table`` is the source when it was given loaded (refreshed before use); ``where`` is
    ``AlwaysTrue()`` for every row and ``where_text`` the filter as given, for messages; ``branch`` is
    ``main`` or an overwrite's staging branch; ``definition`` fingerprints the target, filter, columns,
    renames and mode; ``commit_every_bytes`` is the unit size for a move that starts now.
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
