"""What a multi-table commit is made of and what it returns, shared by the dispatch and its backends."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Literal

from pyiceberg.table import CreateTableTransaction
from pyiceberg.table.update import AssertCreate, AssertTableUUID

from iceberg_ops_provider.errors import InvalidOperationError

if TYPE_CHECKING:
    from pyiceberg.table import Transaction
    from pyiceberg.table.metadata import TableMetadata
    from pyiceberg.table.update import TableRequirement, TableUpdate

__all__ = ["AtomicCommitResult", "CommitMode", "Identifier", "TableChange"]

CommitMode = Literal["rest-transaction", "sql-transaction", "per-table"]
"""How a catalog commits changes to several tables: one REST ``transactions/commit`` request, one database
transaction of a SQL catalog, or (``per-table``) one commit per table."""

Identifier = tuple[str, ...]
"""A table's full identifier: its namespace parts, then its name."""


@dataclass(frozen=True)
class TableChange:
    """The staged change of one table: PyIceberg's updates and the requirements they are checked against.

    Build one from a PyIceberg transaction with :meth:`of`, or give the parts. A change requiring
    :class:`~pyiceberg.table.update.AssertCreate` creates the table. ``transaction``, the one the
    change came from, is settled after the commit as PyIceberg's ``commit_transaction`` leaves it.
    """

    identifier: Identifier
    updates: tuple[TableUpdate, ...]
    requirements: tuple[TableRequirement, ...] = ()
    transaction: Transaction | None = field(default=None, compare=False, repr=False)

    @classmethod
    def of(cls, transaction: Transaction) -> TableChange:
        """The change a PyIceberg transaction (or create-table transaction) holds, with its table's UUID asserted.

        Raises:
            InvalidOperationError: The transaction already failed to commit once.
        """
        if getattr(transaction, "_failed", False):
            raise InvalidOperationError(
                f"The transaction of {'.'.join(transaction._table.name())} failed to commit and cannot be reused."
            )
        identifier = tuple(transaction._table.name())
        if isinstance(transaction, CreateTableTransaction):
            return cls(identifier, tuple(transaction._updates), (AssertCreate(),), transaction)
        requirements = tuple(transaction._requirements)
        if not any(isinstance(requirement, AssertTableUUID) for requirement in requirements):
            requirements += (AssertTableUUID(uuid=transaction._table.metadata.table_uuid),)  # it never changes
        return cls(identifier, tuple(transaction._updates), requirements, transaction)

    @property
    def creates(self) -> bool:
        """Whether this change creates the table (it asserts that the table does not exist)."""
        return any(isinstance(requirement, AssertCreate) for requirement in self.requirements)

    def label(self) -> str:
        """The table's dotted name."""
        return ".".join(self.identifier)


@dataclass(frozen=True)
class AtomicCommitResult:
    """What :func:`~iceberg_ops_provider.core.atomic.commit.commit_atomically` did, to the ``tables`` in order.

    ``metadata`` (and ``metadata_locations``) of each committed table where the catalog returned it (SQL,
    not REST); ``reason``: why nothing was committed, when :attr:`applied` is false.
    """

    mode: CommitMode
    tables: tuple[str, ...] = ()
    metadata: dict[str, TableMetadata] = field(default_factory=dict, repr=False)
    metadata_locations: dict[str, str] = field(default_factory=dict)
    reason: str = ""

    @property
    def applied(self) -> bool:
        """Whether the changes were committed (false: the catalog cannot commit them together; nothing was)."""
        return self.mode != "per-table"
