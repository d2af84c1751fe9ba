"""A PyIceberg transaction that computes its table metadata once per change, not once per look.

The result is kept until the staged updates or the table's metadata change (docs/core.md, Transactions).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from pyiceberg.table import Transaction

if TYPE_CHECKING:
    from pyiceberg.table import Table
    from pyiceberg.table.metadata import TableMetadata

__all__ = ["CachedMetadataTransaction", "cached_transaction"]


class CachedMetadataTransaction(Transaction):
    """A :class:`~pyiceberg.table.Transaction` whose ``table_metadata`` is computed once per state."""

    # The metadata and the updates tuple it was computed from: both are replaced, never changed, so
    # identity tells a new state (holding them here also keeps their ids from being reused).
    _cached: tuple[Any, tuple[Any, ...], TableMetadata] | None = None

    @property
    def table_metadata(self) -> TableMetadata:
        """The table's metadata with the staged updates applied (computed again only when either changes)."""
        base, staged, cached = self._table.metadata, self._updates, self._cached
        if not staged:  # nothing applied yet (a snapshot producer starting): the table's own metadata, not a copy
            return base
        if cached is None or cached[0] is not base or cached[1] is not staged:
            self._cached = cached = (base, staged, super().table_metadata)
        return cached[2]


def cached_transaction(table: Table) -> CachedMetadataTransaction:
    """A new transaction on ``table``: ``table.transaction()``, its metadata computed once per state."""
    return CachedMetadataTransaction(table)
