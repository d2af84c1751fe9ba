"""How a migration's operations reach what is staged for each table: transactions, schema changes, risks."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any

from pyiceberg.exceptions import NoSuchTableError
from pyiceberg.schema import index_by_name

from iceberg_ops_provider.core.name_hints import did_you_mean, missing_table
from iceberg_ops_provider.errors import DryRunLimit, InvalidOperationError
from iceberg_ops_provider.migration.commit_queue import CommitJournal, CommitQueue
from iceberg_ops_provider.migration.restore import rows_holding, total_records
from iceberg_ops_provider.migration.risks import Risk, drop_risk
from iceberg_ops_provider.migration.schema_changes import ColumnPath, SchemaChanges, refusal
from iceberg_ops_provider.migration.touched import TouchedTables, current_recording

if TYPE_CHECKING:
    from pyiceberg.catalog import Catalog
    from pyiceberg.partitioning import PartitionField, PartitionSpec
    from pyiceberg.table import Transaction
    from pyiceberg.table.metadata import TableMetadata
    from pyiceberg.table.update.schema import UpdateSchema
    from pyiceberg.table.update.spec import UpdateSpec

__all__ = ["Identifier", "TableStaging"]


def _fields_by_source(spec: PartitionSpec) -> dict[int, list[PartitionField]]:
    fields: dict[int, list[PartitionField]] = {}
    for field in spec.fields:
        fields.setdefault(field.source_id, []).append(field)
    return fields


def _two_fields_on_one_column(table: str, metadata: TableMetadata, source_id: int, fields: list[PartitionField]) -> str:
    """Why a spec with several partition fields on one column is refused, and what to write instead."""
    column = metadata.schema().find_column_name(source_id) or f"field id {source_id}"
    listed = ", ".join(f"{field.name}: {field.transform}" for field in fields)
    v1 = (
        " A table of format version 1 keeps a dropped partition field as a void field on the same column, so "
        "there the column cannot be partitioned again."
        if metadata.format_version == 1
        else ""
    )
    return (
        f"the partition spec would have {len(fields)} fields on column {column!r} ({listed}), and PyIceberg "
        "cannot write rows into such a table: every append, compaction and data move would fail. To change how "
        f"{column!r} is partitioned, drop the old field first in the same migration "
        f"(ctx.drop_partition_field({table!r}, {fields[0].name!r})), then add the new one.{v1}"
    )


Identifier = tuple[str, ...]
"""A table's full identifier: its namespace's parts, then its name."""


class TableStaging:
    """What one migration staged, and how its operations add to it (arguments: see ``MigrationContext``).

    It resolves table names (never of the meta-namespace), opens each table's transaction in the
    :class:`.CommitQueue`, turns PyIceberg's refusals into clear errors and records each operation's risk.
    """

    def __init__(
        self,
        catalog: Catalog,
        namespace: str,
        journal: CommitJournal | None,
        *,
        meta_namespace: str | None,
        dry_run: bool,
    ) -> None:
        self.catalog = catalog
        self.namespace = namespace
        self.meta_namespace = meta_namespace
        self.dry_run = dry_run
        self.operations: list[dict[str, Any]] = []
        self._direct: set[str] = set()
        self.schemas = SchemaChanges()
        self.touched: TouchedTables = current_recording() or TouchedTables()
        self.commits = CommitQueue(catalog, journal, self.touched, dry_run=dry_run, fold=self.schemas.fold)
        self.resuming = False
        """A migration resumed in its data steps: its schema changes committed before, only its data steps run."""
        self.restore_point: tuple[str, str, bool] | None = None
        """A dry run's restore point (tag, upgrade step-id prefix, whether this direction takes it), so a
        plan checks ``restore_data`` as a run would; a run's comes from its journal."""
        self.data: list[Any] = []  # DataOperation (which imports this module)
        """The data operations the migration asked for, in order (:mod:`.data_operations`)."""
        self.data_notes: list[dict[str, Any]] = []
        """The entry of :attr:`operations` of each of :attr:`data` (a dry run adds its estimate there)."""

    def identifier(self, name: str) -> Identifier:
        """The full identifier of a table name (see ``MigrationContext.identifier``)."""
        parts = tuple(name.split(".")) if isinstance(name, str) else ()
        if not parts or any(not part or part != part.strip() for part in parts):
            raise InvalidOperationError(f"Table name {name!r} is not valid; use 'orders' or 'other_namespace.orders'.")
        identifier = (*self.namespace.split("."), name) if len(parts) == 1 else parts
        meta = self.meta_namespace
        if meta is not None and (".".join(identifier[:-1]) + ".").startswith(meta + "."):
            raise InvalidOperationError(
                f"Table {'.'.join(identifier)} is in the meta-namespace {meta!r}, where iceberg-ops keeps the "
                "migration history and locks of every namespace; migrations cannot change it."
            )
        return identifier

    label = staticmethod(CommitQueue.label)

    def note(self, description: str, risk: Risk) -> None:
        """Record an operation the migration asked for, with its risk (see :mod:`.risks`)."""
        self.operations.append({"operation": description, "risk": risk})

    def drop_risk(self, kind: str, name: str, column: str | None = None) -> Risk:
        """The risk of a drop (``kind``) from table ``name``: the kind's when it holds rows now, else lower.

        With ``column``, also lower when every live row holds null in it (from the data files' column statistics).
        """
        try:
            table = self.catalog.load_table(self.identifier(name))
        except (NoSuchTableError, InvalidOperationError):
            return drop_risk(kind, holds_rows=False)
        records = total_records(table.current_snapshot())
        field_id = index_by_name(table.schema()).get(column) if records and column is not None else None
        if field_id is not None:  # a column with rows: do they hold any value of it?
            holding = rows_holding(table.metadata, table.io, table.schema().find_field(field_id))
            only_nulls = not holding.unknown and holding.nulls is not None and holding.nulls >= holding.with_data
            return drop_risk(kind, holds_rows=not only_nulls)
        return drop_risk(kind, holds_rows=bool(records))

    def mark_direct(self, what: str) -> None:
        """Note in the intent that the migration reached the catalog directly (a dry run stops there)."""
        if self.dry_run:
            raise DryRunLimit(f"it reaches {what} directly, so a dry run stops there")
        if what not in self._direct:
            self._direct.add(what)
            self.commits.reached_directly(what)

    def transaction(self, name: str) -> tuple[Identifier, Transaction]:
        """The table's identifier and the transaction its changes in this migration are staged in."""
        identifier = self.identifier(name)
        commits = self.commits
        if identifier in commits.gone:
            raise InvalidOperationError(
                f"Table {self.label(identifier)} is dropped or renamed earlier in this migration; "
                "use its new name, or create it again first."
            )
        if identifier in commits.rename_targets and identifier not in commits.pending:
            # the rename must happen before the table can be changed
            commits.commit(complete=False, why=f"a change to {self.label(identifier)} after renaming it")
        if identifier not in commits.pending:
            try:
                table = self.catalog.load_table(identifier)
            except NoSuchTableError as exc:
                guess = missing_table(self.catalog, self.label(identifier)).guess
                if guess is not None and "." not in name and guess.rpartition(".")[0] == self.namespace:
                    guess = guess.rpartition(".")[2]  # as the migration names its tables
                raise InvalidOperationError(
                    f"Table {self.label(identifier)} does not exist; create it first (ctx.create_table) "
                    "or check the name and namespace." + did_you_mean(guess)
                ) from exc
            commits.stage_table(identifier, table.transaction())
        return identifier, commits.pending[identifier]

    def staged(self, name: str, what: str, build: Callable[[Transaction], object]) -> None:
        """Stage a property, partition or sort-order change (``what``, for errors): run ``build`` on the transaction.

        While column changes are pending, ``build`` runs on the table as they leave it (see :mod:`.schema_changes`).
        """
        identifier, transaction = self.transaction(name)
        try:
            if self.schemas.defers(identifier):
                self.schemas.stage_deferred(identifier, transaction, build)
            else:
                build(transaction)
        except (ValueError, KeyError, NotImplementedError) as exc:
            raise refusal(what, identifier, exc) from exc

    def schema_change(
        self,
        table: str,
        what: str,
        change: Callable[[UpdateSchema], object],
        *,
        allow_incompatible: bool = False,
        refs: Iterable[ColumnPath] = (),
        anchors: Iterable[ColumnPath] = (),
    ) -> None:
        """Stage a schema change (see :meth:`SchemaChanges.stage`)."""
        identifier, transaction = self.transaction(table)
        self.schemas.stage(
            identifier, transaction, what, change, allow_incompatible=allow_incompatible, refs=refs, anchors=anchors
        )

    def spec_change(self, table: str, what: str, change: Callable[[UpdateSpec], object]) -> None:
        """Stage a partition spec change; a second partition field on a column is refused (PyIceberg can't write it)."""

        def build(transaction: Transaction) -> None:
            metadata = transaction.table_metadata
            before = _fields_by_source(metadata.spec())
            with transaction.update_spec() as update:
                change(update)
                after = _fields_by_source(update._apply())  # checked before the block commits it
                for source_id, fields in after.items():
                    if len(fields) > 1 and len(fields) > len(before.get(source_id, [])):
                        raise ValueError(_two_fields_on_one_column(table, metadata, source_id, fields))

        self.staged(table, what, build)

    def request_data(self, operation: Any) -> None:
        """Record a data operation: it runs once the migration's schema changes are committed."""
        for name in operation.tables():
            identifier = self.identifier(name)
            if identifier in self.commits.gone:
                raise InvalidOperationError(
                    f"Table {self.label(identifier)} is dropped or renamed earlier in this migration; a data "
                    "operation needs the tables it names, and runs after every schema change of the migration."
                )
        self.data.append(operation)
        self.data_notes.append(self.operations[-1] if self.operations else {})

    def forget(self, identifier: Identifier) -> None:
        """Drop what is staged for one table (its queued transaction and schema changes)."""
        self.commits.forget(identifier)
        self.schemas.forget(identifier)

    def discard(self) -> None:
        """Forget everything staged and not yet committed."""
        self.commits.discard()
        self.schemas.clear()
