"""MigrationContext: what a migration's ``upgrade()``/``downgrade()`` uses to change tables.

Changes to one table are staged in one PyIceberg transaction and reach the catalog as one atomic
commit when the migration returns (:meth:`MigrationContext.finish`, called by the runner). If the
migration raises, staged changes are discarded, so a failed migration leaves its tables as they were.
Catalog-level operations (``drop_table``, ``rename_table``) are staged in order with the rest;
:meth:`MigrationContext.load_table` and :meth:`MigrationContext.commit` first commit what is pending.
Namespaces that a new table needs are created when that table is committed, never while staging.

What is staged, and how it is committed (announced to the run's :class:`CommitJournal`, each table's
commit carrying a receipt, or all of a finished migration's table changes in one commit with its
history record where the runner's :class:`AtomicCommitJournal` can), lives in
:mod:`~iceberg_ops_provider.migration.commit_queue`; pending schema changes in
:mod:`~iceberg_ops_provider.migration.schema_changes`.

Bare table names resolve in the runner's namespace; a dotted name (``"finance.orders"``) addresses
another namespace. Nested columns are given as dotted paths (``"address.city"``) or tuples.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import TYPE_CHECKING, Any

import pyarrow as pa
from pyiceberg.exceptions import NoSuchTableError
from pyiceberg.schema import Schema
from pyiceberg.table.refs import MAIN_BRANCH
from pyiceberg.table.sorting import UNSORTED_SORT_ORDER, SortDirection
from pyiceberg.table.update import (
    AddSortOrderUpdate,
    AssertDefaultSortOrderId,
    AssertRefSnapshotId,
    SetDefaultSortOrderUpdate,
)
from pyiceberg.types import IcebergType, NestedField

from iceberg_ops_provider.core.catalog import to_property_value
from iceberg_ops_provider.core.evolution import check_promotion
from iceberg_ops_provider.core.type_strings import to_iceberg_type
from iceberg_ops_provider.core.types import arrow_to_iceberg_schema
from iceberg_ops_provider.errors import DryRunLimit, InvalidOperationError
from iceberg_ops_provider.migration.commit_queue import (
    AtomicCommitJournal,
    CommitJournal,
    CommitQueue,
    placeholder_create,
)
from iceberg_ops_provider.migration.schema_changes import ColumnPath, SchemaChanges, refusal
from iceberg_ops_provider.migration.schema_changes import dotted as _text
from iceberg_ops_provider.migration.touched import TouchedTables, current_recording
from iceberg_ops_provider.migration.transforms import parse_partition_expr, parse_sort_field

if TYPE_CHECKING:
    from pyiceberg.catalog import Catalog
    from pyiceberg.table import Table, Transaction
    from pyiceberg.table.update.schema import UpdateSchema
    from pyiceberg.table.update.spec import UpdateSpec

__all__ = ["AtomicCommitJournal", "ColumnPath", "CommitJournal", "DryRunLimit", "MigrationContext", "TypeLike"]

TypeLike = str | pa.DataType | IcebergType
"""A column type: text (``"decimal(12,2)"``), an Arrow type or a PyIceberg type."""

Identifier = tuple[str, ...]


def _path(column: ColumnPath) -> str | tuple[str, ...]:
    if isinstance(column, tuple):
        return column
    if not isinstance(column, str) or not column:
        raise InvalidOperationError(f"A column must be a non-empty name or tuple path, got {column!r}.")
    return tuple(column.split(".")) if "." in column else column


def _nested_ids(field_type: IcebergType) -> set[int]:
    """The field ids inside a struct, list or map type (a dropped parent drops them too)."""
    ids: set[int] = set()
    for child in getattr(field_type, "fields", ()) or ():
        ids |= {child.field_id, *_nested_ids(child.field_type)}
    for attribute in ("element_field", "key_field", "value_field"):
        child = getattr(field_type, attribute, None)
        if child is not None:
            ids |= {child.field_id, *_nested_ids(child.field_type)}
    return ids


class MigrationContext:
    """The per-migration API over one catalog and namespace.

    It creates, drops and renames tables and evolves schemas, partition specs, sort orders and
    properties.

    Args:
        catalog: The catalog to migrate.
        namespace: The namespace bare table names resolve in (``"sales"`` or ``"a.b"``).
        journal: Told before every commit (the runner passes one; standalone use needs none).
        meta_namespace: Where migration history and locks live: a migration may not touch it.
        dry_run: Stage and record what the migration asks for, but commit nothing (``plan``); reaching
            tables directly (``load_table``, ``catalog``) stops a dry run with :class:`DryRunLimit`.
    """

    def __init__(
        self,
        catalog: Catalog,
        namespace: str,
        journal: CommitJournal | None = None,
        *,
        meta_namespace: str | None = None,
        dry_run: bool = False,
    ) -> None:
        self._catalog = catalog
        self._dry_run = dry_run
        self.operations: list[dict[str, str]] = []
        """What the migration asked for, in order, each with its risk (``safe``, ``review``, ``destructive``)."""
        self._namespace = namespace
        self._meta_namespace = meta_namespace
        self._direct: set[str] = set()
        self._schemas = SchemaChanges()
        self.touched: TouchedTables = current_recording() or TouchedTables()
        """The net change of every table this migration reached (the runner's recording, when one is open)."""
        self._commits = CommitQueue(catalog, journal, self.touched, dry_run=dry_run, fold=self._schemas.fold)

    @property
    def committed(self) -> list[str]:
        """Tables whose changes already reached the catalog (commits and immediate operations), in order."""
        return self._commits.committed

    @property
    def created_namespaces(self) -> list[str]:
        """Namespaces created by this migration's commits."""
        return self._commits.created_namespaces

    @property
    def separate_commits(self) -> list[str]:
        """What reached the catalog one commit at a time, in order, then the namespaces created.

        With a journal that commits a finished migration's table changes all at once, these are what
        fell outside that commit (drops, renames, and so on); otherwise every commit of the migration.
        """
        return [*self._commits.separate, *(f"create namespace {name}" for name in self.created_namespaces)]

    @property
    def not_atomic_reason(self) -> str | None:
        """Why this migration's changes went table by table although the journal could commit them at once."""
        return self._commits.not_atomic

    # -- what a migration can read --------------------------------------------------------------

    @property
    def catalog(self) -> Catalog:
        """The PyIceberg catalog, for anything the context does not cover.

        What a migration changes through it is its own affair: the runner cannot see those changes,
        so a migration that used it and was interrupted is reported as possibly partial, not retried.
        """
        self._mark_direct("the catalog (ctx.catalog)")
        return self._catalog

    @property
    def namespace(self) -> str:
        """The runner's namespace."""
        return self._namespace

    def identifier(self, name: str) -> Identifier:
        """The full identifier of a table name: bare names resolve in :attr:`namespace`.

        Raises:
            InvalidOperationError: A malformed name, or a table of the meta-namespace (history and locks).
        """
        parts = tuple(name.split(".")) if isinstance(name, str) else ()
        if not parts or any(not part or part != part.strip() for part in parts):
            raise InvalidOperationError(f"Table name {name!r} is not valid; use 'orders' or 'other_namespace.orders'.")
        identifier = (*self._namespace.split("."), name) if len(parts) == 1 else parts
        meta = self._meta_namespace
        if meta is not None and (".".join(identifier[:-1]) + ".").startswith(meta + "."):
            raise InvalidOperationError(
                f"Table {'.'.join(identifier)} is in the meta-namespace {meta!r}, where iceberg-ops keeps the "
                "migration history and locks of every namespace; migrations cannot change it."
            )
        return identifier

    def _label(self, identifier: Identifier) -> str:
        return ".".join(identifier)

    def load_table(self, name: str) -> Table:
        """Load a table to read it or write data to it, after committing everything staged so far.

        Data written through the returned table (appends, overwrites, deletes) is the migration's own
        commit: the runner cannot see it, so a migration interrupted after calling this is reported
        as possibly partial rather than retried (see the recovery documentation).

        Raises:
            InvalidOperationError: The table does not exist.
        """
        identifier = self.identifier(name)
        self._mark_direct(self._label(identifier))
        self._commits.commit(complete=False, why=f"ctx.load_table({name!r})")
        try:
            table = self._catalog.load_table(identifier)
        except NoSuchTableError as exc:
            raise InvalidOperationError(f"Table {self._label(identifier)} does not exist.") from exc
        self.touched.written(self._label(identifier))
        return table

    def _note_op(self, description: str, risk: str) -> None:
        self.operations.append({"operation": description, "risk": risk})

    def _drop_risk(self, name: str) -> str:
        """``destructive`` when the table holds rows now (a drop loses them for readers), else ``review``."""
        try:
            snapshot = self._catalog.load_table(self.identifier(name)).current_snapshot()
        except (NoSuchTableError, InvalidOperationError):
            return "review"
        records = int(snapshot.summary.get("total-records", "0")) if snapshot and snapshot.summary else 0
        return "destructive" if records else "review"

    def _mark_direct(self, what: str) -> None:
        """Note in the intent that the migration reached the catalog directly (its writes are not tracked)."""
        if self._dry_run:
            raise DryRunLimit(f"it reaches {what} directly, so a dry run stops there")
        if what not in self._direct:
            self._direct.add(what)
            self._commits.reached_directly(what)

    # -- staging and committing -----------------------------------------------------------------

    @property
    def has_pending_changes(self) -> bool:
        """Whether anything is staged and not yet committed."""
        return bool(self._commits)

    def commit(self) -> None:
        """Commit everything staged so far, in the order it was staged (one atomic commit per table).

        The runner commits what is left when the migration returns; call this only to make changes
        visible to code later in the same migration.
        """
        self._commits.commit(complete=False, why="ctx.commit()")

    def finish(self) -> None:
        """Commit what the migration staged, once it has returned (called by the runner, not by migrations)."""
        self._commits.commit(complete=True)

    def discard(self) -> None:
        """Forget everything staged and not yet committed."""
        self._commits.discard()
        self._schemas.clear()

    def _transaction(self, name: str) -> tuple[Identifier, Transaction]:
        identifier = self.identifier(name)
        commits = self._commits
        if identifier in commits.gone:
            raise InvalidOperationError(
                f"Table {self._label(identifier)} is dropped or renamed earlier in this migration; "
                "use its new name, or create it again first."
            )
        if identifier in commits.rename_targets and identifier not in commits.pending:
            # the rename must happen before the table can be changed
            commits.commit(complete=False, why=f"a change to {self._label(identifier)} after renaming it")
        if identifier not in commits.pending:
            try:
                table = self._catalog.load_table(identifier)
            except NoSuchTableError as exc:
                raise InvalidOperationError(
                    f"Table {self._label(identifier)} does not exist; create it first (ctx.create_table) "
                    "or check the name and namespace."
                ) from exc
            commits.stage_table(identifier, table.transaction())
        return identifier, commits.pending[identifier]

    def _staged(self, name: str, what: str, build: Callable[[Transaction], object]) -> None:
        """Run ``build`` against the table's transaction, turning PyIceberg's refusals into clear errors."""
        identifier, transaction = self._transaction(name)
        self._schemas.fold(identifier)  # later changes (a partition on a new column) see the new schema
        try:
            build(transaction)
        except (ValueError, KeyError, NotImplementedError) as exc:
            raise refusal(what, identifier, exc) from exc

    def _schema_change(
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
        identifier, transaction = self._transaction(table)
        self._schemas.stage(
            identifier, transaction, what, change, allow_incompatible=allow_incompatible, refs=refs, anchors=anchors
        )

    def _schema(self, identifier: Identifier, transaction: Transaction) -> Schema:
        """The table's schema including changes staged in this migration."""
        return self._schemas.schema(identifier, transaction)

    def _spec_change(self, table: str, what: str, change: Callable[[UpdateSpec], object]) -> None:
        def build(transaction: Transaction) -> None:
            with transaction.update_spec() as update:
                change(update)

        self._staged(table, what, build)

    # -- tables ---------------------------------------------------------------------------------

    def create_table(
        self,
        name: str,
        schema: pa.Schema | Schema,
        partition_by: Iterable[str] | None = None,
        sort_by: Iterable[str] | None = None,
        properties: Mapping[str, Any] | None = None,
        if_not_exists: bool = False,
    ) -> None:
        """Create a table (and its namespace if missing), with its spec, sort order and properties.

        The table is staged and created when the migration commits, with its final schema, spec,
        sort order and properties (changes staged on it later in the same migration included), so
        it starts with one of each. Its namespace, if missing, is created then too.

        Args:
            name: Table name, bare or dotted.
            schema: An Arrow schema (non-nullable fields become required) or a PyIceberg ``Schema``.
            partition_by: Partition expressions, e.g. ``["day(ts)", "bucket(16, id)"]``.
            sort_by: Sort fields, e.g. ``["ts desc", "id"]``.
            properties: Table properties (strings, numbers or booleans).
            if_not_exists: Do nothing when the table already exists (for re-runnable migrations).

        Raises:
            InvalidOperationError: The table exists (unless ``if_not_exists``), or a partition/sort
                expression is invalid.
            UnsupportedTypeError: An Arrow column type Iceberg cannot hold.
        """
        self._note_op(f"create table {name}", "safe")
        identifier = self.identifier(name)
        commits = self._commits
        if identifier in commits.created:
            if if_not_exists:
                return
            raise InvalidOperationError(f"Cannot create table {self._label(identifier)}: this migration creates it.")
        if identifier not in commits.gone and (
            identifier in commits.pending
            or identifier in commits.rename_targets
            or self._catalog.table_exists(identifier)
        ):
            if if_not_exists:
                return
            raise InvalidOperationError(f"Cannot create table {self._label(identifier)}: it already exists.")
        if isinstance(schema, pa.Schema):
            iceberg_schema = arrow_to_iceberg_schema(schema)
        elif isinstance(schema, Schema):
            iceberg_schema = schema
        else:
            raise InvalidOperationError(
                f"The schema of {self._label(identifier)} must be a pyarrow.Schema or a pyiceberg Schema, "
                f"got {type(schema).__name__}."
            )
        values = {
            key: to_property_value(key, value, f"table {self._label(identifier)}")
            for key, value in (properties or {}).items()
        }
        commits.stage_table(
            identifier, placeholder_create(self._catalog, identifier, iceberg_schema, values), create=True
        )
        try:
            if partition_by:
                self.add_partition_fields(name, [partition_by] if isinstance(partition_by, str) else list(partition_by))
            if sort_by:
                self.set_sort_order(name, [sort_by] if isinstance(sort_by, str) else list(sort_by))
        except BaseException:
            self._forget(identifier)
            raise

    def _forget(self, identifier: Identifier) -> None:
        """Drop what is staged for one table (its queued transaction and schema changes)."""
        self._commits.forget(identifier)
        self._schemas.forget(identifier)

    def drop_table(self, name: str, purge: bool = False, if_exists: bool = False) -> None:
        """Drop a table; with ``purge=True`` also delete its data and metadata files.

        Args:
            name: Table name, bare or dotted.
            purge: Also delete the table's files.
            if_exists: Do nothing when the table does not exist (for re-runnable migrations).

        Raises:
            InvalidOperationError: The table does not exist (unless ``if_exists``).
        """
        self._note_op(f"drop table {name}", self._drop_risk(name))
        identifier = self.identifier(name)
        commits = self._commits
        if identifier in commits.created:
            # Created earlier in this migration and never committed: nothing reaches the catalog.
            self._forget(identifier)
            commits.gone.add(identifier)
            return
        exists = identifier in commits.rename_targets or (
            identifier not in commits.gone and self._catalog.table_exists(identifier)
        )
        if not exists:
            if if_exists:
                return
            raise InvalidOperationError(f"Cannot drop table {self._label(identifier)}: it does not exist.")
        self._schemas.forget(identifier)  # changes staged on a table about to be dropped are moot
        commits.stage_drop(identifier, purge=purge)

    def rename_table(self, old: str, new: str) -> None:
        """Rename a table, or move it to another namespace (created if missing).

        The rename is staged like other changes; later changes to the table under its new name first
        commit what is staged so far.

        Raises:
            InvalidOperationError: The table does not exist or the new name is taken.
        """
        self._note_op(f"rename table {old} to {new}", "review")
        source, target = self.identifier(old), self.identifier(new)
        commits = self._commits
        target_taken = target not in commits.gone and (
            target in commits.pending or target in commits.rename_targets or self._catalog.table_exists(target)
        )
        if target_taken:
            raise InvalidOperationError(f"Cannot rename {self._label(source)} to {self._label(target)}: it exists.")
        if source in commits.created:  # not in the catalog yet: it is simply created under the new name
            commits.rename_created(source, target)
            self._schemas.rename(source, target)
            return
        exists = source in commits.rename_targets or (source not in commits.gone and self._catalog.table_exists(source))
        if not exists:
            raise InvalidOperationError(f"Cannot rename table {self._label(source)}: it does not exist.")
        commits.stage_rename(source, target)

    # -- columns --------------------------------------------------------------------------------

    def add_column(
        self,
        table: str,
        name: ColumnPath,
        type: TypeLike,
        required: bool = False,
        doc: str | None = None,
        after: ColumnPath | None = None,
        before: ColumnPath | None = None,
        first: bool = False,
        if_not_exists: bool = False,
    ) -> None:
        """Add a column, optionally placed first, or before/after another column.

        A required column can only be added to a table with no rows (existing rows would have no value).
        With ``if_not_exists=True`` an existing column of that name is left as it is.

        Raises:
            InvalidOperationError: The column exists (unless ``if_not_exists``), the position is
                ambiguous, or a required column is added to a table that has rows.
        """
        self._note_op(f"add column {table}.{_text(name)}", "review" if required else "safe")
        if sum([first, after is not None, before is not None]) > 1:
            raise InvalidOperationError("Give at most one of first=True, after= and before= for add_column.")
        if if_not_exists and self._has_column(table, name):
            return
        field_type = to_iceberg_type(type, _text(name))
        if required:
            self._require_empty(table, f"add required column {_text(name)!r}")
        path = _path(name)

        def change(update: UpdateSchema) -> None:
            update.add_column(path, field_type, doc=doc, required=required)
            self._place(update, path, first=first, after=after, before=before)

        parents = [_text(name).rsplit(".", 1)[0]] if "." in _text(name) else []
        self._schema_change(
            table,
            f"add column {_text(name)!r}",
            change,
            allow_incompatible=required,
            refs=parents,
            anchors=[ref for ref in (after, before) if ref is not None],
        )

    def _require_empty(self, table: str, what: str) -> None:
        """Refuse ``what`` unless the table has no rows, and make the commit require that it still has none.

        The commit asserts the main branch is still at the snapshot checked here (or still absent), so
        rows another writer appends meanwhile make the catalog refuse the whole commit instead of
        leaving rows without a value in a required column.
        """
        identifier, transaction = self._transaction(table)
        snapshot = transaction.table_metadata.current_snapshot()
        records = int(snapshot.summary.get("total-records", "0")) if snapshot and snapshot.summary else 0
        if records:
            raise InvalidOperationError(
                f"Cannot {what} to table {self._label(identifier)}: it has {records} row(s), which would have "
                "no value. Add the column as optional, backfill it, and keep it optional (Iceberg cannot make "
                "an optional column required)."
            )
        if identifier in self._commits.created:
            return  # created by this migration: nobody else can have written to it
        checked = AssertRefSnapshotId(ref=MAIN_BRANCH, snapshot_id=snapshot.snapshot_id if snapshot else None)
        transaction._stage((), (checked,))

    @staticmethod
    def _place(
        update: UpdateSchema, path: Any, *, first: bool, after: ColumnPath | None, before: ColumnPath | None
    ) -> None:
        if first:
            update.move_first(path)
        elif after is not None:
            update.move_after(path, _path(after))
        elif before is not None:
            update.move_before(path, _path(before))

    def _has_column(self, table: str, name: ColumnPath) -> bool:
        identifier, transaction = self._transaction(table)
        try:
            self._schema(identifier, transaction).find_field(_text(name))
        except ValueError:
            return False
        return True

    def drop_column(self, table: str, name: ColumnPath, if_exists: bool = False) -> None:
        """Drop a column (its data stays in old files and snapshots; it is no longer read).

        With ``if_exists=True`` a missing column is not an error.
        """
        self._note_op(f"drop column {table}.{_text(name)}", self._drop_risk(table))
        if if_exists and not self._has_column(table, name):
            return
        self._check_droppable(table, name)
        path = _path(name)
        self._schema_change(
            table, f"drop column {_text(name)!r}", lambda update: update.delete_column(path), refs=[name]
        )

    def _check_droppable(self, table: str, name: ColumnPath) -> None:
        """Refuse, naming the fix, to drop a column the partition spec, sort order or row key still uses."""
        identifier, transaction = self._transaction(table)
        schema = self._schema(identifier, transaction)
        try:
            field = schema.find_field(_text(name))
        except ValueError:
            return  # the schema update names the missing column itself
        ids = {field.field_id, *(_nested_ids(field.field_type))}
        label, column = self._label(identifier), _text(name)
        metadata = transaction.table_metadata
        for partition in metadata.spec().fields:
            if partition.source_id in ids:
                raise InvalidOperationError(
                    f"Cannot drop column {column!r} of table {label}: partition field {partition.name!r} "
                    f"({partition.transform}) uses it. Drop the partition field first, in the same migration: "
                    f"ctx.drop_partition_field({table!r}, {partition.name!r})."
                )
        for sort in metadata.sort_order().fields:
            if sort.source_id in ids:
                raise InvalidOperationError(
                    f"Cannot drop column {column!r} of table {label}: the table's sort order uses it. Set a sort "
                    f"order without it first, in the same migration: ctx.set_sort_order({table!r}, [...])."
                )
        if ids & set(schema.identifier_field_ids):
            kept = [n for n in schema.identifier_field_names() if schema.find_field(n).field_id not in ids]
            raise InvalidOperationError(
                f"Cannot drop column {column!r} of table {label}: it is one of the table's identifier fields (its "
                f"row key). Set the identifier fields without it first, in the same migration: "
                f"ctx.set_identifier_fields({', '.join(repr(x) for x in [table, *sorted(kept)])})."
            )

    def rename_column(self, table: str, old: ColumnPath, new: str) -> None:
        """Rename a column; ``new`` is the new last name (the column stays where it is)."""
        self._note_op(f"rename column {table}.{_text(old)} to {new}", "review")
        path = _path(old)
        self._schema_change(
            table, f"rename column {_text(old)!r}", lambda update: update.rename_column(path, new), refs=[old]
        )

    def alter_column(
        self,
        table: str,
        name: ColumnPath,
        type: TypeLike | None = None,
        doc: str | None = None,
        required: bool | None = None,
    ) -> None:
        """Change a column's type (only the promotions Iceberg allows), doc, or make it optional.

        Raises:
            ForbiddenPromotionError: A type change Iceberg does not allow.
            InvalidOperationError: ``required=True`` on an optional column, or nothing to change.
        """
        self._note_op(f"alter column {table}.{_text(name)}", "review")
        if type is None and doc is None and required is None:
            raise InvalidOperationError(f"alter_column({table!r}, {_text(name)!r}) needs type=, doc= or required=.")
        path = _path(name)
        _, transaction = self._transaction(table)
        current = self._field(table, transaction, name)
        new_type = to_iceberg_type(type, _text(name)) if type is not None else None
        if new_type is not None:
            check_promotion(_text(name), current.field_type, new_type)
        if required and not current.required:
            raise InvalidOperationError(
                f"Cannot make column {_text(name)!r} of {table!r} required: existing rows may hold nulls and the "
                "Iceberg specification does not allow optional -> required."
            )

        def change(update: UpdateSchema) -> None:
            if new_type is not None and new_type != current.field_type:
                update.update_column(path, field_type=new_type)
            if doc is not None:
                update.update_column(path, doc=doc)
            if required is False and current.required:
                update.make_column_optional(path)

        self._schema_change(table, f"alter column {_text(name)!r}", change, refs=[name])

    def _field(self, table: str, transaction: Transaction, name: ColumnPath) -> NestedField:
        dotted = _text(name)
        schema = self._schema(self.identifier(table), transaction)
        try:
            return schema.find_field(dotted)
        except ValueError as exc:
            columns = ", ".join(schema.column_names)
            raise InvalidOperationError(
                f"Table {table!r} has no column {dotted!r}; its columns are {columns}."
            ) from exc

    def move_column(
        self,
        table: str,
        name: ColumnPath,
        first: bool = False,
        before: ColumnPath | None = None,
        after: ColumnPath | None = None,
    ) -> None:
        """Move a column first, or before/after another column (exactly one of them)."""
        self._note_op(f"move column {table}.{_text(name)}", "safe")
        if sum([first, after is not None, before is not None]) != 1:
            raise InvalidOperationError("move_column needs exactly one of first=True, after= or before=.")
        path = _path(name)

        self._schema_change(
            table,
            f"move column {_text(name)!r}",
            lambda update: self._place(update, path, first=first, after=after, before=before),
            anchors=[ref for ref in (name, after, before) if ref is not None],
        )

    def set_identifier_fields(self, table: str, *names: str) -> None:
        """Set the table's identifier fields (the row key; the columns must be required). No names clears them."""
        self._note_op(f"set identifier fields of {table}", "review")
        self._schema_change(
            table, "set identifier fields", lambda update: update.set_identifier_fields(*names), refs=list(names)
        )

    # -- partition spec and sort order ----------------------------------------------------------

    def add_partition_field(self, table: str, expr: str, name: str | None = None) -> None:
        """Add a partition field, e.g. ``"day(ts)"`` or ``"bucket(16, id)"`` (existing files keep their spec)."""
        self._note_op(f"partition {table} by {expr}", "review")
        parsed = parse_partition_expr(expr)
        self._spec_change(
            table,
            f"add partition field {expr!r}",
            lambda update: update.add_field(parsed.column, parsed.transform, name),
        )

    def add_partition_fields(self, table: str, exprs: Iterable[str]) -> None:
        """Add several partition fields in one spec change."""
        parsed = [parse_partition_expr(expr) for expr in exprs]

        def change(update: UpdateSpec) -> None:
            for item in parsed:
                update.add_field(item.column, item.transform, None)

        self._spec_change(table, "add partition fields", change)

    def drop_partition_field(self, table: str, name: str) -> None:
        """Remove a partition field by its name (see ``table.spec()``)."""
        self._note_op(f"drop partition field {table}.{name}", "review")
        self._spec_change(table, f"drop partition field {name!r}", lambda update: update.remove_field(name))

    def rename_partition_field(self, table: str, old: str, new: str) -> None:
        """Rename a partition field."""
        self._note_op(f"rename partition field {table}.{old}", "review")
        self._spec_change(table, f"rename partition field {old!r}", lambda update: update.rename_field(old, new))

    def set_sort_order(self, table: str, fields: Iterable[str] | str) -> None:
        """Replace the table's sort order; an empty list makes it unsorted.

        Args:
            table: Table name.
            fields: Sort fields such as ``["ts desc", "day(ts) asc nulls last", "id"]``.
        """
        self._note_op(f"set the sort order of {table}", "review")
        parsed = [parse_sort_field(fields)] if isinstance(fields, str) else [parse_sort_field(f) for f in fields]

        def build(transaction: Transaction) -> None:
            metadata = transaction.table_metadata
            if not parsed and metadata.sort_order_by_id(UNSORTED_SORT_ORDER.order_id) is None:
                # A table created sorted has no unsorted order yet, and PyIceberg 0.12 cannot add one
                # through update_sort_order(): add it and make it the default explicitly.
                transaction._apply(
                    (
                        AddSortOrderUpdate(sort_order=UNSORTED_SORT_ORDER),
                        SetDefaultSortOrderUpdate(sort_order_id=UNSORTED_SORT_ORDER.order_id),
                    ),
                    (AssertDefaultSortOrderId(default_sort_order_id=metadata.default_sort_order_id),),
                )
                return
            with transaction.update_sort_order() as update:
                for item in parsed:
                    add = update.asc if item.direction == SortDirection.ASC else update.desc
                    add(item.column, item.transform, item.null_order)

        self._staged(table, "set the sort order", build)

    # -- properties -----------------------------------------------------------------------------

    def set_properties(self, table: str, properties: Mapping[str, Any] | None = None, /, **props: Any) -> None:
        """Set table properties, as keywords or (for dotted keys) a mapping.

        Example:
            ``ctx.set_properties("orders", {"write.target-file-size-bytes": 134217728}, owner="sales")``
        """
        self._note_op(f"set properties of {table}", "safe")
        merged = {**(properties or {}), **props}
        if not merged:
            raise InvalidOperationError("set_properties needs at least one property.")
        values = {key: to_property_value(key, value, f"table {table!r}") for key, value in merged.items()}
        self._staged(table, "set properties", lambda transaction: transaction.set_properties(values))

    def remove_properties(self, table: str, *keys: str) -> None:
        """Remove table properties.

        Raises:
            InvalidOperationError: A key is not set on the table.
        """
        self._note_op(f"remove properties of {table}", "safe")
        identifier, transaction = self._transaction(table)
        missing = [key for key in keys if key not in transaction.table_metadata.properties]
        if missing:
            raise InvalidOperationError(f"Cannot remove properties {missing} from {self._label(identifier)}: not set.")
        self._staged(table, "remove properties", lambda transaction: transaction.remove_properties(*keys))
