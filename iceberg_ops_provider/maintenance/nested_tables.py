"""The catalog's tables whose location lies inside another table's folder.

A table's location may lie inside another's (``wh/outer/inner``); orphan removal of the outer table
would see the inner table's files as orphans. The look-up (every table of every namespace, loaded
concurrently) is bounded by ``timeout``; when it cannot finish, :class:`FileListingError` says so and
the caller deletes nothing. A table dropped between listing and loading is skipped.
"""

from __future__ import annotations

import logging
from concurrent.futures import ThreadPoolExecutor, wait
from dataclasses import dataclass
from typing import TYPE_CHECKING

from iceberg_ops_provider.errors import FileListingError
from iceberg_ops_provider.maintenance.listing import contains, normalize_location
from iceberg_ops_provider.messages import Arg, message

if TYPE_CHECKING:
    from pyiceberg.catalog import Catalog
    from pyiceberg.typedef import Identifier

__all__ = ["DEFAULT_LOOKUP_TIMEOUT", "NestedTable", "nested_tables"]

log = logging.getLogger(__name__)

DEFAULT_LOOKUP_TIMEOUT = 300.0
"""Seconds the whole look-up may take (listing and loading every table of the catalog)."""

_WORKERS = 8
_MAX_NAMESPACE_DEPTH = 16  # namespaces nested deeper than this are not listed (none are expected)


@dataclass(frozen=True)
class NestedTable:
    """A table of the catalog whose location lies under the folder being cleaned."""

    table: str
    """Its dotted identifier."""
    location: str


def _namespaces(catalog: Catalog) -> list[Identifier]:
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


def _location(catalog: Catalog, identifier: Identifier) -> str | None:
    from pyiceberg.exceptions import NoSuchTableError

    try:
        return catalog.load_table(identifier).location()
    except NoSuchTableError:  # dropped since it was listed: nothing of it to protect
        return None


def nested_tables(
    catalog: Catalog,
    folder: str,
    *,
    outside: Identifier,
    timeout: float = DEFAULT_LOOKUP_TIMEOUT,
) -> list[NestedTable]:
    """The tables of ``catalog`` other than ``outside`` whose location is ``folder`` or under it, sorted.

    Raises:
        FileListingError: The catalog could not be listed or a table could not be loaded in time.
    """
    try:
        identifiers = [
            tuple(identifier)
            for namespace in _namespaces(catalog)
            for identifier in catalog.list_tables(namespace)
            if tuple(identifier) != tuple(outside)
        ]
    except Exception as exc:
        raise _cannot_check(folder, f"listing the catalog's tables failed: {exc}") from exc
    log.info("looking for tables inside %s among %d other table(s) of the catalog", folder, len(identifiers))
    pool = ThreadPoolExecutor(max_workers=_WORKERS, thread_name_prefix="nested-tables")
    try:
        futures = {pool.submit(_location, catalog, identifier): identifier for identifier in identifiers}
        done, pending = wait(futures, timeout=timeout)
        if pending:
            raise _cannot_check(folder, f"{len(pending)} of {len(futures)} table(s) were not loaded in {timeout:g} s")
        found = []
        for future in done:
            try:
                location = future.result()
            except Exception as exc:
                name = ".".join(futures[future])
                raise _cannot_check(folder, f"loading table {name} failed: {exc}") from exc
            if location is not None and contains(folder, location):
                found.append(NestedTable(".".join(futures[future]), normalize_location(location)))
    finally:
        pool.shutdown(wait=False, cancel_futures=True)
    return sorted(found, key=lambda nested: nested.table)


def _cannot_check(folder: str, why: str) -> FileListingError:
    return FileListingError(
        message(
            f"Could not check which tables of the catalog lie inside {folder} ({why}); their files would look "
            "like orphans, so nothing was deleted. Run again once the catalog answers, or, if no table's location "
            "can lie inside this one, pass {check_nested_tables} to skip the check.",
            check_nested_tables=Arg("check_nested_tables", False),
        )
    )
