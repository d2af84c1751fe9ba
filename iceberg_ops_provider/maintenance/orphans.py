"""Orphan removal: delete the files under a table's location that no metadata references (Spark's procedure).

Only files older than ``older_than`` go, nothing is deleted unless the whole listing succeeded, and files of
other tables inside the location are kept (``docs/maintenance/remove_orphan_files.md``).
"""

from __future__ import annotations

import logging
import os
from concurrent.futures import ThreadPoolExecutor, wait
from dataclasses import asdict, dataclass, field, replace
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any
from urllib.parse import urlparse

from iceberg_ops_provider.errors import FileListingError, UnsafeLocationError
from iceberg_ops_provider.maintenance import files as _files
from iceberg_ops_provider.maintenance.files import ManifestReader
from iceberg_ops_provider.maintenance.listing import contains, list_files, normalize_location
from iceberg_ops_provider.maintenance.overview import catalog_namespaces
from iceberg_ops_provider.maintenance.times import parse_older_than
from iceberg_ops_provider.messages import Arg, message

if TYPE_CHECKING:
    from collections.abc import Callable, Iterable

    from pyiceberg.catalog import Catalog
    from pyiceberg.table import Table
    from pyiceberg.table.metadata import TableMetadata
    from pyiceberg.typedef import Identifier

__all__ = ["ReferencedFiles", "RemoveOrphanFilesResult", "remove_orphan_files"]

log = logging.getLogger(__name__)

DEFAULT_OLDER_THAN = timedelta(days=3)
"""Iceberg's default guard: files younger than this may belong to a write still in flight."""

_MANIFESTS_PER_BATCH = 256  # manifests whose entries are held at once while collecting references


DEFAULT_LOOKUP_TIMEOUT = 300.0
"""Seconds the whole look-up may take (listing and loading every table of the catalog)."""

_WORKERS = 8


@dataclass(frozen=True)
class NestedTable:
    """A table of the catalog whose location lies under the folder being cleaned."""

    table: str
    """Its dotted identifier."""
    location: str


def _location(catalog: Catalog, identifier: Identifier) -> str | None:
    from pyiceberg.exceptions import NoSuchTableError

    try:
        return catalog.load_table(identifier).location()
    except NoSuchTableError:  # dropped since it was listed: nothing of it to protect
        return None


def _nested(table: Table, folder: str) -> list[NestedTable]:
    """The catalog's other tables at or under ``folder``, sorted (``FileListingError`` when it cannot tell)."""
    from pyiceberg.catalog.noop import NoopCatalog

    catalog, outside = table.catalog, table.name()
    if isinstance(catalog, NoopCatalog):  # a static table
        log.info("%s has no catalog to ask for tables inside %s", ".".join(outside), folder)
        return []
    try:
        identifiers = [
            tuple(identifier)
            for namespace in catalog_namespaces(catalog)
            for identifier in catalog.list_tables(namespace)
            if tuple(identifier) != tuple(outside)
        ]
    except Exception as exc:
        raise _cannot_check(folder, f"listing the catalog's tables failed: {exc}") from exc
    log.info("looking for tables inside %s among %d other table(s) of the catalog", folder, len(identifiers))
    pool = ThreadPoolExecutor(max_workers=_WORKERS, thread_name_prefix="nested-tables")
    try:
        futures = {pool.submit(_location, catalog, identifier): identifier for identifier in identifiers}
        done, pending = wait(futures, timeout=DEFAULT_LOOKUP_TIMEOUT)
        if pending:
            raise _cannot_check(
                folder, f"{len(pending)} of {len(futures)} table(s) were not loaded in {DEFAULT_LOOKUP_TIMEOUT:g} s"
            )
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


@dataclass(frozen=True)
class RemoveOrphanFilesResult:
    """What :func:`remove_orphan_files` did (or, with ``dry_run``, would do).

    ``orphan_file_locations`` is the column Spark's procedure returns (``orphan_file_location``),
    sorted; ``deleted_orphan_files_count`` counts those deleted (a dry run: those a real run would).
    """

    table: str
    dry_run: bool
    location: str
    older_than: str
    """The guard, ISO 8601 in UTC: only files modified before it were candidates."""
    orphan_file_locations: list[str] = field(default_factory=list)
    deleted_orphan_files_count: int = 0
    failed_deletes: list[str] = field(default_factory=list)
    """``path: error`` of orphans that could not be deleted (a later run tries again)."""
    listed_files_count: int = 0
    kept_recent_files_count: int = 0
    """Unreferenced files kept because they are newer than ``older_than`` (or have no time)."""
    nested_tables: list[str] = field(default_factory=list)
    """``namespace.table: location`` of the catalog's other tables inside the cleaned folder, whose files
    were all left alone."""
    kept_nested_files_count: int = 0
    """Files listed under those tables' locations (none of them deleted)."""

    def to_json(self) -> dict[str, Any]:
        """JSON-able form (also what the operator pushes to XCom)."""
        return asdict(self)


class ReferencedFiles:
    """The normalised locations of every file a table's metadata references.

    :meth:`add` can be called again with newer metadata of the same table: only manifest lists and
    manifests not seen before are read.
    """

    def __init__(self, table: Table) -> None:
        self.io = table.io
        self.locations: set[str] = set()
        self._lists_seen: set[str] = set()
        self._manifests_seen: set[str] = set()

    def __contains__(self, location: object) -> bool:
        """Whether ``location`` (any spelling) is referenced."""
        return isinstance(location, str) and normalize_location(location) in self.locations

    def __len__(self) -> int:
        """How many distinct files are referenced."""
        return len(self.locations)

    def _keep(self, locations: Iterable[str | None]) -> None:
        self.locations.update(normalize_location(location) for location in locations if location)

    def add(self, metadata: TableMetadata, metadata_location: str | None) -> None:
        """Add what ``metadata`` (stored at ``metadata_location``) references."""
        snapshots = [s for s in metadata.snapshots if s.manifest_list not in self._lists_seen]
        self._keep(
            [
                metadata_location,
                f"{metadata.location.rstrip('/')}/metadata/version-hint.text",
                *(entry.metadata_file for entry in metadata.metadata_log),
                *(stats.statistics_path for stats in [*metadata.statistics, *metadata.partition_statistics]),
                *(snapshot.manifest_list for snapshot in snapshots),
            ]
        )
        reader = ManifestReader(self.io)
        with ThreadPoolExecutor(max_workers=8) as pool:
            lists = list(pool.map(reader.manifests, snapshots))
        self._lists_seen.update(s.manifest_list for s in snapshots)
        manifests = {
            m.manifest_path: m for listed in lists for m in listed if m.manifest_path not in self._manifests_seen
        }
        todo = list(manifests.values())
        for start in range(0, len(todo), _MANIFESTS_PER_BATCH):
            batch = todo[start : start + _MANIFESTS_PER_BATCH]
            self._keep(manifest.manifest_path for manifest in batch)
            # A fresh reader per batch: its entry cache is dropped with it, so memory stays bounded.
            self._keep(ManifestReader(self.io).live_paths(batch))
            self._manifests_seen.update(m.manifest_path for m in batch)
            if len(todo) > _MANIFESTS_PER_BATCH:
                log.info("read %d of %d manifests", min(start + _MANIFESTS_PER_BATCH, len(todo)), len(todo))


def _hidden(partition_names: set[str]) -> Callable[[str, bool], bool]:
    """Spark's filter: names starting with ``_`` or ``.`` are skipped, except partition directories."""

    def skip(name: str, is_dir: bool) -> bool:
        if not name.startswith(("_", ".")):
            return False
        return not (is_dir and "=" in name and name.split("=", 1)[0] in partition_names)

    return skip


def _utc(moment: datetime | timedelta | str | None) -> datetime:
    parsed = parse_older_than(moment)
    return datetime.now(UTC) - DEFAULT_OLDER_THAN if parsed is None else parsed.astimezone(UTC)


def _escapes_through_a_link(location: str, root: str) -> bool:
    """Whether a local file is reached through a symbolic link out of the table (deleting it would delete outside)."""
    parsed = urlparse(location)
    if parsed.scheme not in ("", "file"):
        return False
    path = parsed.path if parsed.scheme else location
    root_parsed = urlparse(root)
    root_path = root_parsed.path if root_parsed.scheme else root
    real, real_root = os.path.realpath(path), os.path.realpath(root_path)
    return os.path.islink(path) or os.path.commonpath([real, real_root]) != real_root


def remove_orphan_files(
    table: Table,
    older_than: datetime | timedelta | str | None = None,
    dry_run: bool = False,
    location: str | None = None,
    check_nested_tables: bool = True,
) -> RemoveOrphanFilesResult:
    """Delete the files under ``table``'s location that no metadata references.

    Args:
        table: The table (refreshed by the call).
        older_than: Only files modified before this are deleted: a datetime (naive ones are UTC), an age
            (``timedelta`` or ``"7d"``) or an ISO timestamp; default: three days ago. Newer unreferenced
            files may belong to writes still in flight.
        dry_run: List the orphans; delete nothing.
        location: A directory under the table's location to clean instead of all of it.
        check_nested_tables: Ask the catalog for its other tables whose location lies inside the folder
            and leave their files alone (every namespace is listed and every table loaded, in parallel).
            ``False`` skips that, for a catalog where no table can lie inside another's folder.

    Raises:
        UnsafeLocationError: ``location`` is not under the table's location.
        FileListingError: The listing failed part way (nothing was deleted), it did not show the
            table's current metadata file (an inconsistent listing: nothing was deleted), or the catalog
            could not say which of its tables lie inside the folder (nothing was listed or deleted).
        MissingExtraError: The file-system package of the location's scheme is not installed.
    """
    cutoff = _utc(older_than)
    if cutoff > datetime.now(UTC):
        log.warning("older_than %s is in the future: files of writes in flight may be deleted", cutoff.isoformat())
    cutoff_ms = int(cutoff.timestamp() * 1000)
    table.refresh()
    name = ".".join(table.name())
    root = table.location()
    target = location if location is not None else root
    if not contains(root, target):
        raise UnsafeLocationError(
            message(
                f"Location {target!r} is not under the location of table {name} ({root!r}); nothing was listed or "
                f"deleted. Pass a {{location}} under {root!r}, or leave it out to clean the whole table.",
                about="location",
                location=Arg("location"),
            )
        )

    inner = _nested(table, target) if check_nested_tables else []
    for nested in inner:
        log.info("%s: table %s lies inside, at %s; its files are left alone", name, nested.table, nested.location)
    referenced = ReferencedFiles(table)
    referenced.add(table.metadata, table.metadata_location)
    log.info("%s: %d referenced files; listing %s", name, len(referenced), target)
    must_see = normalize_location(table.metadata_location) if contains(target, table.metadata_location) else None
    listed = kept_recent = kept_nested = 0
    seen_metadata = False
    candidates: list[str] = []
    partition_names = {f.name for spec in table.metadata.specs().values() for f in spec.fields}
    for found in list_files(table.io, target, skip=_hidden(partition_names)):
        listed += 1
        key = normalize_location(found.location)
        if key in referenced.locations:
            seen_metadata = seen_metadata or key == must_see
            continue
        if any(contains(nested.location, key) for nested in inner):
            kept_nested += 1
            continue
        if found.modified_ms is None or found.modified_ms >= cutoff_ms:
            kept_recent += 1
            continue
        if _escapes_through_a_link(found.location, root):
            log.warning("%s: %s is reached through a symbolic link out of the table; left alone", name, found.location)
            continue
        candidates.append(found.location)
    if must_see is not None and not seen_metadata:
        raise FileListingError(
            f"Listing {target!r} did not show the current metadata file {table.metadata_location!r} of {name}; "
            "the listing cannot be trusted and nothing was deleted. Check that the storage lists consistently "
            "and run again."
        )

    table.refresh()  # commits that landed while listing may reference candidates (add_files of old files)
    referenced.add(table.metadata, table.metadata_location)
    orphans = sorted(path for path in candidates if path not in referenced)
    log.info("%s: %d of %d listed files are orphans older than %s", name, len(orphans), listed, cutoff.isoformat())
    result = RemoveOrphanFilesResult(
        table=name,
        dry_run=dry_run,
        location=target,
        older_than=cutoff.isoformat(),
        orphan_file_locations=orphans,
        deleted_orphan_files_count=len(orphans),
        listed_files_count=listed,
        kept_recent_files_count=kept_recent,
        nested_tables=[f"{nested.table}: {nested.location}" for nested in inner],
        kept_nested_files_count=kept_nested,
    )
    if dry_run or not orphans:
        return result
    deleted, failures = _files.delete_files(table.io, orphans, what=f"orphan files of {name}")
    log.info("%s: deleted %d orphan files (%d failed)", name, deleted, len(failures))
    return replace(result, deleted_orphan_files_count=deleted, failed_deletes=failures)
