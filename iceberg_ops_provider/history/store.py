"""The migration history: ``<meta_namespace>.migration_history``, one row per (version, namespace).

Partitioned by namespace. Each write is one commit. A staged write (:meth:`HistoryStore.stage`, committed
with the migrated tables and a check of the lock) of versions the namespace has no row for appends them
as a small file, until the namespace holds ``compact_after_files`` files; any other write replaces the
namespace's partition with one file, so that a concurrent writer's change to the same files fails it.
Snapshots beyond ``keep_snapshots`` are expired after writes, since PyIceberg's commit cost grows with
them (about 90 ms per write with 20 snapshots, 240 ms with 120). Reading never creates anything.
"""

from __future__ import annotations

import contextlib
import logging
import time
import warnings
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

import pyarrow as pa
import pyarrow.compute as pc
from pyiceberg.exceptions import (
    BadRequestError,
    CommitFailedException,
    NoSuchTableError,
    TableAlreadyExistsError,
)
from pyiceberg.expressions import EqualTo
from pyiceberg.io.pyarrow import ArrowScan
from pyiceberg.partitioning import PartitionField, PartitionSpec
from pyiceberg.table import Table, Transaction
from pyiceberg.table.update import SetSnapshotRefUpdate
from pyiceberg.transforms import IdentityTransform

from iceberg_ops_provider.catalogs import ensure_namespace
from iceberg_ops_provider.core.retrying import LOST_RACE, lost_races
from iceberg_ops_provider.core.snapshots import read_table
from iceberg_ops_provider.core.types import arrow_to_iceberg_schema
from iceberg_ops_provider.errors import CatalogConfigError, ConcurrentMigrationError
from iceberg_ops_provider.history.commit import (
    META_TABLE_PROPERTIES,
    commit_written,
    delete_written,
    stage_replace_files,
)
from iceberg_ops_provider.history.records import HISTORY_SCHEMA, HISTORY_TABLE, HistoryRow, rows_to_arrow
from iceberg_ops_provider.maintenance.expire import expire_snapshots
from iceberg_ops_provider.maintenance.orphans import remove_orphan_files
from iceberg_ops_provider.messages import Arg, message

if TYPE_CHECKING:
    from pyiceberg.catalog import Catalog
    from pyiceberg.manifest import DataFile

    from iceberg_ops_provider.core.atomic.changes import AtomicCommitResult, TableChange

__all__ = [
    "DEFAULT_META_NAMESPACE",
    "S3_TABLES_META_NAMESPACE",
    "HistoryStore",
    "create_meta_table",
    "StagedWrite",
    "default_meta_namespace",
    "ensure_meta_namespace",
    "load_meta_table",
    "trim_table",
    "upgrade_meta_table",
]

log = logging.getLogger(__name__)

DEFAULT_META_NAMESPACE = "_iceberg_ops"
"""Where history (and locks) live unless told otherwise."""

S3_TABLES_META_NAMESPACE = "iceberg_ops"
"""The default on AWS S3 Tables, which refuses namespace names that start or end with ``_``."""


def default_meta_namespace(catalog: Catalog) -> str:
    """:data:`DEFAULT_META_NAMESPACE`, or :data:`S3_TABLES_META_NAMESPACE` for a catalog signing for ``s3tables``."""
    properties = getattr(catalog, "properties", {}) or {}
    if str(properties.get("rest.signing-name", "")).lower() == "s3tables":
        return S3_TABLES_META_NAMESPACE
    return DEFAULT_META_NAMESPACE


def _refused(namespace: tuple[str, ...], exc: Exception) -> CatalogConfigError:
    name = ".".join(namespace)
    return CatalogConfigError(
        message(
            f"The catalog refused the meta-namespace {name!r}, where iceberg-ops keeps migration history and "
            f"locks: {exc}. Choose another name: {{meta_namespace}}, `meta_namespace:` in iceberg-ops.yaml, or the "
            "connection extra 'meta_namespace'. S3 Tables accepts names starting with a letter or digit, such as "
            f"{S3_TABLES_META_NAMESPACE!r}.",
            meta_namespace=Arg("meta_namespace", keyword=True),
        )
    )


def load_meta_table(catalog: Catalog, identifier: tuple[str, ...]) -> Table | None:
    """Load a table of the meta-namespace, or ``None`` when it does not exist yet.

    Raises:
        CatalogConfigError: The catalog refuses the meta-namespace's name.
    """
    try:
        return catalog.load_table(identifier)
    except NoSuchTableError:
        return None
    except BadRequestError as exc:
        raise _refused(identifier[:-1], exc) from exc


def ensure_meta_namespace(catalog: Catalog, identifier: tuple[str, ...]) -> None:
    """Create the meta-namespace of ``identifier`` if missing; a catalog refusing its name gets a clear error.

    Raises:
        CatalogConfigError: The catalog refused to create it (S3 Tables refuses names starting with
            ``_``); the message names the settings that choose another.
    """
    namespace = identifier[:-1]
    try:
        ensure_namespace(catalog, namespace)
    except (BadRequestError, ValueError) as exc:
        raise _refused(namespace, exc) from exc


def create_meta_table(catalog: Catalog, identifier: tuple[str, ...], schema: Any, **options: Any) -> Table:
    """Create a table of the meta-namespace (and the namespace); one another runner created first is loaded."""
    ensure_meta_namespace(catalog, identifier)
    try:
        return catalog.create_table(identifier, schema, **options)
    except TableAlreadyExistsError:
        return catalog.load_table(identifier)


def upgrade_meta_table(catalog: Catalog, table: Table, schema: pa.Schema) -> Table:
    """``table`` with the columns of ``schema`` and :data:`META_TABLE_PROPERTIES` an earlier release did not give it."""
    unset = {k: v for k, v in META_TABLE_PROPERTIES.items() if table.properties.get(k) != v}
    missing = set(schema.names) - set(table.schema().column_names)
    if not (unset or missing):
        return table
    with contextlib.suppress(CommitFailedException), table.transaction() as transaction:
        if missing:
            with transaction.update_schema() as update:
                update.union_by_name(arrow_to_iceberg_schema(schema))
        if unset:
            transaction.set_properties(unset)
    return catalog.load_table(table.name())


_WRITE_ATTEMPTS = 20
"""Attempts of a history write lost to other namespaces' writes or expiries of the shared table: up to
half a minute of waiting when many namespaces migrate at once."""


def _same_snapshot(seen: Table, now: Table) -> bool:
    return (seen.metadata.table_uuid, seen.metadata.current_snapshot_id) == (
        now.metadata.table_uuid,
        now.metadata.current_snapshot_id,
    )


ORPHAN_AGE = timedelta(hours=1)
"""Files of a meta table that nothing references are deleted by its expiry once this old: what a killed
writer left (no live write keeps its files uncommitted that long)."""


def trim_table(table: Table, keep_snapshots: int, *, sweep: bool = True) -> None:
    """Keep the last ``keep_snapshots`` snapshots of a meta table and delete every file the rest held.

    With ``sweep``, files nothing references and older than :data:`ORPHAN_AGE` go too. Best effort: losing
    a race with a concurrent writer, or a storage error, is logged and left for the next write.
    """
    try:
        expire_snapshots(table, older_than=datetime.now(UTC), retain_last=keep_snapshots)
        if sweep:
            remove_orphan_files(table, older_than=ORPHAN_AGE, check_nested_tables=False)
    except CommitFailedException:
        log.debug("expiry of %s lost a race with another writer; the next write retries it", table.name())
    except Exception as exc:
        log.warning("could not expire old snapshots of %s: %s: %s", ".".join(table.name()), type(exc).__name__, exc)


@dataclass
class StagedWrite:
    """A history write staged on the history table (:meth:`HistoryStore.stage`), not committed yet.

    ``change`` is the history table's change for a multi-table commit, ``written`` the data files
    written for it (deleted by :meth:`discard`), ``rows`` the namespace's rows once it is committed
    in the snapshot ``snapshot_id``, held in ``files`` data files.
    """

    store: HistoryStore
    change: TableChange
    table: Table
    written: list[DataFile] = field(default_factory=list)
    namespace: str = ""
    rows: pa.Table = field(default_factory=HISTORY_SCHEMA.empty_table)
    snapshot_id: int | None = None
    files: int = 1

    def discard(self) -> None:
        """The commit did not land: delete the files written for it."""
        delete_written(self.table, self.written)
        self.written = []
        self.store._last = None

    def committed(self, result: AtomicCommitResult | None = None) -> None:
        """The commit landed: keep the history table small, as after :meth:`HistoryStore.record`.

        Args:
            result: The multi-table commit's result: the history table's new metadata is taken from
                it when the catalog returned it, instead of loading the table again.
        """
        self.written = []
        store = self.store
        store._last = None
        label = self.change.label()
        try:
            if result is not None and label in result.metadata and label in result.metadata_locations:
                metadata, location = result.metadata[label], result.metadata_locations[label]
                table = Table(self.table.name(), metadata, location, self.table.io, store.catalog)
            else:
                table = store.catalog.load_table(store.identifier)
            if table.metadata.current_snapshot_id == self.snapshot_id:  # nobody wrote since: start the next write here
                store._last = _Read(table, self.namespace, self.rows, self.files)
            store._expire(table)
        except Exception as exc:  # housekeeping only: the next write tries again
            log.warning("could not trim the history table after a commit: %s: %s", type(exc).__name__, exc)


@dataclass(frozen=True)
class _Read:
    """One namespace's rows as read or written in ``table``'s current snapshot, held in ``files`` data files."""

    table: Table
    namespace: str
    rows: pa.Table
    files: int


@dataclass(frozen=True)
class _Staged:
    """A write staged on the history table: its transaction, the data files written, the namespace after it."""

    transaction: Transaction
    files: list[DataFile]
    read: _Read


def _conform(data: pa.Table) -> pa.Table:
    """Rows read from the table as :data:`HISTORY_SCHEMA` (columns an earlier release did not write are null)."""
    for name in HISTORY_SCHEMA.names:
        if name not in data.column_names:
            data = data.append_column(name, pa.nulls(data.num_rows, HISTORY_SCHEMA.field(name).type))
    return data.select(HISTORY_SCHEMA.names).cast(HISTORY_SCHEMA)


class HistoryStore:
    """Read and write the migration history of any namespace of one catalog.

    ``keep_snapshots`` snapshots are kept for time travel; older ones are expired after writes, in batches.
    """

    compact_after_files = 16
    """Appends a namespace's partition takes before the next write rewrites it into one file."""

    def __init__(self, catalog: Catalog, meta_namespace: str = DEFAULT_META_NAMESPACE, keep_snapshots: int = 10):
        if keep_snapshots < 1:
            raise ValueError(f"keep_snapshots must be at least 1, got {keep_snapshots}.")
        self.catalog = catalog
        self.meta_namespace = meta_namespace
        self.keep_snapshots = keep_snapshots
        self.identifier = (*meta_namespace.split("."), HISTORY_TABLE)
        # The table and one namespace's rows as last read or written by this store: a run reads its
        # history once under its lock, and each write starts from what the one before it left. A
        # stale start costs nothing but a retry: the write deletes the namespace's files as read
        # there, and a commit that finds them gone or the table moved on fails and reads afresh.
        self._last: _Read | None = None
        self._parsed: tuple[pa.Table, list[HistoryRow]] | None = None  # the rows of the last data read, parsed
        self._swept_at: float | None = None

    # -- reading --------------------------------------------------------------------------------

    def table(self) -> Table | None:
        """The history table, or ``None`` if nothing was ever recorded. Creates nothing."""
        return load_meta_table(self.catalog, self.identifier)

    def rows(self, namespace: str, *, as_of: datetime | None = None) -> list[HistoryRow]:
        """The history rows of ``namespace``, oldest first; with ``as_of``, as they were then."""
        table = self.table()
        if table is None or table.current_snapshot() is None:
            return []
        if as_of is not None:
            data = _conform(read_table(table, as_of=as_of, row_filter=EqualTo("namespace", namespace)))
        elif self._last is not None and self._last.namespace == namespace and _same_snapshot(self._last.table, table):
            data = self._last.rows  # what this store last read or wrote is still current: no scan
        else:
            self._last = self._read_files(table, namespace)
            data = self._last.rows
        if self._parsed is None or self._parsed[0] is not data:
            rows = HistoryRow.from_arrow(data)
            self._parsed = (data, sorted(rows, key=lambda row: (row.applied_at, int(row.version))))
        return list(self._parsed[1])

    @staticmethod
    def _read_files(table: Table, namespace: str) -> _Read:
        """The namespace's rows in the table's current snapshot."""
        snapshot = table.current_snapshot()
        if snapshot is None:
            return _Read(table, namespace, HISTORY_SCHEMA.empty_table(), 0)
        scan = table.scan(row_filter=EqualTo("namespace", namespace), snapshot_id=snapshot.snapshot_id)
        tasks = list(scan.plan_files())
        if not tasks:
            return _Read(table, namespace, HISTORY_SCHEMA.empty_table(), 0)
        arrow_scan = ArrowScan(table.metadata, table.io, scan.projection(), scan.row_filter, scan.case_sensitive)
        return _Read(table, namespace, _conform(arrow_scan.to_table(tasks)), len(tasks))

    # -- writing --------------------------------------------------------------------------------

    def record(
        self,
        namespace: str,
        updates: Iterable[HistoryRow],
        expected: Mapping[str, str | None],
        *,
        removals: Iterable[str] = (),
    ) -> None:
        """Write new states for some versions of ``namespace`` in one commit.

        Args:
            namespace: The namespace.
            updates: The new rows (replacing any row of the same version).
            expected: For each updated or removed version, the status this run last saw (``None``:
                no row). If the table says otherwise, another run wrote in between.
            removals: Versions whose rows are deleted.

        Raises:
            ConcurrentMigrationError: The history changed under this run: the last line of defence
                when two runs bypass the lock (for example after a forced unlock).
        """
        updates = list(updates)
        removed = list(removals)
        # Lost a race with another writer (PyIceberg's retries exhausted, or it touched the same files), or
        # with an expiry that deleted the files of the snapshot this write started from: read again; the
        # expectations checked by _new_partition catch a real conflict on this namespace.
        for attempt in lost_races(_WRITE_ATTEMPTS, what=f"history of {namespace}"):
            with attempt:
                written = self._write(namespace, updates, expected, removed, append=False)
                try:
                    commit_written(written.read.table, written.transaction, written.files)
                except LOST_RACE:
                    self._last = None
                    raise
        self._last = written.read  # the commit brought its table up to date
        self._expire(written.read.table)

    def stage(self, namespace: str, updates: Iterable[HistoryRow], expected: Mapping[str, str | None]) -> StagedWrite:
        """Stage what :meth:`record` writes as a transaction on the history table, without committing it.

        The caller commits :attr:`StagedWrite.change` together with other tables' changes in one
        multi-table commit (:func:`~iceberg_ops_provider.core.atomic.commit.commit_atomically`), then
        calls :meth:`StagedWrite.committed` or, if the commit did not land, :meth:`StagedWrite.discard`.
        A commit that lost a race needs a new stage: read again, as :meth:`record` does.

        Raises:
            ConcurrentMigrationError: The history already says otherwise than ``expected``.
            CommitFailedException, ValidationException, FileNotFoundError: Another writer removed the
                snapshot this store last read (:data:`~iceberg_ops_provider.core.retrying.LOST_RACE`):
                stage again, which reads afresh.
        """
        from iceberg_ops_provider.core.atomic.changes import TableChange

        staged = self._write(namespace, list(updates), expected, [], append=True)
        transaction, after = staged.transaction, staged.read
        # The snapshot the write leaves current, without PyIceberg computing the whole metadata again.
        snapshot_id = [u.snapshot_id for u in transaction._updates if isinstance(u, SetSnapshotRefUpdate)][-1]
        change = TableChange.of(transaction)
        return StagedWrite(self, change, after.table, staged.files, namespace, after.rows, snapshot_id, after.files)

    def _write(
        self,
        namespace: str,
        updates: list[HistoryRow],
        expected: Mapping[str, str | None],
        removed: list[str],
        *,
        append: bool,
    ) -> _Staged:
        """Stage the write (checking ``expected`` first): the partition replaced, or with ``append`` new versions added.

        An append is only safe in a commit that fails on any concurrent write of the table (a staged
        write's snapshot requirement): PyIceberg's own retry of a commit would rebase it unchecked.
        """
        before, touched, after = self._new_partition(namespace, updates, expected, removed)
        try:
            if append and not touched and before.files < self.compact_after_files:
                transaction, written = stage_replace_files(before.table, None, rows_to_arrow(updates))
                return _Staged(transaction, written, _Read(before.table, namespace, after, before.files + 1))
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", UserWarning)  # "Delete operation did not match any records"
                delete = EqualTo("namespace", namespace) if before.rows.num_rows else None
                transaction, written = stage_replace_files(before.table, delete, after)
        except LOST_RACE:
            # Staging reads the manifests of the snapshot it starts from: another writer's expiry
            # deleted them, so the next attempt must read the table afresh, not start there again.
            self._last = None
            raise
        return _Staged(transaction, written, _Read(before.table, namespace, after, 1))

    def _new_partition(
        self,
        namespace: str,
        updates: list[HistoryRow],
        expected: Mapping[str, str | None],
        removed: list[str],
    ) -> tuple[_Read, bool, pa.Table]:
        """The namespace as read, whether the write changes or removes rows it holds, and its rows after it.

        Checks ``expected`` first.
        Starts from the last read or write of the namespace when there is one; when that disagrees
        with ``expected``, reads afresh before deciding.
        """
        # Arrow throughout: a write costs the same whether the namespace has 10 rows or 10,000.
        changed = pa.array([row.version for row in updates] + removed, pa.string())
        last = self._last if self._last is not None and self._last.namespace == namespace else None
        while True:
            if last is None:
                read = self._read_files(self._ensure_table(), namespace)
            else:
                read = _Read(self._upgraded(last.table), namespace, last.rows, last.files)
            existing = read.rows
            touched = existing.filter(pc.is_in(existing.column("version"), value_set=changed))
            current = {row["version"]: HistoryRow.from_dict(row) for row in touched.to_pylist()}
            try:
                self._check_expected(namespace, current, expected)
                break
            except ConcurrentMigrationError:
                if last is None:
                    raise
                last = self._last = None
        kept = existing.filter(pc.invert(pc.is_in(existing.column("version"), value_set=changed)))
        return read, bool(touched.num_rows or removed), pa.concat_tables([kept, rows_to_arrow(updates)])

    def _check_expected(
        self, namespace: str, current: dict[str, HistoryRow], expected: Mapping[str, str | None]
    ) -> None:
        for version, status in expected.items():
            row = current.get(version)
            seen = row.status if row else None
            if seen != status:
                by = f" by {row.executed_by} (run {row.run_id}) at {row.applied_at.isoformat()}" if row else ""
                raise ConcurrentMigrationError(
                    namespace,
                    f"The history of {namespace!r} changed under this run: version {version} is now "
                    f"{seen or 'absent'}{by}, but this run expected {status or 'no row'}. Another run migrated "
                    "the namespace at the same time (was its lock force-released?). Check the tables, then run "
                    "`status` before migrating again.",
                    {"version": version, "status": str(seen), "run_id": str(row.run_id if row else "")},
                )

    def _upgraded(self, table: Table) -> Table:
        return upgrade_meta_table(self.catalog, table, HISTORY_SCHEMA)

    def _ensure_table(self) -> Table:
        table = self.table()
        if table is not None:
            return self._upgraded(table)
        schema = arrow_to_iceberg_schema(HISTORY_SCHEMA)
        field = PartitionField(schema.find_field("namespace").field_id, 1000, IdentityTransform(), "namespace")
        spec = PartitionSpec(field)
        return create_meta_table(
            self.catalog, self.identifier, schema, partition_spec=spec, properties=META_TABLE_PROPERTIES
        )

    def _expire(self, table: Table) -> None:
        """Expire snapshots beyond the window and delete their files, in batches; never fails the write before it."""
        slack = max(10, self.keep_snapshots // 5)
        if len(table.snapshots()) <= self.keep_snapshots + slack:
            return
        now = time.monotonic()  # the folder is listed by this store's first expiry, then once per ORPHAN_AGE
        sweep = self._swept_at is None or now - self._swept_at > ORPHAN_AGE.total_seconds()
        self._swept_at = now if sweep else self._swept_at
        trim_table(table, self.keep_snapshots, sweep=sweep)
