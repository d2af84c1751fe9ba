"""A namespace's tables as the namespace page lists them: filtered by name, sorted by any column, one page at a time.

Every table is loaded (its metadata file: the overview and the policy's state come from it), as the page did
before it was paged. The health column needs each table's manifests, so it is measured only for the tables of
the page shown, unless the list is sorted by it; each measure is kept per metadata location in the
application's :class:`~iceberg_ops_provider.ui.metadata_cache.MetadataCache`.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any

from iceberg_ops_provider.core.threads import carrying_context
from iceberg_ops_provider.maintenance.overview import TableOverview, read_tables, table_overview
from iceberg_ops_provider.maintenance.table_status import POLICY_STATES, PolicyState, TableStatus, policy_state

if TYPE_CHECKING:
    from pyiceberg.catalog import Catalog
    from pyiceberg.table import Table

__all__ = ["ORDERS", "SORTS", "TableQuery", "table_list"]

log = logging.getLogger(__name__)

SORTS: tuple[str, ...] = (
    "table",
    "files",
    "size",
    "mean",
    "records",
    "deletes",
    "snapshots",
    "commit",
    "health",
    "policy",
)
"""The columns the list sorts by (the ``sort`` query parameter)."""

ORDERS: tuple[str, ...] = ("asc", "desc")
"""The directions of a sort (``order``); ``health`` ascending lists the tables calling for attention first."""

_OVERVIEW_KEYS = {
    "files": "data_files",
    "size": "bytes",
    "mean": "mean_file_bytes",
    "records": "records",
    "deletes": "delete_files",
    "snapshots": "snapshots",
    "commit": "last_commit_at",
}


@dataclass(frozen=True)
class TableQuery:
    """Which tables a list shows: ``filter`` (part of a table's name, any case), ``sort``, ``order``, ``page``."""

    sort: str = "table"
    order: str = "asc"
    filter: str = ""
    page: int = 1

    def key(self) -> tuple[str, str, str, int]:
        """The query as a key of cached reads."""
        return (self.sort, self.order, self.filter, self.page)


@dataclass
class _Row:
    table: Table
    overview: TableOverview
    policy: PolicyState
    status: TableStatus | None = None
    measured: bool = False

    @property
    def name(self) -> str:
        return self.table.name()[-1]  # Iceberg allows a '.' in it: the dotted full name cannot say where it starts

    def to_json(self) -> dict[str, Any]:
        return {
            **self.overview.to_json(),
            "name": self.name,
            "metadata_location": self.table.metadata_location,
            "policy": self.policy.to_json(),
            "status": None if self.status is None else self.status.to_json(),
        }


def _sort_value(row: _Row, sort: str) -> Any:
    """The value ``row`` is sorted by (``None``: unknown, listed last whatever the order)."""
    if sort == "table":
        return row.name
    if sort == "policy":
        return POLICY_STATES.index(row.policy.state)
    if sort == "health":
        status = row.status
        return None if status is None else (status.rank, -(status.score or 0.0))
    return getattr(row.overview, _OVERVIEW_KEYS[sort])


def _sorted(rows: list[_Row], sort: str, order: str) -> list[_Row]:
    """``rows`` by ``sort`` in ``order``, ties by name; rows without a value last."""
    by_name = sorted(rows, key=lambda row: row.name)
    known = [row for row in by_name if _sort_value(row, sort) is not None]
    unknown = [row for row in by_name if _sort_value(row, sort) is None]
    return sorted(known, key=lambda row: _sort_value(row, sort), reverse=order == "desc") + unknown


def table_list(
    catalog: Catalog,
    namespace: str,
    query: TableQuery,
    *,
    page_size: int,
    parallelism: int,
    measure: Callable[[Table], TableStatus],
    moment: datetime,
) -> dict[str, Any]:
    """One page of the tables of ``namespace`` as ``query`` asks, each with its status and policy state.

    ``measure`` gives a loaded table's status (the maintenance queue's measure); ``moment`` decides the policies'
    quiet hours. A page past the last is the last.

    Raises:
        NoSuchNamespaceError: The namespace does not exist.
    """

    def load(table: Table) -> _Row:
        return _Row(table, table_overview(table), policy_state(table, moment))

    rows, errors = read_tables(catalog, namespace, load, parallelism=parallelism)
    total = len(rows) + len(errors)
    wanted = query.filter.casefold()
    matched = [row for row in rows if wanted in row.name.casefold()]
    failed = {name: error for name, error in errors.items() if wanted in name.rsplit(".", 1)[-1].casefold()}

    def safely(table: Table) -> TableStatus | None:
        try:
            return measure(table)
        except Exception as exc:  # one table that cannot be measured must not hide the others' health
            log.warning("%s could not be measured: %s", ".".join(table.name()), type(exc).__name__)
            return None

    def measured(chosen: list[_Row]) -> None:
        todo = [row for row in chosen if not row.measured]
        workers = max(1, min(parallelism, len(todo)))
        with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="ui-status") as pool:
            for row, status in zip(todo, pool.map(carrying_context(safely), [r.table for r in todo]), strict=True):
                row.status, row.measured = status, True

    if query.sort == "health":
        measured(matched)
    ordered = _sorted(matched, query.sort, query.order)
    pages = max(1, math.ceil(len(ordered) / page_size))
    page = min(query.page, pages)
    shown = ordered[(page - 1) * page_size : page * page_size]
    measured(shown)
    return {
        "namespace": namespace,
        "tables": [row.to_json() for row in shown],
        "errors": failed,
        "exists": True,
        "total": total,
        "matched": len(matched),
        "sort": query.sort,
        "order": query.order,
        "filter": query.filter,
        "page": page,
        "pages": pages,
        "page_size": page_size,
    }
