"""What a migration staged, in order, and how it reaches the catalog.

A :class:`CommitQueue` commits each table's transaction, drop and rename in order, announced to the run's
:class:`CommitJournal` with a receipt; an :class:`AtomicCommitJournal` takes the table changes in one commit.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal, Protocol

from pyiceberg.exceptions import NoSuchTableError
from pyiceberg.table.sorting import UNSORTED_SORT_ORDER

from iceberg_ops_provider.catalogs import ensure_namespace
from iceberg_ops_provider.core.atomic.changes import TableChange
from iceberg_ops_provider.errors import InvalidOperationError
from iceberg_ops_provider.history.intent import RECEIPT_PROPERTY, IntentAction
from iceberg_ops_provider.migration.touched import TouchedTables, stored_location

if TYPE_CHECKING:
    from pyiceberg.catalog import Catalog
    from pyiceberg.schema import Schema
    from pyiceberg.table import Transaction

__all__ = [
    "AtomicCommitJournal",
    "CommitJournal",
    "CommitQueue",
    "Queued",
    "placeholder_create",
    "separate_reason",
    "split_for_atomic",
]

Identifier = tuple[str, ...]


@contextmanager
def _missing(what: str, identifier: Identifier) -> Iterator[None]:
    try:
        yield
    except NoSuchTableError as exc:
        raise InvalidOperationError(f"Cannot {what} table {'.'.join(identifier)}: it does not exist.") from exc


class CommitJournal(Protocol):
    """What the runner is told before each commit of a migration (its intent record and lease check)."""

    def receipt(self, step: int) -> str:
        """The receipt the ``step``-th commit of this migration carries."""
        ...

    def before_commit(self, actions: list[IntentAction], *, complete: bool) -> None:
        """Called before ``actions`` are committed (``complete``: the body has finished); raising stops the commit."""
        ...


class AtomicCommitJournal(CommitJournal, Protocol):
    """A journal that commits a finished migration's table changes with its history record, in one commit."""

    def atomic_mode(self) -> str | None:
        """``sql-transaction`` or ``rest-transaction``, or ``None`` to commit the remaining changes one by one."""
        ...

    def commit_together(
        self, changes: list[TableChange], actions: list[IntentAction], *, outside: list[str], record: bool = True
    ) -> bool:
        """Commit ``changes`` (described by ``actions``) in one multi-table commit with the bookkeeping.

        ``outside`` names what was committed separately just before; without ``record`` the history
        record is not part of it (data steps follow, under an intent written before). Returns false,
        having committed nothing, when the catalog turned out unable to; raises when the commit failed
        or its outcome is unknown.
        """
        ...


@dataclass
class Queued:
    """One staged change, in the order the migration made it: a table's transaction, a drop or a rename."""

    kind: Literal["table", "drop", "rename"]
    identifier: Identifier
    target: Identifier | None = None
    purge: bool = False


def split_for_atomic(
    queue: list[Queued], created: set[Identifier], *, creates_inside: bool
) -> tuple[list[Queued], list[Queued]]:
    """The queued changes that must be committed on their own, in order, and those one atomic commit can take.

    Drops, renames (and creations, where the multi-table commit cannot create) commit on their own, and so
    does a table's change that a later drop or rename names.
    """
    outside: list[Queued] = []
    inside: list[Queued] = []
    for index, item in enumerate(queue):
        later = queue[index + 1 :]
        alone = any(other.kind != "table" and item.identifier in (other.identifier, other.target) for other in later)
        alone = alone or item.kind != "table" or (not creates_inside and item.identifier in created)
        (outside if alone else inside).append(item)
    return outside, inside


_SEPARATE = {
    "drop": ("dropped", "a drop"),
    "rename": ("renamed", "a rename"),
    "create": ("created", "a table created on this catalog"),
    "table": ("changed", "a change to a table that is then dropped or renamed"),
}


def separate_reason(committed: list[tuple[Queued, bool]], namespaces: list[str]) -> str:
    """Why a finished migration whose every change commits on its own was committed one commit at a time.

    ``it dropped table sales.orders: a drop commits on its own, outside the all-or-nothing commit``.
    ``committed`` holds the changes committed, in order, each with whether it created its table.
    """
    did: list[str] = []
    kinds: list[str] = []
    for item, created in committed:
        name = ".".join(item.identifier)
        kind = "create" if created and item.kind == "table" else item.kind
        verb, what = _SEPARATE[kind]
        did.append(f"{verb} table {name}" + (f" to {'.'.join(item.target or ())}" if kind == "rename" else ""))
        kinds.append(what)
    did += [f"created namespace {namespace}" for namespace in namespaces]
    kinds += ["a new namespace"] * len(namespaces)
    unique = list(dict.fromkeys(kinds))
    if len(unique) == 1:
        how = f"{unique[0]} commits on its own"
    else:
        how = f"{', '.join(unique[:-1])} and {unique[-1]} each commit on their own"
    listed = ", ".join(did[:-1]) + (" and " if len(did) > 1 else "") + did[-1]
    return f"it {listed}: {how}, outside the all-or-nothing commit"


def placeholder_create(catalog: Catalog, identifier: Identifier, schema: Schema, properties: dict[str, str]) -> Any:
    """A create-table transaction that exists only in memory: what a migration stages on a new table.

    Its UUID is derived from the table's name, so two plans of one migration are the same text.
    """
    import uuid

    from pyiceberg.io.pyarrow import PyArrowFileIO
    from pyiceberg.partitioning import UNPARTITIONED_PARTITION_SPEC
    from pyiceberg.table import CreateTableTransaction, StagedTable
    from pyiceberg.table.metadata import new_table_metadata

    metadata = new_table_metadata(
        schema=schema,
        partition_spec=UNPARTITIONED_PARTITION_SPEC,
        sort_order=UNSORTED_SORT_ORDER,
        location=f"memory://placeholder/{'.'.join(identifier)}",
        properties=dict(properties),
        table_uuid=uuid.uuid5(uuid.NAMESPACE_URL, f"iceberg-ops:placeholder:{'.'.join(identifier)}"),
    )
    staged = StagedTable(
        identifier=identifier, metadata=metadata, metadata_location="", io=PyArrowFileIO(), catalog=catalog
    )
    return CreateTableTransaction(staged)


class CommitQueue:
    """The changes one migration staged and has not committed yet, and what it committed so far.

    ``touched`` notes the net change of every committed table; ``fold`` is called with a table's
    identifier right before its transaction is committed (its pending schema changes).
    """

    def __init__(
        self,
        catalog: Catalog,
        journal: CommitJournal | None,
        touched: TouchedTables,
        *,
        dry_run: bool = False,
        fold: Callable[[Identifier], None] = lambda identifier: None,
    ) -> None:
        self.catalog = catalog
        self.journal = journal
        self.touched = touched
        self.dry_run = dry_run
        self._fold = fold
        self.pending: dict[Identifier, Transaction] = {}  # each staged table's transaction (new ones: placeholders)
        self.items: list[Queued] = []  # the staged changes, in order
        self.gone: set[Identifier] = set()  # tables a staged drop or rename removes
        self.rename_targets: set[Identifier] = set()  # names a staged rename creates
        self.created: set[Identifier] = set()  # staged tables that do not exist yet
        self.steps = 0
        self.committed: list[str] = []  # see MigrationContext.committed
        self.created_namespaces: list[str] = []
        self.separate: list[str] = []
        """What reached the catalog one commit at a time, in order (``sales.old (drop)``)."""
        self.dry_committed: list[dict[str, Any]] = []
        """In a dry run: what early commits (``ctx.commit()``, a change after a rename) would have sent."""
        self.not_atomic: str | None = None
        """Why this migration's changes could not be one all-or-nothing commit although the journal could make one."""

    @staticmethod
    def label(identifier: Identifier) -> str:
        """The dotted name of a table."""
        return ".".join(identifier)

    def __bool__(self) -> bool:
        return bool(self.items)

    def stage_table(self, identifier: Identifier, transaction: Transaction, *, create: bool = False) -> None:
        """Queue a table's transaction: its first change in this migration, or (``create``) its creation."""
        if create:
            self.gone.discard(identifier)
            self.created.add(identifier)
        self.pending[identifier] = transaction
        self.items.append(Queued("table", identifier))

    def stage_drop(self, identifier: Identifier, *, purge: bool) -> None:
        """Queue a drop of an existing table (what was staged on it is forgotten first)."""
        self.forget(identifier)
        self.items.append(Queued("drop", identifier, purge=purge))
        self.gone.add(identifier)
        self.rename_targets.discard(identifier)

    def stage_rename(self, source: Identifier, target: Identifier) -> None:
        """Queue a rename of an existing table."""
        self.items.append(Queued("rename", source, target))
        self.gone.add(source)
        self.gone.discard(target)
        self.rename_targets.discard(source)
        self.rename_targets.add(target)

    def rename_created(self, source: Identifier, target: Identifier) -> None:
        """Give a table this migration creates (not in the catalog yet) another name."""
        self.pending[target] = self.pending.pop(source)
        self.created.discard(source)
        self.created.add(target)
        for item in self.items:
            if item.kind == "table" and item.identifier == source:
                item.identifier = target
        self.gone.discard(target)

    def forget(self, identifier: Identifier) -> None:
        """Drop what is staged for one table (its queued transaction; a creation is forgotten too)."""
        self.pending.pop(identifier, None)
        self.items = [item for item in self.items if not (item.kind == "table" and item.identifier == identifier)]
        self.created.discard(identifier)

    def discard(self) -> None:
        """Forget everything staged and not yet committed."""
        for staged in (self.pending, self.items, self.gone, self.rename_targets, self.created):
            staged.clear()

    def announce(self, actions: list[IntentAction], *, complete: bool = False) -> None:
        """Tell the journal what is about to be committed (or, with no journal, nothing)."""
        if self.journal is not None:
            self.journal.before_commit(actions, complete=complete)

    def reached_directly(self, what: str) -> None:
        """Note (in the intent) that the migration reached ``what`` itself: its writes there are not tracked."""
        self.announce([IntentAction(what, "direct")])
        self.separate.append(f"{what} (reached directly)")
        self.not_atomic = self.not_atomic or f"it reached {what} directly"

    def commit(self, *, complete: bool, why: str | None = None, then: list[IntentAction] | None = None) -> None:
        """Announce every queued change (the intent), then commit them one by one in order.

        Once the body has finished (``complete``), an atomic journal takes the table changes in one commit
        (:meth:`_commit_atomic`). ``why`` says what made the migration commit before finishing. ``then``
        are the data steps that run after these changes: the intent lists them before anything commits,
        and the history record waits for them.
        """
        if self.dry_run:
            if not complete and self.items:
                self._commit_dry()
            return
        then = then or []
        atomic_mode = getattr(self.journal, "atomic_mode", None)
        mode = atomic_mode() if complete and atomic_mode is not None else None
        if mode is not None and self._commit_atomic(mode, then):
            return
        # Everything left commits one by one. Could an all-or-nothing commit have taken it? Then say
        # what it did instead (drops, renames, ...: each a commit of its own).
        only_separate = bool(self.items) and complete and mode is not None
        if self.items and not complete:
            self.not_atomic = self.not_atomic or f"it committed before its body finished ({why or 'early'})"
        elif not self.items and complete and mode is not None and not self.separate and not then:
            self.not_atomic = self.not_atomic or "it changes no table"
        done = [(item, item.identifier in self.created) for item in self.items]
        namespaces_before = len(self.created_namespaces)
        actions = [self._action(item, self.steps + offset) for offset, item in enumerate(self.items, 1)]
        self.announce(actions + then, complete=complete)
        for item in list(self.items):
            self._commit_item(item)
        self.gone.clear()
        self.rename_targets.clear()
        if only_separate:
            self.not_atomic = self.not_atomic or separate_reason(done, self.created_namespaces[namespaces_before:])

    def _commit_dry(self) -> None:
        """A dry run's early commit: note what it would send, let a plan's catalog take it in, forget it."""
        from iceberg_ops_provider.migration.staged_changes import staged_changes

        self.dry_committed.extend(staged_changes(self, self._fold, self.catalog))
        apply_queue = getattr(self.catalog, "apply_queue", None)
        if apply_queue is not None:
            apply_queue(self, self._fold)
        self.discard()

    def _action(self, item: Queued, step: int) -> IntentAction:
        """The intent entry of one queued change, the ``step``-th commit of this migration."""
        label = self.label(item.identifier)
        if item.kind == "drop":
            return IntentAction(label, "drop")
        if item.kind == "rename":
            return IntentAction(label, "rename", to=self.label(item.target or ()))
        kind = "create" if item.identifier in self.created else "commit"
        return IntentAction(label, kind, receipt=self.journal.receipt(step) if self.journal else None)

    def _commit_atomic(self, mode: str, then: list[IntentAction]) -> bool:
        """Commit the table changes in one atomic commit, what cannot join it first; false when there are none."""
        journal: Any = self.journal
        outside, inside = split_for_atomic(self.items, self.created, creates_inside=mode == "sql-transaction")
        if not inside:
            return False
        actions = [self._action(item, self.steps + offset) for offset, item in enumerate(outside + inside, 1)]
        if outside or then:  # these commit one by one, or data steps follow: the intent lists everything
            self.announce(actions + then, complete=True)
        namespaces_before = len(self.created_namespaces)
        for item in outside:
            self._commit_item(item)
        prepared = [(item, *self._prepare_table(item)) for item in inside]
        outside_labels = [action.label() for action in actions[: len(outside)]]
        outside_labels += [f"create namespace {name}" for name in self.created_namespaces[namespaces_before:]]
        changes = [TableChange.of(transaction) for _, transaction, _ in prepared]
        inside_actions = actions[len(outside) :]
        if not journal.commit_together(changes, inside_actions, outside=outside_labels, record=not then):
            if not outside:  # the catalog cannot after all: per-table commits under an intent
                self.announce(inside_actions, complete=True)
            for (item, transaction, created), action in zip(prepared, inside_actions, strict=True):
                self.announce([action])
                transaction.commit_transaction()
                self._table_committed(item, created)
                self.separate.append(action.label())
        else:
            for item, _, created in prepared:
                self._table_committed(item, created)
        self.items.clear()
        self.gone.clear()
        self.rename_targets.clear()
        return True

    def _prepare_table(self, item: Queued) -> tuple[Transaction, bool]:
        """The transaction that commits a queued table change (receipt included), and whether it creates the table."""
        identifier = item.identifier
        transaction = self.pending[identifier]
        self._fold(identifier)
        self.steps += 1
        created = identifier in self.created
        if created:
            transaction = self._create_for_real(identifier, transaction)
        if self.journal is not None:
            transaction.set_properties({RECEIPT_PROPERTY: self.journal.receipt(self.steps)})
        self.pending.pop(identifier, None)
        self.created.discard(identifier)
        return transaction, created

    def _table_committed(self, item: Queued, created: bool) -> None:
        (self.touched.created if created else self.touched.altered)(self.label(item.identifier))
        self._record(item.identifier)

    def _commit_item(self, item: Queued) -> None:
        """Commit one queued change, announced first (listed already: this checks the lock still holds)."""
        identifier = item.identifier
        action = self._action(item, self.steps + 1)
        self.announce([action])
        if item.kind == "table":
            transaction, created = self._prepare_table(item)
            transaction.commit_transaction()
            self._table_committed(item, created)
        elif item.kind == "drop":
            self.steps += 1
            location = stored_location(self.catalog, identifier)
            with _missing("drop", identifier):
                (self.catalog.purge_table if item.purge else self.catalog.drop_table)(identifier)
            self.touched.dropped(self.label(identifier), location)
            self._record(identifier)
        else:
            target = item.target or ()
            self.steps += 1
            self._ensure_namespace(target[:-1])
            with _missing("rename", identifier):
                self.catalog.rename_table(identifier, target)
            self.touched.renamed(self.label(identifier), self.label(target))
            self._record(identifier)
        self.separate.append(action.label())
        self.items = [queued for queued in self.items if queued is not item]

    def _create_for_real(self, identifier: Identifier, placeholder: Transaction) -> Transaction:
        """Create the namespace if missing, then stage the table in the placeholder's final shape."""
        self._ensure_namespace(identifier[:-1])
        metadata = placeholder.table_metadata
        return self.catalog.create_table_transaction(
            identifier,
            metadata.schema(),
            partition_spec=metadata.spec(),
            sort_order=metadata.sort_order(),
            properties={**metadata.properties, "format-version": str(metadata.format_version)},
        )

    def _ensure_namespace(self, namespace: Identifier) -> None:
        if not self.catalog.namespace_exists(namespace):
            ensure_namespace(self.catalog, namespace)
            self.created_namespaces.append(".".join(namespace))

    def _record(self, identifier: Identifier) -> None:
        label = self.label(identifier)
        if label not in self.committed:
            self.committed.append(label)
