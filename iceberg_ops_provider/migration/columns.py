"""The column operations of a migration: add, drop, rename, alter and move columns, set the row key.

:class:`ColumnOperations` is the part of
:class:`~iceberg_ops_provider.migration.context.MigrationContext` that changes a table's columns.
Each of its operations is staged as a schema change through the context's
:class:`~iceberg_ops_provider.migration.staging.TableStaging`, so that one migration's column changes
to a table make as few new schemas as they allow; the checks a column change needs first (the
column exists, a required column only on an empty table, a dropped column no longer used by the
partition spec, sort order or row key, only the type promotions Iceberg allows) live here with them.

Nested columns are given as dotted paths (``"address.city"``) or tuples.
"""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING, Any

import pyarrow as pa
from pyiceberg.table.refs import MAIN_BRANCH
from pyiceberg.table.update import AssertRefSnapshotId
from pyiceberg.types import IcebergType, NestedField

from iceberg_ops_provider.core.evolution import check_promotion
from iceberg_ops_provider.core.type_strings import to_iceberg_type
from iceberg_ops_provider.errors import InvalidOperationError
from iceberg_ops_provider.migration.restore import dropped_column, nested_ids, restoring, rows_holding
from iceberg_ops_provider.migration.risks import highest_risk, risk_of
from iceberg_ops_provider.migration.schema_changes import AddedColumn, ColumnPath
from iceberg_ops_provider.migration.schema_changes import dotted as _text

if TYPE_CHECKING:
    from pyiceberg.table import Transaction
    from pyiceberg.table.update.schema import UpdateSchema

    from iceberg_ops_provider.migration.staging import TableStaging

__all__ = ["ColumnOperations", "TypeLike"]

TypeLike = str | pa.DataType | IcebergType
"""A column type: text (``"decimal(12,2)"``), an Arrow type or a PyIceberg type."""


def _path(column: ColumnPath) -> str | tuple[str, ...]:
    if isinstance(column, tuple):
        return column
    if not isinstance(column, str) or not column:
        raise InvalidOperationError(f"A column must be a non-empty name or tuple path, got {column!r}.")
    return tuple(column.split(".")) if "." in column else column


class ColumnOperations:
    """The column operations of :class:`~iceberg_ops_provider.migration.context.MigrationContext`.

    A mixin: the class using it provides ``_staging``, the migration's :class:`TableStaging`.
    """

    _staging: TableStaging

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
        self._staging.note(
            f"add column {table}.{_text(name)}", risk_of("add_required_column" if required else "add_column")
        )
        if sum([first, after is not None, before is not None]) > 1:
            raise InvalidOperationError("Give at most one of first=True, after= and before= for add_column.")
        if if_not_exists and self._has_column(table, name):
            return
        field_type = to_iceberg_type(type, _text(name))
        if required:
            self._require_empty(table, f"add required column {_text(name)!r}")
        path = _path(name)
        change = AddedColumn(
            path if isinstance(path, tuple) else (path,),
            field_type,
            doc=doc,
            required=required,
            first=first,
            after=after,
            before=before,
        )
        parents = [_text(name).rsplit(".", 1)[0]] if "." in _text(name) else []
        self._staging.schema_change(
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
        identifier, transaction = self._staging.transaction(table)
        snapshot = transaction.table_metadata.current_snapshot()
        records = int(snapshot.summary.get("total-records", "0")) if snapshot and snapshot.summary else 0
        if records:
            raise InvalidOperationError(
                f"Cannot {what} to table {self._staging.label(identifier)}: it has {records} row(s), which would have "
                "no value. Add the column as optional, backfill it, and keep it optional (Iceberg cannot make "
                "an optional column required)."
            )
        if identifier in self._staging.commits.created:
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
        identifier, transaction = self._staging.transaction(table)
        try:
            self._staging.schema(identifier, transaction).find_field(_text(name))
        except ValueError:
            return False
        return True

    def drop_column(self, table: str, name: ColumnPath, if_exists: bool = False) -> None:
        """Drop a column (its data stays in old files and snapshots; it is no longer read).

        With ``if_exists=True`` a missing column is not an error.
        """
        self._staging.note(
            f"drop column {table}.{_text(name)}", self._staging.drop_risk("drop_column", table, _text(name))
        )
        if if_exists and not self._has_column(table, name):
            return
        self._check_droppable(table, name)
        if self._reshape_added(table, name, None):
            return
        path = _path(name)
        self._staging.schema_change(
            table, f"drop column {_text(name)!r}", lambda update: update.delete_column(path), refs=[name]
        )

    def _check_droppable(self, table: str, name: ColumnPath) -> None:
        """Refuse, naming the fix, to drop a column the partition spec, sort order or row key still uses."""
        identifier, transaction = self._staging.transaction(table)
        schema = self._staging.schema(identifier, transaction)
        try:
            field = schema.find_field(_text(name))
        except ValueError:
            return  # the schema update names the missing column itself
        ids = {field.field_id, *(nested_ids(field.field_type))}
        label, column = self._staging.label(identifier), _text(name)
        metadata = self._staging.schemas.metadata(identifier, transaction)  # partitions staged on new columns too
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

    def restore_column(self, table: str, name: ColumnPath) -> None:
        """Bring back a dropped column with its data: its original field id, type, doc and position.

        Iceberg never reuses a field id, so rows of data files written before the drop read their old
        values again; rows of files written after it, or rewritten since (compaction, copy-on-write
        deletes), read null, so the column comes back optional (a required column stays required
        when every live row holds it). The new schema keeps every column added since the drop. See
        :mod:`~iceberg_ops_provider.migration.restore`.

        Raises:
            InvalidOperationError: A live column has the name, the column was renamed rather than
                dropped, or no schema of the table ever had it (the message lists what can be restored).
        """
        identifier, transaction = self._staging.transaction(table)
        column = _text(name)
        metadata = transaction.table_metadata
        pending = self._staging.schema(identifier, transaction)  # this migration's earlier column changes
        dropped = dropped_column(metadata, column, self._staging.label(identifier), current=pending)
        holding = rows_holding(metadata, transaction._table.io, dropped.field)
        self._staging.note(
            f"restore column {table}.{column} (field id {dropped.field.field_id}): {holding.describe()}",
            risk_of("restore_column"),
        )
        schema, requirements = restoring(metadata, dropped, holding, current=pending)
        if requirements:
            transaction._apply((), requirements)
        # Later column changes apply on top of the restored schema: still one new schema in all.
        self._staging.schemas.restart_from(identifier, transaction, schema)

    def rename_column(self, table: str, old: ColumnPath, new: str) -> None:
        """Rename a column; ``new`` is the new last name (the column stays where it is)."""
        self._staging.note(f"rename column {table}.{_text(old)} to {new}", risk_of("rename_column"))
        added = self._added(table, old)
        if added is not None and self._reshape_added(table, old, replace(added, path=(*added.path[:-1], new))):
            return
        path = _path(old)
        self._staging.schema_change(
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
        kinds = [
            kind
            for kind, given in (("promote_column", type), ("make_column_optional", required), ("set_column_doc", doc))
            if given is not None
        ]
        self._staging.note(f"alter column {table}.{_text(name)}", highest_risk(kinds, "review"))
        if type is None and doc is None and required is None:
            raise InvalidOperationError(f"alter_column({table!r}, {_text(name)!r}) needs type=, doc= or required=.")
        path = _path(name)
        _, transaction = self._staging.transaction(table)
        current = self._field(table, transaction, name)
        new_type = to_iceberg_type(type, _text(name)) if type is not None else None
        if new_type is not None:
            check_promotion(_text(name), current.field_type, new_type)
        if required and not current.required:
            raise InvalidOperationError(
                f"Cannot make column {_text(name)!r} of {table!r} required: existing rows may hold nulls and the "
                "Iceberg specification does not allow optional -> required."
            )

        added = self._added(table, name)
        if added is not None:
            reshaped = replace(
                added,
                field_type=new_type if new_type is not None else added.field_type,
                doc=doc if doc is not None else added.doc,
                required=False if required is False else added.required,
            )
            if self._reshape_added(table, name, reshaped):
                return

        def change(update: UpdateSchema) -> None:
            if new_type is not None and new_type != current.field_type:
                update.update_column(path, field_type=new_type)
            if doc is not None:
                update.update_column(path, doc=doc)
            if required is False and current.required:
                update.make_column_optional(path)

        self._staging.schema_change(table, f"alter column {_text(name)!r}", change, refs=[name])

    def _added(self, table: str, name: ColumnPath) -> AddedColumn | None:
        """The pending add of column ``name`` in this migration, if it is one."""
        identifier, _ = self._staging.transaction(table)
        return self._staging.schemas.pending_add(identifier, name)

    def _reshape_added(self, table: str, name: ColumnPath, replacement: AddedColumn | None) -> bool:
        """Fold a change of a column this migration adds into its add (``None``: drop it); False when it cannot."""
        identifier, transaction = self._staging.transaction(table)
        added = self._staging.schemas.pending_add(identifier, name)
        return added is not None and self._staging.schemas.reshape_add(identifier, transaction, added, replacement)

    def _field(self, table: str, transaction: Transaction, name: ColumnPath) -> NestedField:
        dotted = _text(name)
        schema = self._staging.schema(self._staging.identifier(table), transaction)
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
        self._staging.note(f"move column {table}.{_text(name)}", risk_of("move_column"))
        if sum([first, after is not None, before is not None]) != 1:
            raise InvalidOperationError("move_column needs exactly one of first=True, after= or before=.")
        path = _path(name)

        self._staging.schema_change(
            table,
            f"move column {_text(name)!r}",
            lambda update: self._place(update, path, first=first, after=after, before=before),
            anchors=[ref for ref in (name, after, before) if ref is not None],
        )

    def set_identifier_fields(self, table: str, *names: str) -> None:
        """Set the table's identifier fields (the row key; the columns must be required). No names clears them."""
        self._staging.note(f"set identifier fields of {table}", risk_of("set_identifier_fields"))
        identifier, transaction = self._staging.transaction(table)
        schema = self._staging.schema(identifier, transaction)
        for name in names:
            try:
                field = schema.find_field(name)
            except ValueError:
                continue  # the schema update names the missing column itself
            if not field.required or not field.field_type.is_primitive:
                why = "optional" if not field.required else f"a {field.field_type} column"
                raise InvalidOperationError(
                    f"Cannot set identifier fields of {self._staging.label(identifier)}: {name!r} is {why}. "
                    "Identifier fields (the row key) must be required columns of a primitive type; Iceberg cannot "
                    "make an optional column required, so add a required one to an empty table instead."
                )
        self._staging.schema_change(
            table, "set identifier fields", lambda update: update.set_identifier_fields(*names), refs=list(names)
        )
