"""What maintenance did to a table lately, read back from its metadata.

Compactions and manifest rewrites are ``replace`` snapshots; an expiry is a metadata file of the log that
lost snapshots its predecessor had. What is read, and how much: ``docs/ui.md``.
"""

from __future__ import annotations

import json
import os
import stat
import zlib
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, Literal
from urllib.parse import urlsplit

from iceberg_ops_provider.core.threads import carrying_context
from iceberg_ops_provider.maintenance.compaction import OPERATION_PROPERTY

if TYPE_CHECKING:
    from pyiceberg.table import Table

__all__ = ["MAX_METADATA_BYTES", "MaintenanceCommit", "MaintenanceHistory", "maintenance_history", "may_read_metadata"]

MAX_METADATA_BYTES = 256 * 1024 * 1024
"""The most of one earlier metadata file read (and of it decompressed); a larger one ends the search."""

Kind = Literal["compaction", "rewrite_data_files", "rewrite_manifests", "expire_snapshots"]

_ADDED_KEYS = {"added-data-files": "added_data_files", "added-files-size": "added_bytes"}
_COMPACTION_KEYS = {
    f"iceberg-ops.compaction.{key}": key.replace("-", "_")
    for key in ("strategy", "group", "partition", "rewritten-data-files", "rewritten-bytes", "removed-delete-files")
} | _ADDED_KEYS
_REWRITE_KEYS = {"deleted-data-files": "rewritten_data_files", "removed-files-size": "rewritten_bytes"} | _ADDED_KEYS
_MANIFEST_KEYS = {
    key: key.replace("-", "_")
    for key in ("manifests-created", "manifests-replaced", "manifests-kept", "entries-processed")
}


@dataclass(frozen=True)
class MaintenanceCommit:
    """One maintenance change of a table (``snapshot_id`` is ``None`` for an expiry, which commits none).

    ``details`` says what it did, from the snapshot summary, or for an expiry ``expired_snapshots`` and
    its ``metadata_file``; counts are integers.
    """

    kind: Kind
    at: datetime
    snapshot_id: int | None
    details: dict[str, Any] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        """JSON-able form."""
        return {"kind": self.kind, "at": self.at.isoformat(), "snapshot_id": self.snapshot_id, "details": self.details}


@dataclass(frozen=True)
class MaintenanceHistory:
    """The latest maintenance of a table, newest first.

    ``expiries_searched_since`` is the time of the oldest metadata file compared (an expiry before it would
    not show), ``None`` when no earlier metadata file could be read.
    """

    table: str
    commits: list[MaintenanceCommit]
    metadata_files_read: int
    expiries_searched_since: datetime | None

    def to_json(self) -> dict[str, Any]:
        """JSON-able form."""
        since = self.expiries_searched_since
        commits = [commit.to_json() for commit in self.commits]
        return {**asdict(self), "commits": commits, "expiries_searched_since": since.isoformat() if since else None}


def _picked(summary: dict[str, str], keys: dict[str, str]) -> dict[str, Any]:
    return {
        name: int(value) if (value := summary[key]).isdigit() else value for key, name in keys.items() if key in summary
    }


Summary = tuple[int, int, dict[str, str]]
"""A snapshot as this module reads it: its id, its ``timestamp-ms`` and its summary (``operation`` included)."""


def _commit(snapshot_id: int, timestamp_ms: int, summary: dict[str, str]) -> MaintenanceCommit | None:
    if summary.get("operation") != "replace":
        return None
    at = datetime.fromtimestamp(timestamp_ms / 1000, UTC)
    if summary.get(OPERATION_PROPERTY) == "compaction":
        return MaintenanceCommit("compaction", at, snapshot_id, _picked(summary, _COMPACTION_KEYS))
    if "manifests-created" in summary or "manifests-replaced" in summary:
        return MaintenanceCommit("rewrite_manifests", at, snapshot_id, _picked(summary, _MANIFEST_KEYS))
    if "deleted-data-files" in summary or "added-data-files" in summary:
        return MaintenanceCommit("rewrite_data_files", at, snapshot_id, _picked(summary, _REWRITE_KEYS))
    return None


def _current_snapshots(table: Table) -> dict[int, Summary]:
    found = {}
    for snapshot in table.metadata.snapshots:
        summary = {}
        if snapshot.summary is not None:
            summary = {**snapshot.summary.additional_properties, "operation": snapshot.summary.operation.value}
        found[snapshot.snapshot_id] = (snapshot.snapshot_id, snapshot.timestamp_ms, summary)
    return found


def may_read_metadata(table: Table, location: str) -> bool:
    """Whether ``location`` is beside the current metadata file or under the table's, and a regular file if local."""
    current = table.metadata_location.rsplit("/", 1)[0] + "/"
    root = table.metadata.location.rstrip("/") + "/"
    if ".." in location.split("/") or not (location.startswith(current) or location.startswith(root)):
        return False
    parts = urlsplit(location)
    if parts.scheme.lower() not in ("", "file"):  # an object store: no pipe, no device
        return True
    try:  # as PyArrow's local filesystem opens it: the path, any case of the scheme
        return stat.S_ISREG(os.stat(parts.path if parts.scheme else location).st_mode)
    except OSError:
        return False


def _bounded_read(stream: Any) -> bytes | None:
    data = stream.read(MAX_METADATA_BYTES + 1)
    if len(data) > MAX_METADATA_BYTES:
        return None
    if data[:2] == b"\x1f\x8b":  # gzip-compressed metadata (``.gz.metadata.json``)
        inflater = zlib.decompressobj(wbits=31)
        data = inflater.decompress(data, MAX_METADATA_BYTES + 1)
        if len(data) > MAX_METADATA_BYTES or inflater.unconsumed_tail:
            return None
    return data


def _read_metadata(table: Table, location: str) -> tuple[dict[int, Summary], int] | None:
    """The snapshots and ``last-updated-ms`` a metadata file holds; ``None`` when it cannot, or may not, be read."""
    if not may_read_metadata(table, location):
        return None
    try:
        with table.io.new_input(location).open() as stream:
            data = _bounded_read(stream)
        if data is None:
            return None
        document = json.loads(data)
        snapshots = {}
        for snapshot in document.get("snapshots") or ():
            snapshot_id = int(snapshot["snapshot-id"])
            summary = {str(k): str(v) for k, v in (snapshot.get("summary") or {}).items()}
            snapshots[snapshot_id] = (snapshot_id, int(snapshot["timestamp-ms"]), summary)
        return snapshots, int(document["last-updated-ms"])
    except Exception:  # deleted since, unreadable: the search ends there
        return None


def _earlier(table: Table, metadata_files: int, parallelism: int) -> list[tuple[str, dict[int, Summary], int]]:
    """The newest ``metadata_files`` earlier metadata files, newest first, up to the first that is gone."""
    log = [entry.metadata_file for entry in table.metadata.metadata_log][-metadata_files:] if metadata_files else []
    if not log:
        return []
    with ThreadPoolExecutor(max_workers=max(1, min(parallelism, len(log))), thread_name_prefix="metadata") as pool:
        read = list(pool.map(carrying_context(lambda location: _read_metadata(table, location)), log))
    chain = []
    for location, found in zip(reversed(log), reversed(read), strict=True):
        if found is None:  # older files cannot be compared in order without it
            break
        chain.append((location, found[0], found[1]))
    return chain


def _expiries(table: Table, chain: list[tuple[str, dict[int, Summary], int]]) -> list[MaintenanceCommit]:
    found = []
    newer_location, newer_ids = table.metadata_location, set(_current_snapshots(table))
    newer_at = table.metadata.last_updated_ms
    for location, snapshots, updated_ms in chain:
        expired = set(snapshots) - newer_ids
        if expired:
            found.append(
                MaintenanceCommit(
                    "expire_snapshots",
                    datetime.fromtimestamp(newer_at / 1000, UTC),
                    None,
                    {"expired_snapshots": len(expired), "metadata_file": newer_location},
                )
            )
        newer_location, newer_ids, newer_at = location, set(snapshots), updated_ms
    return found


def maintenance_history(
    table: Table, *, limit: int = 20, metadata_files: int = 20, parallelism: int = 8
) -> MaintenanceHistory:
    """The latest ``limit`` maintenance changes of ``table`` as loaded, newest first.

    ``metadata_files`` is how many of the newest earlier metadata files are read to find expiries (0: none),
    ``parallelism`` of them at a time.
    """
    chain = _earlier(table, metadata_files, parallelism)
    snapshots = _current_snapshots(table)
    for _, earlier, _ in chain:  # snapshots expired since are still described by the metadata files before it
        for snapshot_id, snapshot in earlier.items():
            snapshots.setdefault(snapshot_id, snapshot)
    found = [commit for commit in (_commit(*snapshot) for snapshot in snapshots.values()) if commit is not None]
    commits = sorted([*found, *_expiries(table, chain)], key=lambda commit: commit.at, reverse=True)
    oldest_ms = chain[-1][2] if chain else None
    return MaintenanceHistory(
        table=".".join(table.name()),
        commits=commits[:limit],
        metadata_files_read=len(chain),
        expiries_searched_since=datetime.fromtimestamp(oldest_ms / 1000, UTC) if oldest_ms is not None else None,
    )
