"""The tables of a namespace at a glance, from their metadata alone (no manifest or data file), read concurrently."""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, TypeVar

from pyiceberg.table import TableProperties

from iceberg_ops_provider.catalogs import failure, spec_of
from iceberg_ops_provider.core.threads import carrying_context

if TYPE_CHECKING:
    from pyiceberg.catalog import Catalog
    from pyiceberg.table import Table
    from pyiceberg.typedef import Identifier

__all__ = [
    "DEFAULT_PARALLELISM",
    "NamespaceTables",
    "catalog_namespaces",
    "TableOverview",
    "namespace_tables",
    "read_tables",
    "table_overview",
]

T = TypeVar("T")

DEFAULT_PARALLELISM = 8
"""Tables whose metadata is read at the same time by :func:`namespace_tables`."""

_MAX_NAMESPACE_DEPTH = 16  # namespaces nested deeper than this are not listed (none are expected)


def _int(summary: dict[str, str], key: str) -> int | None:
    try:
        return int(summary[key])
    except (KeyError, ValueError, TypeError):
        return None


@dataclass(frozen=True)
class TableOverview:
    """One table, as its metadata describes it (the counts are the current snapshot summary's ``total-*``)."""

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
            **asdict(self),
            "last_commit_at": self.last_commit_at.isoformat() if self.last_commit_at else None,
            "mean_file_bytes": self.mean_file_bytes,
        }


def table_overview(table: Table) -> TableOverview:
    """The overview of a loaded table, from its metadata (no file is read)."""
    metadata = table.metadata
    snapshot = table.current_snapshot()
    totals = ("total-data-files", "total-delete-files", "total-records", "total-files-size")
    summary = dict.fromkeys(totals, "0") if snapshot is None else {}
    operation = None
    if snapshot is not None and snapshot.summary is not None:
        summary = dict(snapshot.summary.additional_properties)
        operation = snapshot.summary.operation.value
    default = TableProperties.WRITE_TARGET_FILE_SIZE_BYTES_DEFAULT
    try:
        target = int(metadata.properties.get(TableProperties.WRITE_TARGET_FILE_SIZE_BYTES, default))
    except ValueError:
        target = default
    return TableOverview(
        table=".".join(table.name()),
        format_version=metadata.format_version,
        snapshot_id=snapshot.snapshot_id if snapshot is not None else None,
        snapshots=len(metadata.snapshots),
        last_commit_at=datetime.fromtimestamp(snapshot.timestamp_ms / 1000, UTC) if snapshot is not None else None,
        last_operation=operation,
        data_files=_int(summary, "total-data-files"),
        delete_files=_int(summary, "total-delete-files"),
        records=_int(summary, "total-records"),
        bytes=_int(summary, "total-files-size"),
        target_file_size_bytes=target,
        partitioned=bool(table.spec().fields),
        sorted=bool(table.sort_order().fields),
    )


@dataclass(frozen=True)
class NamespaceTables:
    """Every table of a namespace at a glance.

    ``errors`` maps each table that could not be read to the kind of failure and the error's type
    (``not-found (NoSuchTableError)``): never the text a server answered, which this may be shown beside.
    """

    namespace: str
    tables: list[TableOverview]
    errors: dict[str, str]

    def to_json(self) -> dict[str, Any]:
        """JSON-able form."""
        return {**asdict(self), "tables": [table.to_json() for table in self.tables]}


def namespace_tables(catalog: Catalog, namespace: str, *, parallelism: int = DEFAULT_PARALLELISM) -> NamespaceTables:
    """The overview of every table of ``namespace``, ``parallelism`` tables read at a time.

    Raises:
        NoSuchNamespaceError: The namespace does not exist (listing it fails as the catalog says).
    """
    tables, errors = read_tables(catalog, namespace, table_overview, parallelism=parallelism)
    return NamespaceTables(namespace=namespace, tables=tables, errors=errors)


def read_tables(
    catalog: Catalog, namespace: str, read: Callable[[Table], T], *, parallelism: int = DEFAULT_PARALLELISM
) -> tuple[list[T], dict[str, str]]:
    """``read`` of every table of ``namespace`` (loaded ``parallelism`` at a time, by name), and the failures.

    The failures map each table that could not be loaded or read to the kind of failure and the error's type
    (as :class:`NamespaceTables` ``errors``); one unreadable table never hides the others.

    Raises:
        NoSuchNamespaceError: The namespace does not exist (listing it fails as the catalog says).
    """
    identifiers = sorted(catalog.list_tables(namespace))
    spec = spec_of(catalog)

    def one(identifier: tuple[str, ...]) -> tuple[T] | str:
        try:
            return (read(catalog.load_table(identifier)),)
        except Exception as exc:  # one unreadable table must not hide the others
            found = failure(exc, spec)
            status = f", HTTP {found.status_class}" if found.status_class else ""
            return f"{found.kind} ({found.error}{status})"

    workers = max(1, min(parallelism, len(identifiers)))
    with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="overview") as pool:
        results = list(pool.map(carrying_context(one), identifiers))
    tables = [result[0] for result in results if not isinstance(result, str)]
    errors = {".".join(i): result for i, result in zip(identifiers, results, strict=True) if isinstance(result, str)}
    return tables, errors


def catalog_namespaces(catalog: Catalog) -> list[Identifier]:
    """Every namespace the catalog lists, those nested in namespaces included, each once."""
    seen: set[Identifier] = set()
    todo: list[Identifier] = list(catalog.list_namespaces())
    while todo:
        namespace = tuple(todo.pop())
        if namespace in seen or len(namespace) > _MAX_NAMESPACE_DEPTH:
            continue
        seen.add(namespace)
        try:
            children = catalog.list_namespaces(namespace)
        except NotImplementedError:  # a catalog without nested namespaces
            children = []
        todo.extend(tuple(child) for child in children if tuple(child) != namespace)
    return sorted(seen)
