"""MigrationContext: what a migration's ``upgrade()``/``downgrade()`` uses to change tables.

Changes to one table are staged in one PyIceberg transaction and reach the catalog as one atomic
commit when the migration returns (:meth:`MigrationContext.commit`, called by the runner). If the
migration raises, staged changes are discarded, so a failed migration leaves its tables as they were.
Catalog-level operations (``drop_table``, ``rename_table``) and :meth:`MigrationContext.load_table`
cannot be staged: they first commit what is pending for the table they touch, then act at once.
Namespaces that a new table needs are created when that table is committed, never while staging.

Every commit is announced to the run's :class:`CommitJournal` first (the runner records its intent
there) and carries a receipt property naming the namespace, version, run and step, so that after a
crash the runner can tell from the tables themselves which commits landed.

A journal that can commit several tables at once (:class:`AtomicCommitJournal`, the runner's with
``atomic_commits=True`` on a catalog that supports it) instead takes a finished migration's table
changes in one commit with its history record; drops, renames and namespace creation are still
committed one by one, before it.

Bare table names resolve in the runner's namespace; a dotted name (``"finance.orders"``) addresses
another namespace. Nested columns are given as dotted paths (``"address.city"``) or tuples.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal, Protocol

import pyarrow as pa
from pyiceberg.exceptions import NoSuchTableError
from pyiceberg.schema import Schema
from pyiceberg.table.sorting import UNSORTED_SORT_ORDER, SortDirection
from pyiceberg.table.update import AddSortOrderUpdate, AssertDefaultSortOrderId, SetDefaultSortOrderUpdate
from pyiceberg.types import IcebergType, NestedField

from iceberg_ops_provider.core.atomic_commit import TableChange
from iceberg_ops_provider.core.catalog import ensure_namespace, to_property_value
from iceberg_ops_provider.core.evolution import check_promotion
from iceberg_ops_provider.core.type_strings import to_iceberg_type
from iceberg_ops_provider.core.types import arrow_to_iceberg_schema
from iceberg_ops_provider.errors import DryRunLimit, InvalidOperationError
from iceberg_ops_provider.history.intent import RECEIPT_PROPERTY, IntentAction
from iceberg_ops_provider.migration.touched import TouchedTables, current_recording, stored_location
from iceberg_ops_provider.migration.transforms import parse_partition_expr, parse_sort_field

if TYPE_CHECKING:
    from pyiceberg.catalog import Catalog
    from pyiceberg.table import Table, Transaction
    from pyiceberg.table.update.schema import UpdateSchema
    from pyiceberg.table.update.spec import UpdateSpec

__all__ = ["AtomicCommitJournal", "ColumnPath", "CommitJournal", "DryRunLimit", "MigrationContext", "TypeLike"]

TypeLike = str | pa.DataType | IcebergType
"""A column type: text (``"decimal(12,2)"``), an Arrow type or a PyIceberg type."""

ColumnPath = str | tuple[str, ...]
"""A column: ``"name"``, a dotted path ``"address.city"``, or a tuple ``("address", "city")``."""

Identifier = tuple[str, ...]


class CommitJournal(Protocol):
    """What the runner is told before each commit of a migration (its intent record and lease check)."""

    def receipt(self, step: int) -> str:
        """The receipt the ``step``-th commit of this migration carries."""
        ...

    def before_commit(self, actions: list[IntentAction], *, complete: bool) -> None:
        """Called before ``actions`` are committed, in that order; raising stops the commit.

        ``complete`` is true when the migration's body has finished, so ``actions`` are its last ones.
        """
        ...


class AtomicCommitJournal(CommitJournal, Protocol):
    """A journal that can commit a finished migration's table changes together with its own bookkeeping.

    The runner's journal commits them with the migration's history record (and a check that the run
    still holds the namespace's lock) in one multi-table commit, where the catalog can.
    """

    def atomic_mode(self) -> str | None:
        """The multi-table commit the remaining changes can use now, or ``None`` to commit them one by one.

        ``sql-transaction`` or ``rest-transaction``; ``None`` when the catalog cannot, or this
        migration already committed something on its own (early commits, direct writes).
        """
        ...

    def commit_together(self, changes: list[TableChange], actions: list[IntentAction], *, outside: list[str]) -> bool:
        """Commit ``changes`` (described by ``actions``) in one multi-table commit with the bookkeeping.

        ``outside`` names what this migration committed separately just before (drops, renames,
        created namespaces). Returns false, having committed nothing, when the catalog turned out
        unable to; raises when the commit failed (nothing of it applied) or its outcome is unknown.
        """
        ...


def _path(column: ColumnPath) -> str | tuple[str, ...]:
    if isinstance(column, tuple):
        return column
    if not isinstance(column, str) or not column:
        raise InvalidOperationError(f"A column must be a non-empty name or tuple path, got {column!r}.")
    return tuple(column.split(".")) if "." in column else column


@dataclass
class _Queued:
    """One staged change, in the order the migration made it: a table's transaction, a drop or a rename."""

    kind: Literal["table", "drop", "rename"]
    identifier: tuple[str, ...]
    target: tuple[str, ...] | None = None
    purge: bool = False


def _stage_schema_change(
    update: UpdateSchema, change: Callable[[UpdateSchema], object], allow_incompatible: bool
) -> None:
    """Apply ``change`` to ``update`` and validate the result now, so an error names this change."""
    allowed = update._allow_incompatible_changes
    update._allow_incompatible_changes = allow_incompatible or allowed
    try:
        change(update)
        update._apply()
    finally:
        update._allow_incompatible_changes = allowed


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


def _resolves(schema: Schema, column: ColumnPath) -> bool:
    try:
        schema.find_field(_text(column))
    except ValueError:
        return False
    return True


def _text(column: ColumnPath) -> str:
    return ".".join(column) if isinstance(column, tuple) else column


def _split_for_atomic(
    queue: list[_Queued], created: set[Identifier], *, creates_inside: bool
) -> tuple[list[_Queued], list[_Queued]]:
    """The queued changes that must be committed on their own, in order, and those one atomic commit can take.

    Drops and renames are catalog operations of their own (and so are creations, on catalogs whose
    multi-table commit cannot create). A table's change can wait for the atomic commit after them
    unless a later drop or rename names that table.
    """
    outside: list[_Queued] = []
    inside: list[_Queued] = []
    for index, item in enumerate(queue):
        if item.kind != "table" or (not creates_inside and item.identifier in created):
            outside.append(item)
            continue
        later = queue[index + 1 :]
        if any(other.kind != "table" and item.identifier in (other.identifier, other.target) for other in later):
            outside.append(item)
        else:
            inside.append(item)
    return outside, inside


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
        self._journal = journal
        self._meta_namespace = meta_namespace
        self._pending: dict[Identifier, Transaction] = {}
        self._queue: list[_Queued] = []
        self._gone: set[Identifier] = set()
        self._rename_targets: set[Identifier] = set()
        self._direct: set[str] = set()
        self._created: set[Identifier] = set()
        self._schema_updates: dict[Identifier, UpdateSchema] = {}
        self._schema_steps: dict[Identifier, list[tuple[Callable[[UpdateSchema], object], bool]]] = {}
        self._steps = 0
        self.committed: list[str] = []
        """Tables whose changes already reached the catalog (commits and immediate operations), in order."""
        self.created_namespaces: list[str] = []
        """Namespaces created by this migration's commits."""
        self.touched: TouchedTables = current_recording() or TouchedTables()
        """The net change of every table this migration reached (the runner's recording, when one is open)."""

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
        self._commit_queue(complete=False)
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
            self._announce([IntentAction(what, "direct")])

    # -- staging and committing -----------------------------------------------------------------

    @property
    def has_pending_changes(self) -> bool:
        """Whether anything is staged and not yet committed."""
        return bool(self._queue)

    def commit(self) -> None:
        """Commit everything staged so far, in the order it was staged (one atomic commit per table).

        The runner commits what is left when the migration returns; call this only to make changes
        visible to code later in the same migration.
        """
        self._commit_queue(complete=False)

    def finish(self) -> None:
        """Commit what the migration staged, once it has returned (called by the runner, not by migrations)."""
        self._commit_queue(complete=True)

    def discard(self) -> None:
        """Forget everything staged and not yet committed."""
        self._pending.clear()
        self._queue.clear()
        self._gone.clear()
        self._rename_targets.clear()
        self._created.clear()
        self._schema_updates.clear()
        self._schema_steps.clear()

    def _action(self, item: _Queued, step: int) -> IntentAction:
        """The intent entry of one queued change, the ``step``-th commit of this migration."""
        label = self._label(item.identifier)
        if item.kind == "drop":
            return IntentAction(label, "drop")
        if item.kind == "rename":
            return IntentAction(label, "rename", to=self._label(item.target or ()))
        kind = "create" if item.identifier in self._created else "commit"
        return IntentAction(label, kind, receipt=self._journal.receipt(step) if self._journal else None)

    def _announce(self, actions: list[IntentAction], *, complete: bool = False) -> None:
        if self._journal is not None:
            self._journal.before_commit(actions, complete=complete)

    def _commit_queue(self, *, complete: bool) -> None:
        """Announce every queued change (the intent), then commit them one by one in order.

        Once the body has finished, a journal that can commit several tables at once takes the table
        changes in one atomic commit with its own bookkeeping (see :meth:`_commit_queue_atomic`).
        """
        if self._dry_run:
            return
        mode = self._atomic_mode() if complete else None
        if mode is not None and self._commit_queue_atomic(mode):
            return
        actions = [self._action(item, self._steps + offset) for offset, item in enumerate(self._queue, 1)]
        self._announce(actions, complete=complete)
        while self._queue:
            item = self._queue[0]
            self._announce([self._action(item, self._steps + 1)])  # listed already: checks the lock still holds
            self._commit_item(item)
            self._queue.pop(0)
        self._gone.clear()
        self._rename_targets.clear()

    def _atomic_mode(self) -> str | None:
        atomic_mode = getattr(self._journal, "atomic_mode", None)
        return atomic_mode() if atomic_mode is not None else None

    def _commit_queue_atomic(self, mode: str) -> bool:
        """Commit the queue with its table changes in one atomic commit; false when there are none to.

        What cannot be part of that commit (drops, renames, and table changes a later drop or rename
        depends on; creations where the catalog cannot create in a multi-table commit) is committed
        first, one by one and in order, under an intent listing everything, as without it.
        """
        journal: Any = self._journal
        outside, inside = _split_for_atomic(self._queue, self._created, creates_inside=mode == "sql-transaction")
        if not inside:
            return False
        ordered = outside + inside
        actions = [self._action(item, self._steps + offset) for offset, item in enumerate(ordered, 1)]
        if outside:  # these commit one by one: the intent lists everything, as for per-table commits
            self._announce(actions, complete=True)
        namespaces_before = len(self.created_namespaces)
        for item in outside:
            self._announce([self._action(item, self._steps + 1)])
            self._commit_item(item)
            self._queue = [queued for queued in self._queue if queued is not item]
        prepared = [(item, *self._prepare_table(item)) for item in inside]
        outside_labels = [action.label() for action in actions[: len(outside)]]
        outside_labels += [f"create namespace {name}" for name in self.created_namespaces[namespaces_before:]]
        changes = [TableChange.of(transaction) for _, transaction, _ in prepared]
        inside_actions = actions[len(outside) :]
        if not journal.commit_together(changes, inside_actions, outside=outside_labels):
            if not outside:  # the catalog cannot after all: per-table commits under an intent
                self._announce(inside_actions, complete=True)
            for (item, transaction, created), action in zip(prepared, inside_actions, strict=True):
                self._announce([action])
                transaction.commit_transaction()
                self._table_committed(item, created)
        else:
            for item, _, created in prepared:
                self._table_committed(item, created)
        self._queue.clear()
        self._gone.clear()
        self._rename_targets.clear()
        return True

    def _prepare_table(self, item: _Queued) -> tuple[Transaction, bool]:
        """The transaction that commits a queued table change (receipt included), and whether it creates the table."""
        identifier = item.identifier
        transaction = self._pending[identifier]
        self._apply_schema_update(identifier)
        self._steps += 1
        created = identifier in self._created
        if created:
            transaction = self._create_for_real(identifier, transaction)
        if self._journal is not None:
            transaction.set_properties({RECEIPT_PROPERTY: self._journal.receipt(self._steps)})
        self._pending.pop(identifier, None)
        self._created.discard(identifier)
        return transaction, created

    def _table_committed(self, item: _Queued, created: bool) -> None:
        (self.touched.created if created else self.touched.altered)(self._label(item.identifier))
        self._record(item.identifier)

    def _commit_item(self, item: _Queued) -> None:
        identifier = item.identifier
        if item.kind == "drop":
            self._steps += 1
            location = stored_location(self._catalog, identifier)
            try:
                if item.purge:
                    self._catalog.purge_table(identifier)
                else:
                    self._catalog.drop_table(identifier)
            except NoSuchTableError as exc:
                raise InvalidOperationError(f"Cannot drop table {self._label(identifier)}: it does not exist.") from exc
            self.touched.dropped(self._label(identifier), location)
        elif item.kind == "rename":
            target = item.target or ()
            self._steps += 1
            if not self._catalog.namespace_exists(target[:-1]):
                ensure_namespace(self._catalog, target[:-1])
                self.created_namespaces.append(".".join(target[:-1]))
            try:
                self._catalog.rename_table(identifier, target)
            except NoSuchTableError as exc:
                raise InvalidOperationError(
                    f"Cannot rename table {self._label(identifier)}: it does not exist."
                ) from exc
            self.touched.renamed(self._label(identifier), self._label(target))
        else:
            transaction, created = self._prepare_table(item)
            transaction.commit_transaction()
            self._table_committed(item, created)
            return
        self._record(identifier)

    def _create_for_real(self, identifier: Identifier, placeholder: Transaction) -> Transaction:
        """Create the namespace if missing, then stage the table as the placeholder ended up.

        The table is created with its final schema, partition spec, sort order and properties, so a
        new table has exactly one of each, whatever the migration staged on it.
        """
        namespace = identifier[:-1]
        if not self._catalog.namespace_exists(namespace):
            ensure_namespace(self._catalog, namespace)
            self.created_namespaces.append(".".join(namespace))
        metadata = placeholder.table_metadata
        return self._catalog.create_table_transaction(
            identifier,
            metadata.schema(),
            partition_spec=metadata.spec(),
            sort_order=metadata.sort_order(),
            properties={**metadata.properties, "format-version": str(metadata.format_version)},
        )

    def _record(self, identifier: Identifier) -> None:
        label = self._label(identifier)
        if label not in self.committed:
            self.committed.append(label)

    def _transaction(self, name: str) -> tuple[Identifier, Transaction]:
        identifier = self.identifier(name)
        if identifier in self._gone:
            raise InvalidOperationError(
                f"Table {self._label(identifier)} is dropped or renamed earlier in this migration; "
                "use its new name, or create it again first."
            )
        if identifier in self._rename_targets and identifier not in self._pending:
            self._commit_queue(complete=False)  # the rename must happen before the table can be changed
        if identifier not in self._pending:
            try:
                table = self._catalog.load_table(identifier)
            except NoSuchTableError as exc:
                raise InvalidOperationError(
                    f"Table {self._label(identifier)} does not exist; create it first (ctx.create_table) "
                    "or check the name and namespace."
                ) from exc
            self._pending[identifier] = table.transaction()
            self._queue.append(_Queued("table", identifier))
        return identifier, self._pending[identifier]

    def _staged(self, name: str, what: str, build: Callable[[Transaction], object]) -> None:
        """Run ``build`` against the table's transaction, turning PyIceberg's refusals into clear errors."""
        identifier, transaction = self._transaction(name)
        self._apply_schema_update(identifier)  # later changes (a partition on a new column) see the new schema
        try:
            build(transaction)
        except (ValueError, KeyError, NotImplementedError) as exc:
            raise self._refusal(what, identifier, exc) from exc

    def _refusal(self, what: str, identifier: Identifier, exc: Exception) -> InvalidOperationError:
        reason = exc.args[0] if isinstance(exc, KeyError) and exc.args else exc
        return InvalidOperationError(f"Cannot {what} on table {self._label(identifier)}: {reason}")

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
        """Stage a schema change; a table's schema changes in one migration make one new schema where they can.

        PyIceberg resolves column names against the schema a schema update started from and cannot
        combine every pair of changes (moving a column next to one dropped in the same update), so a
        change that names a column only earlier staged changes create, or that does not combine with
        them, first folds those into the transaction (a schema of their own) and starts a new update.
        """
        identifier, transaction = self._transaction(table)
        update = self._schema_updates.get(identifier)
        if update is not None and not (
            all(_resolves(update._schema, ref) for ref in refs)
            and all(_resolves(update._schema, ref) or _text(ref) in update._added_name_to_id for ref in anchors)
        ):
            self._apply_schema_update(identifier)
            update = None
        earlier = self._schema_steps.setdefault(identifier, []) if update is not None else []
        if update is None:
            update = self._schema_updates[identifier] = transaction.update_schema()
            self._schema_steps[identifier] = earlier
        try:
            _stage_schema_change(update, change, allow_incompatible)
        except Exception as exc:
            if not earlier:
                self._schema_updates.pop(identifier, None)  # holds nothing but the refused change
                raise self._refusal(what, identifier, exc) from exc
            # The change does not combine with the earlier ones: give those a schema of their own first.
            rebuilt = transaction.update_schema()
            for step, allowed in earlier:
                _stage_schema_change(rebuilt, step, allowed)
            self._schema_updates[identifier] = rebuilt
            self._apply_schema_update(identifier)
            update = self._schema_updates[identifier] = transaction.update_schema()
            earlier = self._schema_steps[identifier] = []
            try:
                _stage_schema_change(update, change, allow_incompatible)
            except Exception as again:
                self._schema_updates.pop(identifier, None)
                raise self._refusal(what, identifier, again) from again
        earlier.append((change, allow_incompatible))

    def _apply_schema_update(self, identifier: Identifier) -> None:
        """Fold the table's pending schema changes into its transaction (before other changes or the commit)."""
        update = self._schema_updates.pop(identifier, None)
        self._schema_steps.pop(identifier, None)
        if update is None:
            return
        try:
            update.commit()
        except (ValueError, KeyError, NotImplementedError) as exc:
            raise self._refusal("apply the schema changes", identifier, exc) from exc

    def _schema(self, identifier: Identifier, transaction: Transaction) -> Schema:
        """The table's schema including changes staged in this migration."""
        update = self._schema_updates.get(identifier)
        return update._apply() if update is not None else transaction.table_metadata.schema()

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
        if identifier in self._created:
            if if_not_exists:
                return
            raise InvalidOperationError(f"Cannot create table {self._label(identifier)}: this migration creates it.")
        if identifier not in self._gone and (
            identifier in self._pending or identifier in self._rename_targets or self._catalog.table_exists(identifier)
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
        transaction = self._placeholder_create(identifier, iceberg_schema, values)
        self._gone.discard(identifier)
        self._pending[identifier] = transaction
        self._queue.append(_Queued("table", identifier))
        self._created.add(identifier)
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
        self._pending.pop(identifier, None)
        self._queue = [item for item in self._queue if not (item.kind == "table" and item.identifier == identifier)]
        self._created.discard(identifier)
        self._schema_updates.pop(identifier, None)
        self._schema_steps.pop(identifier, None)

    def _placeholder_create(self, identifier: Identifier, schema: Schema, properties: dict[str, str]) -> Transaction:
        """A create transaction that exists only in memory: what the migration stages on a new table."""
        from pyiceberg.io.pyarrow import PyArrowFileIO
        from pyiceberg.partitioning import UNPARTITIONED_PARTITION_SPEC
        from pyiceberg.table import CreateTableTransaction, StagedTable
        from pyiceberg.table.metadata import new_table_metadata

        metadata = new_table_metadata(
            schema=schema,
            partition_spec=UNPARTITIONED_PARTITION_SPEC,
            sort_order=UNSORTED_SORT_ORDER,
            location=f"memory://placeholder/{self._label(identifier)}",
            properties=dict(properties),
        )
        staged = StagedTable(
            identifier=identifier, metadata=metadata, metadata_location="", io=PyArrowFileIO(), catalog=self._catalog
        )
        return CreateTableTransaction(staged)

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
        if identifier in self._created:
            # Created earlier in this migration and never committed: nothing reaches the catalog.
            self._forget(identifier)
            self._gone.add(identifier)
            return
        exists = identifier in self._rename_targets or (
            identifier not in self._gone and self._catalog.table_exists(identifier)
        )
        if not exists:
            if if_exists:
                return
            raise InvalidOperationError(f"Cannot drop table {self._label(identifier)}: it does not exist.")
        self._forget(identifier)  # changes staged on a table about to be dropped are moot
        self._queue.append(_Queued("drop", identifier, purge=purge))
        self._gone.add(identifier)
        self._rename_targets.discard(identifier)

    def rename_table(self, old: str, new: str) -> None:
        """Rename a table, or move it to another namespace (created if missing).

        The rename is staged like other changes; later changes to the table under its new name first
        commit what is staged so far.

        Raises:
            InvalidOperationError: The table does not exist or the new name is taken.
        """
        self._note_op(f"rename table {old} to {new}", "review")
        source, target = self.identifier(old), self.identifier(new)
        target_taken = target not in self._gone and (
            target in self._pending or target in self._rename_targets or self._catalog.table_exists(target)
        )
        if target_taken:
            raise InvalidOperationError(f"Cannot rename {self._label(source)} to {self._label(target)}: it exists.")
        if source in self._created:  # not in the catalog yet: it is simply created under the new name
            self._pending[target] = self._pending.pop(source)
            self._created.discard(source)
            self._created.add(target)
            if source in self._schema_updates:
                self._schema_updates[target] = self._schema_updates.pop(source)
                self._schema_steps[target] = self._schema_steps.pop(source, [])
            for item in self._queue:
                if item.kind == "table" and item.identifier == source:
                    item.identifier = target
            self._gone.discard(target)
            return
        exists = source in self._rename_targets or (source not in self._gone and self._catalog.table_exists(source))
        if not exists:
            raise InvalidOperationError(f"Cannot rename table {self._label(source)}: it does not exist.")
        self._queue.append(_Queued("rename", source, target))
        self._gone.add(source)
        self._gone.discard(target)
        self._rename_targets.discard(source)
        self._rename_targets.add(target)

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
        identifier, transaction = self._transaction(table)
        snapshot = transaction.table_metadata.current_snapshot()
        records = int(snapshot.summary.get("total-records", "0")) if snapshot and snapshot.summary else 0
        if records:
            raise InvalidOperationError(
                f"Cannot {what} to table {self._label(identifier)}: it has {records} row(s), which would have "
                "no value. Add the column as optional, backfill it, and keep it optional (Iceberg cannot make "
                "an optional column required)."
            )

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
