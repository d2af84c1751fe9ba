"""MigrationContext: what a migration's ``upgrade()``/``downgrade()`` uses to change tables.

Each table's changes are staged in one transaction and committed when the migration returns (discarded if it
raises); names resolve in the runner's namespace unless dotted (docs/migrations.md, "What ``ctx`` offers").
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any

import pyarrow as pa
from pyiceberg.exceptions import NoSuchTableError
from pyiceberg.schema import Schema

from iceberg_ops_provider.errors import DryRunLimit, InvalidOperationError
from iceberg_ops_provider.migration import column_operations as columns
from iceberg_ops_provider.migration import data_operations as data
from iceberg_ops_provider.migration import table_operations as tables
from iceberg_ops_provider.migration.column_operations import TypeLike
from iceberg_ops_provider.migration.commit_queue import AtomicCommitJournal, CommitJournal
from iceberg_ops_provider.migration.data_run import finish_with_data
from iceberg_ops_provider.migration.operation import Operation
from iceberg_ops_provider.migration.schema_changes import ColumnPath
from iceberg_ops_provider.migration.staged_changes import staged_changes
from iceberg_ops_provider.migration.staging import Identifier, TableStaging
from iceberg_ops_provider.migration.touched import TouchedTables

if TYPE_CHECKING:
    from pyiceberg.catalog import Catalog
    from pyiceberg.expressions import BooleanExpression
    from pyiceberg.table import Table

    from iceberg_ops_provider.data_steps import StepResult

__all__ = ["AtomicCommitJournal", "ColumnPath", "CommitJournal", "DryRunLimit", "MigrationContext", "TypeLike"]


class MigrationContext:
    """The per-migration API over one catalog and namespace: tables, schemas, specs, sort orders, properties.

    Args:
        catalog: The catalog to migrate.
        namespace: The namespace bare table names resolve in (``"sales"`` or ``"a.b"``).
        journal: Told before every commit (the runner passes one; standalone use needs none).
        meta_namespace: Where migration history and locks live: a migration may not touch it.
        dry_run: Stage and record what the migration asks for, but commit nothing (``plan``); reaching
            tables directly (``load_table``, ``catalog``) stops a dry run with :class:`DryRunLimit`.
        resuming: The migration stopped in its data steps before: its schema changes are committed, so
            only its data steps run (each continues from its last committed unit).
    """

    def __init__(
        self,
        catalog: Catalog,
        namespace: str,
        journal: CommitJournal | None = None,
        *,
        meta_namespace: str | None = None,
        dry_run: bool = False,
        resuming: bool = False,
        restore_point: tuple[str, str, bool] | None = None,
    ) -> None:
        self._staging = TableStaging(catalog, namespace, journal, meta_namespace=meta_namespace, dry_run=dry_run)
        self._staging.resuming = resuming
        self._staging.restore_point = restore_point
        self.data_results: list[StepResult] = []
        """What each data step did (rows, files, the snapshot it read), once :meth:`finish` ran them."""
        self.operations: list[dict[str, Any]] = self._staging.operations
        """What the migration asked for, in order, each with its risk (``safe``, ``review``, ``data``, ``destructive``).

        In a dry run, :meth:`finish` adds each data operation's ``estimate`` (``plan``'s numbers).
        """
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
        """What reached the catalog one commit at a time (outside an all-or-nothing commit), then namespaces created."""
        return [*self._staging.commits.separate, *(f"create namespace {name}" for name in self.created_namespaces)]

    def pending_changes(self, *, with_receipt: bool = True) -> list[dict[str, Any]]:
        """What committing now would send the catalog, as the REST specification names it (see :mod:`.staged_changes`).

        ``with_receipt`` adds the update the runner makes to every table it commits.
        """
        staging = self._staging
        changes = staged_changes(staging.commits, staging.schemas.fold, staging.catalog, with_receipt=with_receipt)
        return [*staging.commits.dry_committed, *changes]

    @property
    def not_atomic_reason(self) -> str | None:
        """Why this migration's changes went table by table although the journal could commit them at once."""
        return self._staging.commits.not_atomic

    @property
    def catalog(self) -> Catalog:
        """The PyIceberg catalog, for anything the context does not cover.

        The runner cannot see changes made through it: an interrupted migration that used it is reported
        as possibly partial, not retried.
        """
        self._staging.mark_direct("the catalog (ctx.catalog)")
        return self._staging.catalog

    @property
    def namespace(self) -> str:
        """The runner's namespace."""
        return self._staging.namespace

    def identifier(self, name: str) -> Identifier:
        """The full identifier of a table name (bare: in :attr:`namespace`); no malformed or meta-namespace names."""
        return self._staging.identifier(name)

    def load_table(self, name: str) -> Table:
        """Load a table to read or write, after committing everything staged so far.

        The runner cannot see data written through it: an interrupted migration that called this is
        reported as possibly partial rather than retried.
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

    @property
    def has_pending_changes(self) -> bool:
        """Whether anything is staged and not yet committed."""
        return bool(self._staging.commits)

    def commit(self) -> None:
        """Commit everything staged so far, in order: only to make changes visible to later code of the migration."""
        self._staging.commits.commit(complete=False, why="ctx.commit()")

    def finish(self) -> None:
        """Commit what the migration staged, then run its data steps (called by the runner, not by migrations)."""
        if self._staging.data:
            self.data_results = finish_with_data(self._staging)
        else:
            self._staging.commits.commit(complete=True)

    def discard(self) -> None:
        """Forget everything staged and not yet committed."""
        self._staging.discard()

    def _stage(self, operation: Operation) -> None:
        operation.stage(self._staging)

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

        It is created when the migration commits, in its final shape (later changes in the same migration
        included), so it starts with one schema, spec and sort order.

        Args:
            name: Table name, bare or dotted.
            schema: An Arrow schema (non-nullable fields become required) or a PyIceberg ``Schema``.
            partition_by: Partition expressions, e.g. ``["day(ts)", "bucket(16, id)"]``.
            sort_by: Sort fields, e.g. ``["ts desc", "id"]``.
            properties: Table properties (strings, numbers, booleans or paths).
            if_not_exists: Do nothing when the table already exists.

        Raises:
            InvalidOperationError: The table exists (unless ``if_not_exists``), or a partition/sort
                expression is invalid.
            UnsupportedTypeError: An Arrow column type Iceberg cannot hold.
        """
        partitioned, ordered = _strings(partition_by), _strings(sort_by)
        self._stage(tables.CreateTable(name, schema, partitioned, ordered, properties or {}, if_not_exists))

    def drop_table(self, name: str, purge: bool = False, if_exists: bool = False) -> None:
        """Drop a table; with ``purge=True`` also its data and metadata files (a missing one: unless ``if_exists``)."""
        self._stage(tables.DropTable(name, purge=purge, if_exists=if_exists))

    def rename_table(self, old: str, new: str) -> None:
        """Rename a table, or move it to another namespace (created if missing).

        Later changes to the table under its new name first commit what is staged so far.
        """
        self._stage(tables.RenameTable(old, new))

    def add_partition_field(self, table: str, expr: str, name: str | None = None) -> None:
        """Add a partition field, e.g. ``"day(ts)"`` or ``"bucket(16, id)"`` (existing files keep their spec)."""
        self._stage(tables.AddPartitionField(table, expr, name))

    def add_partition_fields(self, table: str, exprs: Iterable[str]) -> None:
        """Add several partition fields in one spec change."""
        if not self._staging.resuming:  # a resumed migration's schema changes are committed already
            tables.add_partition_fields(self._staging, table, exprs)

    def drop_partition_field(self, table: str, name: str) -> None:
        """Remove a partition field by its name (see ``table.spec()``)."""
        self._stage(tables.DropPartitionField(table, name))

    def rename_partition_field(self, table: str, old: str, new: str) -> None:
        """Rename a partition field."""
        self._stage(tables.RenamePartitionField(table, old, new))

    def set_sort_order(self, table: str, fields: Iterable[str] | str) -> None:
        """Replace the table's sort order (``["ts desc", "day(ts) asc nulls last", "id"]``); none: unsorted."""
        self._stage(tables.SetSortOrder(table, _strings(fields)))

    def set_properties(self, table: str, properties: Mapping[str, Any] | None = None, /, **props: Any) -> None:
        """Set table properties, as keywords or (for dotted keys) a mapping.

        ``ctx.set_properties("orders", {"write.target-file-size-bytes": 134217728}, owner="sales")``
        """
        self._stage(tables.SetProperties(table, {**(properties or {}), **props}))

    def remove_properties(self, table: str, *keys: str) -> None:
        """Remove table properties (``InvalidOperationError`` when a key is not set)."""
        self._stage(tables.RemoveProperties(table, keys))

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
        """Add a column, optionally placed first, or before/after another column (at most one of them).

        A required column can only be added to a table with no rows (existing rows would have no value).
        """
        self._stage(columns.AddColumn(table, name, type, required, doc, after, first, before, if_not_exists))

    def drop_column(self, table: str, name: ColumnPath, if_exists: bool = False) -> None:
        """Drop a column (its data stays in old files and snapshots; it is no longer read)."""
        self._stage(columns.DropColumn(table, name, if_exists))

    def restore_column(self, table: str, name: ColumnPath) -> None:
        """Bring back a dropped column with its data: its original field id, type, doc and position.

        Rows of files written since the drop (or rewritten) read null, so it comes back optional unless
        every live row holds it. See :mod:`~iceberg_ops_provider.migration.restore`.
        """
        self._stage(columns.RestoreColumn(table, name))

    def rename_column(self, table: str, old: ColumnPath, new: str) -> None:
        """Rename a column; ``new`` is the new last name (the column stays where it is)."""
        self._stage(columns.RenameColumn(table, old, new))

    def alter_column(
        self,
        table: str,
        name: ColumnPath,
        type: TypeLike | None = None,
        doc: str | None = None,
        required: bool | None = None,
    ) -> None:
        """Change a column's type (only the promotions Iceberg allows), doc, or make it optional."""
        self._stage(columns.AlterColumn(table, name, type, doc, required))

    def move_column(
        self,
        table: str,
        name: ColumnPath,
        first: bool = False,
        before: ColumnPath | None = None,
        after: ColumnPath | None = None,
    ) -> None:
        """Move a column first, or before/after another column (exactly one of them)."""
        self._stage(columns.MoveColumn(table, name, after, first=first, before=before))

    def set_identifier_fields(self, table: str, *names: str) -> None:
        """Set the table's identifier fields (the row key; the columns must be required). No names clears them."""
        self._stage(columns.SetIdentifierFields(table, names))

    # -- data operations: recorded here, run in order once the schema changes are committed ----------

    def delete_rows(self, table: str, where: str | BooleanExpression) -> None:
        """Delete the rows where ``where`` is true (a filter string as the data mover takes, or an expression).

        Runs after the migration's schema changes commit, in units of files that each commit once; a run
        stopped in it is finished by the next run of the migration (docs/migrations.md, "Data operations").
        """
        self._stage(data.DeleteRows(table, where))

    def update_rows(self, table: str, set: Mapping[str, Any], where: str | BooleanExpression | None = None) -> None:
        """Set columns of the rows where ``where`` is true (every row without it).

        Args:
            table: Table name.
            set: Column name to a literal, or to a function taking a ``pyarrow.RecordBatch`` of the rows
                and returning a ``pyarrow.Array`` of the column's new values (one per row).
            where: Which rows (a filter string or a PyIceberg expression); rows where it is null keep their values.
        """
        self._stage(data.UpdateRows(table, where, _columns_to(set, "update_rows", "set")))

    def backfill(self, table: str, column: str, value: Any, where: str | BooleanExpression | None = None) -> None:
        """Fill ``column`` where it is null (and ``where`` is true) with a literal or a function of the batch.

        Works on a column added earlier in the same migration.
        """
        self._stage(data.Backfill(table, where, column, value))

    def rewrite_partitions(self, table: str, where: str | BooleanExpression | None = None) -> None:
        """Rewrite existing data files into the table's current partition spec and sort order; rows unchanged."""
        self._stage(data.RewritePartitions(table, where))

    def copy_rows(
        self,
        source: str,
        target: str,
        where: str | BooleanExpression | None = None,
        columns: Iterable[str] | None = None,
        rename: Mapping[str, str] | None = None,
    ) -> None:
        """Copy the rows of ``source`` where ``where`` is true into ``target``, with the data mover.

        Runs after the migration's schema changes commit (a target it creates exists by then), in units
        of source files that each commit once with the move's progress; a run stopped in it is finished
        by the next run of the migration, and no row is copied twice (docs/migrations.md, "Data operations").

        Args:
            source: The table to read, as of its snapshot when the copy starts.
            target: The table to append to; the restore point a downgrade's ``restore_data`` returns to is taken on it.
            where: Which rows (a filter string or a PyIceberg expression on source columns); default all.
            columns: Source columns to copy; default all (target columns left out read null).
            rename: ``{source_column: target_column}`` for columns whose names differ.
        """
        chosen = _strings(columns) if columns is not None else None
        self._stage(
            data.CopyRows(
                target, where, source, chosen, _columns_to(rename or {}, "copy_rows", "rename", "{'v': 'amount'}")
            )
        )

    def restore_data(self, table: str) -> None:
        """In ``downgrade()``: bring the table's rows back to what they were before this migration's data steps.

        The runner tags the table before the upgrade's first data step on it; this moves ``main`` back to
        that tag in one commit. Refused (``RestorePointError``, before anything commits) when anything
        else has committed to the table since, naming those commits, or when the tag expired.
        """
        self._stage(data.RestoreData(table))


def _columns_to(given: Any, method: str, argument: str, example: str = "{'amount': 0}") -> dict[str, Any]:
    """``given`` as a dict keyed by column names.

    Raises:
        InvalidOperationError: ``given`` is not a mapping, or one of its keys is not a string.
    """
    if not isinstance(given, Mapping):
        raise InvalidOperationError(
            f"{method}: {argument} must be a mapping keyed by column names, such as {example}; got "
            f"{type(given).__name__} {given!r}."
        )
    for key in given:
        if not isinstance(key, str):
            raise InvalidOperationError(
                f"{method}: {argument} names column {key!r} ({type(key).__name__}); columns are named by strings."
            )
    return dict(given)


def _strings(given: Iterable[str] | str | None) -> tuple[str, ...]:
    """Partition expressions or sort fields as a tuple: one string is one of them."""
    return (given,) if isinstance(given, str) else tuple(given or ())
