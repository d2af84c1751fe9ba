"""MigrationContext: what a migration's ``upgrade()``/``downgrade()`` uses to change tables.

Changes to one table are staged in one PyIceberg transaction and reach the catalog as one atomic
commit when the migration returns (:meth:`MigrationContext.finish`, called by the runner). If the
migration raises, staged changes are discarded, so a failed migration leaves its tables as they were.
Catalog-level operations (``drop_table``, ``rename_table``) are staged in order with the rest;
:meth:`MigrationContext.load_table` and :meth:`MigrationContext.commit` first commit what is pending.
Namespaces that a new table needs are created when that table is committed, never while staging.

This module holds the operations on whole tables, their partition spec, sort order and properties;
the column operations are :class:`~iceberg_ops_provider.migration.columns.ColumnOperations`. How an
operation reaches the table's transaction (names, the meta-namespace guard, PyIceberg's refusals)
lives in :mod:`~iceberg_ops_provider.migration.staging`. What is staged, and how it is committed
(announced to the run's :class:`CommitJournal`, each table's commit carrying a receipt, or all of a
finished migration's table changes in one commit with its history record where the runner's
:class:`AtomicCommitJournal` can), lives in :mod:`~iceberg_ops_provider.migration.commit_queue`;
pending schema changes in :mod:`~iceberg_ops_provider.migration.schema_changes`.

Bare table names resolve in the runner's namespace; a dotted name (``"finance.orders"``) addresses
another namespace. Nested columns are given as dotted paths (``"address.city"``) or tuples.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any

import pyarrow as pa
from pyiceberg.exceptions import NoSuchTableError
from pyiceberg.schema import Schema
from pyiceberg.table.sorting import UNSORTED_SORT_ORDER, SortDirection
from pyiceberg.table.update import AddSortOrderUpdate, AssertDefaultSortOrderId, SetDefaultSortOrderUpdate

from iceberg_ops_provider.core.types import arrow_to_iceberg_schema
from iceberg_ops_provider.errors import DryRunLimit, InvalidOperationError
from iceberg_ops_provider.migration.columns import ColumnOperations, TypeLike
from iceberg_ops_provider.migration.commit_queue import AtomicCommitJournal, CommitJournal, placeholder_create
from iceberg_ops_provider.migration.risks import risk_of
from iceberg_ops_provider.migration.schema_changes import ColumnPath
from iceberg_ops_provider.migration.staged_changes import staged_changes
from iceberg_ops_provider.migration.staging import Identifier, TableStaging
from iceberg_ops_provider.migration.touched import TouchedTables
from iceberg_ops_provider.migration.transforms import parse_partition_expr, parse_sort_field

if TYPE_CHECKING:
    from pyiceberg.catalog import Catalog
    from pyiceberg.table import Table, Transaction
    from pyiceberg.table.update.spec import UpdateSpec

__all__ = ["AtomicCommitJournal", "ColumnPath", "CommitJournal", "DryRunLimit", "MigrationContext", "TypeLike"]


def _property_value(key: str, value: object, where: str) -> str:
    """A table property's value as Iceberg keeps it (text): booleans as ``true``/``false``, numbers and paths as text.

    Raises:
        InvalidOperationError: ``None``, a container or another object; names ``key`` and ``where``.
    """
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str | int | float | os.PathLike):
        return os.fspath(value) if isinstance(value, os.PathLike) else str(value)
    raise InvalidOperationError(
        f"Property {key!r} of {where} is {value!r} ({type(value).__name__}); "
        "values must be strings, numbers, booleans or paths."
    )


class MigrationContext(ColumnOperations):
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
        self._staging = TableStaging(catalog, namespace, journal, meta_namespace=meta_namespace, dry_run=dry_run)
        self.operations: list[dict[str, str]] = self._staging.operations
        """What the migration asked for, in order, each with its risk (``safe``, ``review``, ``destructive``)."""
        self.touched: TouchedTables = self._staging.touched
        """The net change of every table this migration reached (the runner's recording, when one is open)."""

    @property
    def committed(self) -> list[str]:
        """Tables whose changes already reached the catalog (commits and immediate operations), in order."""
        return self._staging.commits.committed

    @property
    def created_namespaces(self) -> list[str]:
        """Namespaces created by this migration's commits."""
        return self._staging.commits.created_namespaces

    @property
    def separate_commits(self) -> list[str]:
        """What reached the catalog one commit at a time, in order, then the namespaces created.

        With a journal that commits a finished migration's table changes all at once, these are what
        fell outside that commit (drops, renames, and so on); otherwise every commit of the migration.
        """
        return [*self._staging.commits.separate, *(f"create namespace {name}" for name in self.created_namespaces)]

    def pending_changes(self, *, with_receipt: bool = True) -> list[dict[str, Any]]:
        """What committing now would send the catalog: catalog operations and each table's requirements and updates.

        Named and shaped as the REST catalog specification names them (see
        :mod:`~iceberg_ops_provider.migration.staged_changes`); a plan document shows these per step.
        ``with_receipt`` adds the update the runner makes to every table it commits.
        """
        staging = self._staging
        changes = staged_changes(staging.commits, staging.schemas.fold, staging.catalog, with_receipt=with_receipt)
        return [*staging.commits.dry_committed, *changes]

    @property
    def not_atomic_reason(self) -> str | None:
        """Why this migration's changes went table by table although the journal could commit them at once."""
        return self._staging.commits.not_atomic

    # -- what a migration can read --------------------------------------------------------------

    @property
    def catalog(self) -> Catalog:
        """The PyIceberg catalog, for anything the context does not cover.

        What a migration changes through it is its own affair: the runner cannot see those changes,
        so a migration that used it and was interrupted is reported as possibly partial, not retried.
        """
        self._staging.mark_direct("the catalog (ctx.catalog)")
        return self._staging.catalog

    @property
    def namespace(self) -> str:
        """The runner's namespace."""
        return self._staging.namespace

    def identifier(self, name: str) -> Identifier:
        """The full identifier of a table name: bare names resolve in :attr:`namespace`.

        Raises:
            InvalidOperationError: A malformed name, or a table of the meta-namespace (history and locks).
        """
        return self._staging.identifier(name)

    def load_table(self, name: str) -> Table:
        """Load a table to read it or write data to it, after committing everything staged so far.

        Data written through the returned table (appends, overwrites, deletes) is the migration's own
        commit: the runner cannot see it, so a migration interrupted after calling this is reported
        as possibly partial rather than retried (see the recovery documentation).

        Raises:
            InvalidOperationError: The table does not exist.
        """
        identifier = self.identifier(name)
        self._staging.mark_direct(self._staging.label(identifier))
        self._staging.commits.commit(complete=False, why=f"ctx.load_table({name!r})")
        try:
            table = self._staging.catalog.load_table(identifier)
        except NoSuchTableError as exc:
            raise InvalidOperationError(f"Table {self._staging.label(identifier)} does not exist.") from exc
        self.touched.written(self._staging.label(identifier))
        return table

    # -- staging and committing -----------------------------------------------------------------

    @property
    def has_pending_changes(self) -> bool:
        """Whether anything is staged and not yet committed."""
        return bool(self._staging.commits)

    def commit(self) -> None:
        """Commit everything staged so far, in the order it was staged (one atomic commit per table).

        The runner commits what is left when the migration returns; call this only to make changes
        visible to code later in the same migration.
        """
        self._staging.commits.commit(complete=False, why="ctx.commit()")

    def finish(self) -> None:
        """Commit what the migration staged, once it has returned (called by the runner, not by migrations)."""
        self._staging.commits.commit(complete=True)

    def discard(self) -> None:
        """Forget everything staged and not yet committed."""
        self._staging.discard()

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
        self._staging.note(f"create table {name}", risk_of("create_table"))
        identifier = self.identifier(name)
        commits = self._staging.commits
        if identifier in commits.created:
            if if_not_exists:
                return
            raise InvalidOperationError(
                f"Cannot create table {self._staging.label(identifier)}: this migration creates it."
            )
        if identifier not in commits.gone and (
            identifier in commits.pending
            or identifier in commits.rename_targets
            or self._staging.catalog.table_exists(identifier)
        ):
            if if_not_exists:
                return
            raise InvalidOperationError(f"Cannot create table {self._staging.label(identifier)}: it already exists.")
        if isinstance(schema, pa.Schema):
            iceberg_schema = arrow_to_iceberg_schema(schema)
        elif isinstance(schema, Schema):
            iceberg_schema = schema
        else:
            raise InvalidOperationError(
                f"The schema of {self._staging.label(identifier)} must be a pyarrow.Schema or a pyiceberg Schema, "
                f"got {type(schema).__name__}."
            )
        values = {
            key: _property_value(key, value, f"table {self._staging.label(identifier)}")
            for key, value in (properties or {}).items()
        }
        commits.stage_table(
            identifier, placeholder_create(self._staging.catalog, identifier, iceberg_schema, values), create=True
        )
        try:
            if partition_by:
                self.add_partition_fields(name, [partition_by] if isinstance(partition_by, str) else list(partition_by))
            if sort_by:
                self.set_sort_order(name, [sort_by] if isinstance(sort_by, str) else list(sort_by))
        except BaseException:
            self._staging.forget(identifier)
            raise

    def drop_table(self, name: str, purge: bool = False, if_exists: bool = False) -> None:
        """Drop a table; with ``purge=True`` also delete its data and metadata files.

        Args:
            name: Table name, bare or dotted.
            purge: Also delete the table's files.
            if_exists: Do nothing when the table does not exist (for re-runnable migrations).

        Raises:
            InvalidOperationError: The table does not exist (unless ``if_exists``).
        """
        self._staging.note(f"drop table {name}", self._staging.drop_risk("drop_table", name))
        identifier = self.identifier(name)
        commits = self._staging.commits
        if identifier in commits.created:
            # Created earlier in this migration and never committed: nothing reaches the catalog.
            self._staging.forget(identifier)
            commits.gone.add(identifier)
            return
        exists = identifier in commits.rename_targets or (
            identifier not in commits.gone and self._staging.catalog.table_exists(identifier)
        )
        if not exists:
            if if_exists:
                return
            raise InvalidOperationError(f"Cannot drop table {self._staging.label(identifier)}: it does not exist.")
        self._staging.schemas.forget(identifier)  # changes staged on a table about to be dropped are moot
        commits.stage_drop(identifier, purge=purge)

    def rename_table(self, old: str, new: str) -> None:
        """Rename a table, or move it to another namespace (created if missing).

        The rename is staged like other changes; later changes to the table under its new name first
        commit what is staged so far.

        Raises:
            InvalidOperationError: The table does not exist or the new name is taken.
        """
        self._staging.note(f"rename table {old} to {new}", risk_of("rename_table"))
        source, target = self.identifier(old), self.identifier(new)
        commits = self._staging.commits
        target_taken = target not in commits.gone and (
            target in commits.pending or target in commits.rename_targets or self._staging.catalog.table_exists(target)
        )
        if target_taken:
            raise InvalidOperationError(
                f"Cannot rename {self._staging.label(source)} to {self._staging.label(target)}: it exists."
            )
        if source in commits.created:  # not in the catalog yet: it is simply created under the new name
            commits.rename_created(source, target)
            self._staging.schemas.rename(source, target)
            return
        exists = source in commits.rename_targets or (
            source not in commits.gone and self._staging.catalog.table_exists(source)
        )
        if not exists:
            raise InvalidOperationError(f"Cannot rename table {self._staging.label(source)}: it does not exist.")
        commits.stage_rename(source, target)

    # -- partition spec and sort order ----------------------------------------------------------

    def add_partition_field(self, table: str, expr: str, name: str | None = None) -> None:
        """Add a partition field, e.g. ``"day(ts)"`` or ``"bucket(16, id)"`` (existing files keep their spec)."""
        self._staging.note(f"partition {table} by {expr}", risk_of("add_partition_field"))
        parsed = parse_partition_expr(expr)
        self._staging.spec_change(
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

        self._staging.spec_change(table, "add partition fields", change)

    def drop_partition_field(self, table: str, name: str) -> None:
        """Remove a partition field by its name (see ``table.spec()``)."""
        self._staging.note(f"drop partition field {table}.{name}", risk_of("drop_partition_field"))
        self._staging.spec_change(table, f"drop partition field {name!r}", lambda update: update.remove_field(name))

    def rename_partition_field(self, table: str, old: str, new: str) -> None:
        """Rename a partition field."""
        self._staging.note(f"rename partition field {table}.{old}", risk_of("rename_partition_field"))
        self._staging.spec_change(
            table, f"rename partition field {old!r}", lambda update: update.rename_field(old, new)
        )

    def set_sort_order(self, table: str, fields: Iterable[str] | str) -> None:
        """Replace the table's sort order; an empty list makes it unsorted.

        Args:
            table: Table name.
            fields: Sort fields such as ``["ts desc", "day(ts) asc nulls last", "id"]``.
        """
        self._staging.note(f"set the sort order of {table}", risk_of("set_sort_order"))
        parsed = [parse_sort_field(fields)] if isinstance(fields, str) else [parse_sort_field(f) for f in fields]

        def build(transaction: Transaction) -> None:
            metadata = transaction.table_metadata
            for item in parsed:
                _check_sortable(metadata.schema(), item.column)
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

        self._staging.staged(table, "set the sort order", build)

    # -- properties -----------------------------------------------------------------------------

    def set_properties(self, table: str, properties: Mapping[str, Any] | None = None, /, **props: Any) -> None:
        """Set table properties, as keywords or (for dotted keys) a mapping.

        Example:
            ``ctx.set_properties("orders", {"write.target-file-size-bytes": 134217728}, owner="sales")``
        """
        self._staging.note(f"set properties of {table}", risk_of("set_properties"))
        merged = {**(properties or {}), **props}
        if not merged:
            raise InvalidOperationError("set_properties needs at least one property.")
        values = {key: _property_value(key, value, f"table {table!r}") for key, value in merged.items()}
        self._staging.staged(table, "set properties", lambda transaction: transaction.set_properties(values))

    def remove_properties(self, table: str, *keys: str) -> None:
        """Remove table properties.

        Raises:
            InvalidOperationError: A key is not set on the table.
        """
        self._staging.note(f"remove properties of {table}", risk_of("remove_properties"))
        identifier, transaction = self._staging.transaction(table)
        properties = self._staging.schemas.metadata(identifier, transaction).properties  # with staged ones
        missing = [key for key in keys if key not in properties]
        if missing:
            raise InvalidOperationError(
                f"Cannot remove properties {missing} from {self._staging.label(identifier)}: not set."
            )
        self._staging.staged(table, "remove properties", lambda transaction: transaction.remove_properties(*keys))


def _check_sortable(schema: Schema, column: str) -> None:
    """Refuse, naming the column, a sort on a struct, list or map (Iceberg sorts by primitive columns only)."""
    try:
        field = schema.find_field(column)
    except ValueError:
        return  # PyIceberg names the missing column itself
    if not field.field_type.is_primitive:
        raise ValueError(
            f"cannot sort by {column!r}: it is a {field.field_type} column, and Iceberg sorts by primitive columns "
            f"only; sort by one of its fields (e.g. '{column}.<field>') instead"
        )
