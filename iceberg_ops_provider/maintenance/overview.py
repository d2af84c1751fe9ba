"""The tables of a namespace at a glance, from their metadata alone, read concurrently.

:func:`table_overview` reads what a table's ``metadata.json`` already says: its current snapshot's
summary totals (data files, delete files, records, bytes), how many snapshots it keeps, its last
commit and operation, its format version and target file size. It opens no manifest and no data
file, so it costs one metadata read per table. :func:`namespace_tables` does it for every table of
a namespace, ``parallelism`` tables at a time, and reports a table that cannot be read as an error
of that table rather than failing the others. The health report
(:func:`~iceberg_ops_provider.maintenance.health.table_health_report`) is the deep look at one table.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from iceberg_ops_provider.catalogs import failure, spec_of
from iceberg_ops_provider.core.threads import carrying_context

if TYPE_CHECKING:
    from pyiceberg.catalog import Catalog
    from pyiceberg.table import Table

__all__ = ["DEFAULT_PARALLELISM", "NamespaceTables", "TableOverview", "namespace_tables", "table_overview"]

DEFAULT_PARALLELISM = 8
"""Tables whose metadata is read at the same time by :func:`namespace_tables`."""

_TARGET_FILE_SIZE = "write.target-file-size-bytes"
_DEFAULT_TARGET_FILE_SIZE = 512 * 1024 * 1024


def _int(summary: dict[str, str], key: str) -> int | None:
    try:
        return int(summary[key])
    except (KeyError, ValueError, TypeError):
        return None


@dataclass(frozen=True)
class TableOverview:
    """One table, as its metadata describes it.

    Attributes:
        table: ``namespace.name``.
        format_version: The table's format version.
        snapshot_id: The current snapshot, ``None`` for a table without one.
        snapshots: Snapshots the metadata keeps.
        last_commit_at: When the current snapshot was committed (UTC), ``None`` without one.
        last_operation: The current snapshot's operation (``append``, ``replace``, ...).
        data_files: ``total-data-files`` of the current snapshot's summary.
        delete_files: ``total-delete-files``.
        records: ``total-records``.
        bytes: ``total-files-size``.
        target_file_size_bytes: The table's ``write.target-file-size-bytes`` (512 MiB by default).
        partitioned: Whether the default partition spec has fields.
        sorted: Whether the default sort order has fields.
    """

    table: str
    format_version: int
    snapshot_id: int | None
    snapshots: int
    last_commit_at: datetime | None
    last_operation: str | None
    data_files: int | None
    delete_files: int | None
    records: int | None
    bytes: int | None
    target_file_size_bytes: int
    partitioned: bool
    sorted: bool

    @property
    def mean_file_bytes(self) -> int | None:
        """The mean size of the current data files, ``None`` when unknown or without files."""
        if not self.data_files or self.bytes is None:
            return None
        return self.bytes // self.data_files

    def to_json(self) -> dict[str, Any]:
        """JSON-able form."""
        return {
            "table": self.table,
            "format_version": self.format_version,
            "snapshot_id": self.snapshot_id,
            "snapshots": self.snapshots,
            "last_commit_at": self.last_commit_at.isoformat() if self.last_commit_at else None,
            "last_operation": self.last_operation,
            "data_files": self.data_files,
            "delete_files": self.delete_files,
            "records": self.records,
            "bytes": self.bytes,
            "mean_file_bytes": self.mean_file_bytes,
            "target_file_size_bytes": self.target_file_size_bytes,
            "partitioned": self.partitioned,
            "sorted": self.sorted,
        }


def table_overview(table: Table) -> TableOverview:
    """The overview of a loaded table, from its metadata (no file is read)."""
    metadata = table.metadata
    snapshot = table.current_snapshot()
    summary: dict[str, str] = {}
    operation = None
    if snapshot is not None and snapshot.summary is not None:
        summary = dict(snapshot.summary.additional_properties)
        operation = snapshot.summary.operation.value
    try:
        target = int(metadata.properties.get(_TARGET_FILE_SIZE, _DEFAULT_TARGET_FILE_SIZE))
    except ValueError:
        target = _DEFAULT_TARGET_FILE_SIZE
    return TableOverview(
        table=".".join(table.name()),
        format_version=metadata.format_version,
        snapshot_id=snapshot.snapshot_id if snapshot is not None else None,
        snapshots=len(metadata.snapshots),
        last_commit_at=datetime.fromtimestamp(snapshot.timestamp_ms / 1000, UTC) if snapshot is not None else None,
        last_operation=operation,
        data_files=_int(summary, "total-data-files") if snapshot is not None else 0,
        delete_files=_int(summary, "total-delete-files") if snapshot is not None else 0,
        records=_int(summary, "total-records") if snapshot is not None else 0,
        bytes=_int(summary, "total-files-size") if snapshot is not None else 0,
        target_file_size_bytes=target,
        partitioned=bool(table.spec().fields),
        sorted=bool(table.sort_order().fields),
    )


@dataclass(frozen=True)
class NamespaceTables:
    """Every table of a namespace at a glance.

    Attributes:
        namespace: The namespace.
        tables: The tables that could be read, by name.
        errors: ``{table: what failed}`` for the tables that could not be read (a missing metadata file, a refused
            load): the kind of failure and the error's type (``not-found (NoSuchTableError)``), as facts: never the
            text a server answered, which this report may be shown beside.
    """

    namespace: str
    tables: list[TableOverview]
    errors: dict[str, str]

    def to_json(self) -> dict[str, Any]:
        """JSON-able form."""
        return {
            "namespace": self.namespace,
            "tables": [table.to_json() for table in self.tables],
            "errors": dict(self.errors),
        }


def namespace_tables(catalog: Catalog, namespace: str, *, parallelism: int = DEFAULT_PARALLELISM) -> NamespaceTables:
    """The overview of every table of ``namespace``, ``parallelism`` tables read at a time.

    Raises:
        NoSuchNamespaceError: The namespace does not exist (listing it fails as the catalog says).
    """
    identifiers = sorted(catalog.list_tables(namespace))
    spec = spec_of(catalog)

    def read(identifier: tuple[str, ...]) -> TableOverview | str:
        try:
            return table_overview(catalog.load_table(identifier))
        except Exception as exc:  # one unreadable table must not hide the others
            found = failure(exc, spec)
            status = f", HTTP {found.status_class}" if found.status_class else ""
            return f"{found.kind} ({found.error}{status})"

    if len(identifiers) <= 1 or parallelism == 1:
        results = [read(identifier) for identifier in identifiers]
    else:
        with ThreadPoolExecutor(max_workers=min(parallelism, len(identifiers)), thread_name_prefix="overview") as pool:
            results = list(pool.map(carrying_context(read), identifiers))
    tables: list[TableOverview] = []
    errors: dict[str, str] = {}
    for identifier, result in zip(identifiers, results, strict=True):
        if isinstance(result, str):
            errors[".".join(identifier)] = result
        else:
            tables.append(result)
    return NamespaceTables(namespace=namespace, tables=tables, errors=errors)
