"""A migration's pending schema changes, per table, merged into one new schema.

Column changes are folded into the table's transaction before a change that must see them or the commit; changes
PyIceberg cannot combine start a new segment (docs/contributing.md, "How a migration's changes are staged").
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from pyiceberg.partitioning import PartitionSpec, validate_partition_name
from pyiceberg.schema import Schema, index_by_name
from pyiceberg.table import Table, Transaction
from pyiceberg.table.name_mapping import update_mapping
from pyiceberg.table.update import (
    AddPartitionSpecUpdate,
    AddSchemaUpdate,
    SetCurrentSchemaUpdate,
    update_table_metadata,
)
from pyiceberg.table.update.schema import UpdateSchema

from iceberg_ops_provider.errors import InvalidOperationError

if TYPE_CHECKING:
    from pyiceberg.table.metadata import TableMetadata
    from pyiceberg.table.name_mapping import NameMapping
    from pyiceberg.table.update import TableRequirement, TableUpdate
    from pyiceberg.types import IcebergType

__all__ = ["AddedColumn", "ColumnPath", "SchemaChanges", "as_path", "dotted", "place", "refusal"]

ColumnPath = str | tuple[str, ...]
"""A column: ``"name"``, a dotted path ``"address.city"``, or a tuple ``("address", "city")``."""

Identifier = tuple[str, ...]
_Change = Callable[["UpdateSchema"], object]


def dotted(column: ColumnPath) -> str:
    """A column's dotted name (``"address.city"``)."""
    return ".".join(column) if isinstance(column, tuple) else column


def refusal(what: str, identifier: Identifier, exc: Exception) -> InvalidOperationError:
    """The error saying PyIceberg refused ``what`` on a table, with its reason."""
    reason = exc.args[0] if isinstance(exc, KeyError) and exc.args else exc
    return InvalidOperationError(f"Cannot {what} on table {'.'.join(identifier)}: {reason}")


def _stage(
    update: UpdateSchema, change: _Change, allow_incompatible: bool, specs: Iterable[PartitionSpec] = ()
) -> None:
    """Apply ``change`` to ``update`` and validate it now (also against ``specs``' field names), naming this change."""
    allowed = update._allow_incompatible_changes
    update._allow_incompatible_changes = allow_incompatible or allowed
    try:
        change(update)
        schema = update._apply()
        for spec in specs:
            for field in spec.fields:
                validate_partition_name(field.name, field.transform, field.source_id, schema, set())
    finally:
        update._allow_incompatible_changes = allowed


def as_path(column: ColumnPath) -> str | tuple[str, ...]:
    """A column as PyIceberg's schema update takes it: a name, or a tuple path for a nested one."""
    return column if isinstance(column, tuple) else tuple(column.split(".")) if "." in column else column


@dataclass(frozen=True)
class AddedColumn:
    """A staged ``add_column``: a later rename, type or doc change, or drop of the column replaces (or removes) it."""

    path: tuple[str, ...]
    field_type: IcebergType
    doc: str | None = None
    required: bool = False
    first: bool = False
    after: ColumnPath | None = None
    before: ColumnPath | None = None

    def __call__(self, update: UpdateSchema) -> None:
        """Stage the add (and its placement) on ``update``."""
        path = self.path if len(self.path) > 1 else self.path[0]
        update.add_column(path, self.field_type, doc=self.doc, required=self.required)
        place(update, path, self.first, self.after, self.before)


def place(
    update: UpdateSchema, path: str | tuple[str, ...], first: bool, after: ColumnPath | None, before: ColumnPath | None
) -> None:
    """Move a column first, after or before another one, or (none given) leave it where it is."""
    if first:
        update.move_first(path)
    elif after is not None:
        update.move_after(path, as_path(after))
    elif before is not None:
        update.move_before(path, as_path(before))


def _field_id(schema: Schema, column: ColumnPath) -> int | None:
    return index_by_name(schema).get(dotted(column))


def _names_the_same(update: UpdateSchema, pending: Schema, column: ColumnPath, *, added_ok: bool) -> bool:
    """Whether ``update`` sees ``column`` as now: the segment did not rename, drop or (unless ``added_ok``) add it."""
    now = _field_id(pending, column)
    if added_ok and update._added_name_to_id.get(dotted(column)) == now is not None:
        return True
    return now is not None and _field_id(update._schema, column) == now


@dataclass(frozen=True)
class _SegmentStart:
    """Where a later segment starts: the schema so far (numbered as the current one), next field id, name mapping."""

    schema: Schema
    next_field_id: int
    name_mapping: NameMapping | None


def _continued(update: UpdateSchema) -> _SegmentStart:
    applied = update._apply()
    schema = Schema(
        *applied.fields, schema_id=update._schema.schema_id, identifier_field_ids=applied.identifier_field_ids
    )
    next_field_id = next(update._last_column_id)
    update._last_column_id = itertools.count(next_field_id)  # peeking consumed it
    mapping = update._name_mapping
    if mapping is not None:
        mapping = update_mapping(mapping, update._updates, update._adds)
    return _SegmentStart(schema, next_field_id, mapping)


def _first_of_each_type(requirements: tuple[TableRequirement, ...]) -> tuple[TableRequirement, ...]:
    """The first requirement of each type: later ones assert states earlier changes of the same commit make."""
    kept: dict[type, TableRequirement] = {}
    for requirement in requirements:
        kept.setdefault(type(requirement), requirement)
    return tuple(kept.values())


@dataclass(frozen=True)
class _Deferred:
    """A property, partition or sort-order change built on the pending schema, applied after it is committed."""

    transaction: Transaction
    updates: tuple[TableUpdate, ...]
    requirements: tuple[TableRequirement, ...]


class SchemaChanges:
    """The schema changes staged on each table and not yet folded into its transaction."""

    def __init__(self) -> None:
        self._updates: dict[Identifier, UpdateSchema] = {}
        self._steps: dict[Identifier, list[tuple[_Change, bool]]] = {}
        self._starts: dict[Identifier, _SegmentStart] = {}
        self._deferred: dict[Identifier, list[_Deferred]] = {}
        self._per_table: tuple[dict[Identifier, Any], ...] = (self._updates, self._steps, self._starts, self._deferred)

    def _new_update(self, identifier: Identifier, transaction: Transaction) -> UpdateSchema:
        """A schema update starting where the table's current segment starts."""
        start = self._starts.get(identifier)
        if start is None:
            return transaction.update_schema()
        update = UpdateSchema(transaction, schema=start.schema, name_mapping=start.name_mapping)
        update._last_column_id = itertools.count(start.next_field_id)
        return update

    def _segment(self, identifier: Identifier, transaction: Transaction, start: _SegmentStart) -> UpdateSchema:
        """Start the table's next segment (an empty update) at ``start``."""
        self._starts[identifier] = start
        self._steps[identifier] = []
        update = self._updates[identifier] = self._new_update(identifier, transaction)
        return update

    def stage(
        self,
        identifier: Identifier,
        transaction: Transaction,
        what: str,
        change: _Change,
        *,
        allow_incompatible: bool = False,
        refs: Iterable[ColumnPath] = (),
        anchors: Iterable[ColumnPath] = (),
    ) -> None:
        """Stage a schema change; a table's schema changes in one migration make one new schema.

        A change naming a column only earlier staged changes create (``refs``: must exist; ``anchors``: may
        be added by this update), or that PyIceberg cannot combine with them, starts a new segment.

        Raises:
            InvalidOperationError: PyIceberg refused the change (nothing of it is staged).
        """
        update = self._updates.get(identifier)
        if update is None:
            update = self._updates[identifier] = self._new_update(identifier, transaction)
            self._steps[identifier] = []
        else:
            pending = update._apply()
            if not (
                all(_names_the_same(update, pending, ref, added_ok=False) for ref in refs)
                and all(_names_the_same(update, pending, ref, added_ok=True) for ref in anchors)
            ):
                # A new segment resolves the names against the columns as they are now (or refuses them).
                update = self._segment(identifier, transaction, _continued(update))
        for retried in (False, True):
            earlier = self._steps[identifier]
            try:
                _stage(update, change, allow_incompatible, self._waiting_specs(identifier))
                break
            except Exception as exc:
                if retried or not earlier:
                    self._drop_empty_segment(identifier, transaction)
                    raise refusal(what, identifier, exc) from exc
            # The change does not combine with the earlier ones: end their segment and try it on the next.
            rebuilt = self._new_update(identifier, transaction)
            for step, allowed in earlier:
                _stage(rebuilt, step, allowed)
            update = self._segment(identifier, transaction, _continued(rebuilt))
        earlier.append((change, allow_incompatible))

    def _waiting_specs(self, identifier: Identifier) -> list[PartitionSpec]:
        return [
            update.spec
            for deferred in self._deferred.get(identifier, [])
            for update in deferred.updates
            if isinstance(update, AddPartitionSpecUpdate)
        ]

    def _drop_empty_segment(self, identifier: Identifier, transaction: Transaction) -> None:
        """Forget a refused change that was alone in its segment (earlier segments stay staged)."""
        if identifier in self._starts:
            self._segment(identifier, transaction, self._starts[identifier])
        else:
            self._updates.pop(identifier, None)
            self._steps.pop(identifier, None)

    def restart_from(self, identifier: Identifier, transaction: Transaction, schema: Schema) -> None:
        """Make ``schema`` (holding no field id the table never had) the pending one; later changes apply on top."""
        update = self._updates.get(identifier)
        if update is not None:
            start = _continued(update)
        else:
            metadata = transaction.table_metadata
            start = _SegmentStart(metadata.schema(), metadata.last_column_id + 1, metadata.name_mapping())
        renumbered = Schema(
            *schema.fields, schema_id=start.schema.schema_id, identifier_field_ids=schema.identifier_field_ids
        )
        self._segment(identifier, transaction, _SegmentStart(renumbered, start.next_field_id, start.name_mapping))

    def metadata(self, identifier: Identifier, transaction: Transaction) -> TableMetadata:
        """The table's metadata as its pending changes leave it (the pending schema, the deferred changes)."""
        update = self._updates.get(identifier)
        updates: tuple[TableUpdate, ...] = ()
        if update is not None:
            updates = (AddSchemaUpdate(schema=update._apply()), SetCurrentSchemaUpdate(schema_id=-1))
        for deferred in self._deferred.get(identifier, []):
            updates += deferred.updates
        # One call: PyIceberg checks the sort order and spec against the schema at its end only (a sort
        # order on a column the pending changes drop is replaced by a deferred change).
        return update_table_metadata(transaction.table_metadata, updates) if updates else transaction.table_metadata

    def defers(self, identifier: Identifier) -> bool:
        """Whether a property, partition or sort-order change must wait: column changes or an earlier change wait."""
        return identifier in self._updates or bool(self._deferred.get(identifier))

    def stage_deferred(
        self, identifier: Identifier, transaction: Transaction, build: Callable[[Transaction], object]
    ) -> None:
        """Build a change on the table as the pending changes leave it, to apply right after them."""
        table, metadata = transaction._table, self.metadata(identifier, transaction)
        scratch = Transaction(Table(table._identifier, metadata, table.metadata_location, table.io, table.catalog))
        build(scratch)
        deferred = _Deferred(transaction, scratch._updates, scratch._requirements)
        self._deferred.setdefault(identifier, []).append(deferred)

    def pending_add(self, identifier: Identifier, column: ColumnPath) -> AddedColumn | None:
        """The staged add of ``column`` in the table's pending update, if the column is one added there."""
        steps = (step for step, _ in self._steps.get(identifier, []))
        return next((s for s in steps if isinstance(s, AddedColumn) and dotted(s.path) == dotted(column)), None)

    def reshape_add(
        self, identifier: Identifier, transaction: Transaction, added: AddedColumn, replacement: AddedColumn | None
    ) -> bool:
        """Replace the pending ``added`` step by ``replacement`` (``None``: remove it) and stage the update again.

        ``False``, changing nothing, when the other pending steps no longer apply after it.
        """
        steps = [
            (replacement if step is added else step, allowed)
            for step, allowed in self._steps.get(identifier, [])
            if not (step is added and replacement is None)
        ]
        rebuilt = self._new_update(identifier, transaction)
        try:
            for step, allowed in steps:
                _stage(rebuilt, step, allowed)  # type: ignore[arg-type]
        except Exception:
            return False
        self._updates[identifier] = rebuilt
        self._steps[identifier] = steps  # type: ignore[assignment]
        return True

    def fold(self, identifier: Identifier) -> None:
        """Fold the table's pending schema changes into its transaction (before other changes or the commit)."""
        update, deferred = self._updates.get(identifier), self._deferred.get(identifier, [])
        self.forget(identifier)
        transaction = update._transaction if update is not None else deferred[0].transaction if deferred else None
        if transaction is None:
            return
        try:
            updates, requirements = update._commit() if update is not None else ((), ())
            for change in deferred:
                updates += change.updates
                requirements += change.requirements
            # One staging, so the table is checked once everything is in (a sort order on a dropped column
            # replaced by a deferred one is fine), each requirement type asserted as the first change saw it.
            transaction._apply(updates, _first_of_each_type(requirements))
        except (ValueError, KeyError, NotImplementedError) as exc:
            raise refusal("apply the schema changes", identifier, exc) from exc

    def schema(self, identifier: Identifier, transaction: Transaction) -> Schema:
        """The table's schema including the changes staged here."""
        update = self._updates.get(identifier)
        return update._apply() if update is not None else transaction.table_metadata.schema()

    def rename(self, source: Identifier, target: Identifier) -> None:
        """Keep what is staged for ``source`` under its new name ``target``."""
        for staged in self._per_table:
            if source in staged:
                staged[target] = staged.pop(source)

    def forget(self, identifier: Identifier) -> None:
        """Drop what is staged for one table."""
        for staged in self._per_table:
            staged.pop(identifier, None)

    def clear(self) -> None:
        """Drop everything staged."""
        for staged in self._per_table:
            staged.clear()
