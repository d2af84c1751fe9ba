"""Snapshot expiry that also deletes the files nothing needs any more (PyIceberg's deletes none).

Which snapshots go follows Java's ``ExpireSnapshots``; the commit asserts no ref moved since the plan, and
files are deleted only after it landed (``docs/maintenance/expire_snapshots.md``).
"""

from __future__ import annotations

import contextlib
import logging
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field, fields, replace
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any, TypeVar

from pyiceberg.exceptions import CommitFailedException
from pyiceberg.serializers import FromInputFile
from pyiceberg.table.refs import MAIN_BRANCH, SnapshotRefType
from pyiceberg.table.snapshots import ancestors_of
from pyiceberg.table.update import (
    AddSnapshotUpdate,
    AssertRefSnapshotId,
    AssertTableUUID,
    RemovePartitionStatisticsUpdate,
    RemoveSnapshotRefUpdate,
    RemoveSnapshotsUpdate,
    SetSnapshotRefUpdate,
)

from iceberg_ops_provider.core.refs import history_to_keep
from iceberg_ops_provider.core.retrying import rereads
from iceberg_ops_provider.errors import MaintenanceConflictError
from iceberg_ops_provider.maintenance import files as _files
from iceberg_ops_provider.maintenance.files import ManifestReader
from iceberg_ops_provider.maintenance.times import parse_older_than

if TYPE_CHECKING:
    from pyiceberg.table import Table
    from pyiceberg.table.metadata import TableMetadata
    from pyiceberg.table.snapshots import Snapshot

__all__ = ["ExpirePlan", "ExpireSnapshotsResult", "expire_snapshots", "plan_expiry", "ref_expires_at_ms"]

log = logging.getLogger(__name__)
T = TypeVar("T")

MAX_SNAPSHOT_AGE_MS = "history.expire.max-snapshot-age-ms"
MIN_SNAPSHOTS_TO_KEEP = "history.expire.min-snapshots-to-keep"
MAX_REF_AGE_MS = "history.expire.max-ref-age-ms"
DEFAULT_MAX_SNAPSHOT_AGE_MS = 5 * 24 * 3600 * 1000  # Iceberg's default: 5 days
_COMMIT_ATTEMPTS = 4


@dataclass(frozen=True)
class ExpirePlan:
    """What an expiry would change: snapshots removed and kept, refs past their ``max-ref-age-ms``.

    Snapshots committed before ``cutoff_ms`` may go, unless a branch keeps them.
    """

    expired_snapshot_ids: tuple[int, ...]
    removed_refs: tuple[str, ...]
    retained_snapshot_ids: tuple[int, ...]
    cutoff_ms: int | None = None


@dataclass(frozen=True)
class ExpireSnapshotsResult:
    """What :func:`expire_snapshots` did (or, with ``dry_run``, would do).

    Counts use the names of Spark's ``expire_snapshots`` procedure. ``older_than`` is the cut-off used
    (ISO, UTC): snapshots committed before it may go, unless a branch's own settings keep them.
    """

    table: str
    dry_run: bool
    older_than: str | None = None
    expired_snapshot_ids: list[int] = field(default_factory=list)
    removed_refs: list[str] = field(default_factory=list)
    deleted_data_files_count: int = 0
    deleted_position_delete_files_count: int = 0
    deleted_equality_delete_files_count: int = 0
    deleted_manifest_files_count: int = 0
    deleted_manifest_lists_count: int = 0
    deleted_statistics_files_count: int = 0
    deleted_metadata_files_count: int = 0
    deleted_bytes: int = 0
    failed_deletes: list[str] = field(default_factory=list)
    """``path: error`` of files that could not be deleted (left for orphan removal)."""

    @property
    def deleted_files_count(self) -> int:
        """Every file deleted, of any kind."""
        return sum(getattr(self, f.name) for f in fields(self) if f.name.endswith(("_files_count", "_lists_count")))

    def to_json(self) -> dict[str, Any]:
        """JSON-able form (also what the operator pushes to XCom)."""
        return {**asdict(self), "deleted_files_count": self.deleted_files_count}


def _int_property(metadata: TableMetadata, key: str, default: int | None) -> int | None:
    raw = metadata.properties.get(key)
    if raw is None:
        return default
    try:
        return int(raw)
    except ValueError as exc:
        raise ValueError(f"Table property {key}={raw!r} is not an integer; fix it with a property update.") from exc


def plan_expiry(
    metadata: TableMetadata, *, now_ms: int, older_than_ms: int | None = None, retain_last: int = 1
) -> ExpirePlan:
    """Decide which snapshots and refs an expiry removes (pure: reads only ``metadata``).

    Args:
        metadata: The table's metadata.
        now_ms: The current time in epoch milliseconds.
        older_than_ms: Snapshots older than this may go; default: now minus the table's
            ``history.expire.max-snapshot-age-ms`` (5 days).
        retain_last: Ancestors of each branch head kept whatever their age (at least the table's
            ``history.expire.min-snapshots-to-keep``; a branch's own setting wins).
    """
    if retain_last < 1:
        raise ValueError(f"retain_last must be at least 1 (the current snapshot always stays), got {retain_last}.")
    default_age = _int_property(metadata, MAX_SNAPSHOT_AGE_MS, DEFAULT_MAX_SNAPSHOT_AGE_MS)
    default_cutoff = older_than_ms if older_than_ms is not None else now_ms - (default_age or 0)
    default_keep = max(retain_last, _int_property(metadata, MIN_SNAPSHOTS_TO_KEEP, 1) or 1)
    _int_property(metadata, MAX_REF_AGE_MS, None)  # a bad value fails the plan, refs or not
    removed_refs: list[str] = []
    retained: set[int] = set()
    for name, ref in metadata.refs.items():
        expires = ref_expires_at_ms(metadata, name)
        if expires is not None and now_ms > expires:
            removed_refs.append(name)
            continue
        if ref.snapshot_ref_type == SnapshotRefType.TAG:
            retained.add(ref.snapshot_id)
            continue
        keep = ref.min_snapshots_to_keep or default_keep
        cutoff = now_ms - ref.max_snapshot_age_ms if ref.max_snapshot_age_ms else default_cutoff
        for count, snapshot in enumerate(ancestors_of(metadata.snapshot_by_id(ref.snapshot_id), metadata)):
            if count >= keep and snapshot.timestamp_ms < cutoff:
                break
            retained.add(snapshot.snapshot_id)

    in_some_branch: set[int] = set()
    for name, ref in metadata.refs.items():
        if name not in removed_refs and ref.snapshot_ref_type == SnapshotRefType.BRANCH:
            in_some_branch.update(
                s.snapshot_id for s in ancestors_of(metadata.snapshot_by_id(ref.snapshot_id), metadata)
            )
    for snapshot in metadata.snapshots:
        # A snapshot no branch reaches (left by a rollback, or by a removed ref) ages out like Java's.
        if snapshot.snapshot_id not in in_some_branch and snapshot.timestamp_ms >= default_cutoff:
            retained.add(snapshot.snapshot_id)
    if metadata.current_snapshot_id is not None:
        retained.add(metadata.current_snapshot_id)
    retained |= history_to_keep(metadata)  # a move's open branch, back to its fork

    expired = tuple(s.snapshot_id for s in metadata.snapshots if s.snapshot_id not in retained)
    kept = tuple(s.snapshot_id for s in metadata.snapshots if s.snapshot_id in retained)
    return ExpirePlan(expired, tuple(removed_refs), kept, default_cutoff)


def ref_expires_at_ms(metadata: TableMetadata, name: str) -> int | None:
    """When expiry starts removing ref ``name`` (epoch ms), by its ``max-ref-age-ms`` or the table's default.

    A ref's age is that of the snapshot it points at, as in Java's ``RemoveSnapshots``; ``None`` for
    ``main``, a ref without an age limit, and one whose snapshot is not in the metadata.

    Raises:
        ValueError: The table's ``history.expire.max-ref-age-ms`` is not an integer.
    """
    ref = metadata.refs.get(name)
    if name == MAIN_BRANCH or ref is None:
        return None
    max_ref_age = ref.max_ref_age_ms or _int_property(metadata, MAX_REF_AGE_MS, None)
    head = metadata.snapshot_by_id(ref.snapshot_id)
    if not max_ref_age or head is None:
        return None
    return head.timestamp_ms + max_ref_age


@dataclass
class _Doomed:
    """Files an expiry makes unreachable, by kind."""

    by_kind: dict[str, list[str]] = field(default_factory=dict)
    bytes: int = 0

    def add(self, kind: str, path: str, size: int = 0) -> None:
        self.by_kind.setdefault(kind, []).append(path)
        self.bytes += size


def _unreachable_files(
    table: Table, planned_on: TableMetadata, plan: ExpirePlan, retained: list[Snapshot] | None = None
) -> _Doomed:
    """The files of the expired snapshots of ``planned_on`` that no ``retained`` (default: the plan's) lists."""
    reader = ManifestReader(table.io)
    doomed = _Doomed()
    gone_ids = set(plan.expired_snapshot_ids)
    expired = [s for s in planned_on.snapshots if s.snapshot_id in gone_ids]
    if retained is None:
        retained = [s for s in planned_on.snapshots if s.snapshot_id not in gone_ids]
    retained = [s for s in retained if s.snapshot_id not in gone_ids]
    if not expired:
        return doomed
    # A retained snapshot's manifest that is missing raises FileNotFoundError: without it, which files
    # are still live cannot be known (the caller plans again against fresher metadata).
    kept_manifests = {m.manifest_path: m for s in retained for m in reader.manifests(s)}
    gone_manifests = {
        m.manifest_path: m
        for s in expired
        for m in _unless_deleted(reader.manifests, s, s.manifest_list)
        if m.manifest_path not in kept_manifests
    }
    for snapshot in expired:
        doomed.add("manifest_lists", snapshot.manifest_list)
    for path, manifest in gone_manifests.items():
        doomed.add("manifests", path, manifest.manifest_length)
    if gone_manifests:
        with contextlib.suppress(FileNotFoundError):  # read one by one below, skipping the missing
            reader.prefetch(gone_manifests.values())
        candidates = {
            entry.path: entry
            for m in gone_manifests.values()
            for entry in _unless_deleted(reader.entries, m, m.manifest_path)
        }
        # Every kept manifest is read: a path removed once may have been added again later (add_files),
        # so no property of a manifest (such as its sequence numbers) proves it does not list a candidate.
        still_live = reader.live_paths(kept_manifests.values())
        for path, entry in candidates.items():
            if path not in still_live:
                doomed.add(entry.content, path, entry.size)
    # Table statistics (Puffin) and partition statistics files, as Java's expiry deletes both.
    for statistics in [*planned_on.statistics, *planned_on.partition_statistics]:
        if statistics.snapshot_id in gone_ids:
            doomed.add("statistics", statistics.statistics_path)
    return doomed


def deletes_metadata(metadata: TableMetadata) -> bool:
    """Whether the table's owner lets old metadata files be deleted (as Iceberg does only when asked)."""
    return metadata.properties.get("write.metadata.delete-after-commit.enabled", "false").lower() == "true"


def _restore_refs_created_meanwhile(
    table: Table, planned_on: TableMetadata, plan: ExpirePlan
) -> tuple[int, ...] | None:
    """Put back refs created on expired snapshots since the plan; the ids put back (``None``: the base is unread)."""
    known = {name: ref.snapshot_id for name, ref in planned_on.refs.items()}
    log_entries = table.metadata.metadata_log
    if not log_entries:
        return None
    try:
        base = FromInputFile.table_metadata(table.io.new_input(log_entries[-1].metadata_file))
    except Exception:
        return None
    expired = set(plan.expired_snapshot_ids)
    lost = {
        name: ref
        for name, ref in base.refs.items()
        if ref.snapshot_id in expired and known.get(name) != ref.snapshot_id and name not in table.metadata.refs
    }
    if not lost:
        return ()
    updates: list[Any] = []
    for snapshot_id in sorted({ref.snapshot_id for ref in lost.values()}):
        snapshot = base.snapshot_by_id(snapshot_id)
        if snapshot is not None:
            updates.append(AddSnapshotUpdate(snapshot=snapshot.model_copy(update={"parent_snapshot_id": None})))
    updates += [SetSnapshotRefUpdate(ref_name=name, **ref.model_dump(by_alias=True)) for name, ref in lost.items()]
    requirements = [AssertTableUUID(uuid=table.metadata.table_uuid)]
    requirements += [AssertRefSnapshotId(ref=name, snapshot_id=None) for name in lost]
    with table.transaction() as transaction:
        transaction._apply(tuple(updates), tuple(requirements))
    log.warning(
        "%s: ref(s) %s were created on snapshots this expiry removed at the same time; they were put back",
        ".".join(table.name()),
        ", ".join(sorted(lost)),
    )
    return tuple(sorted({ref.snapshot_id for ref in lost.values()}))


def _commit(table: Table, plan: ExpirePlan) -> None:
    """Remove the planned refs and snapshots in one commit that fails if any ref moved meanwhile."""
    metadata = table.metadata
    requirements: list[Any] = [AssertTableUUID(uuid=metadata.table_uuid)]
    requirements += [AssertRefSnapshotId(ref=name, snapshot_id=ref.snapshot_id) for name, ref in metadata.refs.items()]
    updates: list[Any] = [RemoveSnapshotRefUpdate(ref_name=name) for name in plan.removed_refs]
    if plan.expired_snapshot_ids:
        updates.append(RemoveSnapshotsUpdate(snapshot_ids=list(plan.expired_snapshot_ids)))
        # PyIceberg drops the expired snapshots' table statistics but not their partition statistics.
        expired = set(plan.expired_snapshot_ids)
        updates += [
            RemovePartitionStatisticsUpdate(snapshot_id=stats.snapshot_id)
            for stats in metadata.partition_statistics
            if stats.snapshot_id in expired
        ]
    try:
        with table.transaction() as transaction:
            transaction._apply(tuple(updates), tuple(requirements))
    except ValueError as exc:
        # Another expiry removed one of these snapshots first (PyIceberg reports it with a dump of
        # every snapshot): a lost race like any other, planned again by the caller.
        if "does not exist" in str(exc):
            raise _SnapshotGone("a snapshot planned for expiry was already removed by another expiry") from None
        raise


class _SnapshotGone(Exception):
    """A snapshot planned for expiry was removed by a concurrent expiry."""


def _unless_deleted(read: Callable[[Any], list[T]], item: Any, path: str) -> list[T]:
    """What ``read(item)`` lists, or nothing when another expiry already deleted the file at ``path``."""
    try:
        return read(item)
    except FileNotFoundError:
        log.info("%s is already gone (another expiry deleted it)", path)
        return []


def _concurrent_expiry(name: str, committed: bool, exc: Exception) -> MaintenanceConflictError:
    done = (
        "This run's commit landed, but it deleted no file; what the expired snapshots alone referenced is left for "
        "a later expiry or orphan removal to delete."
        if committed
        else "Nothing was committed or deleted."
    )
    return MaintenanceConflictError(
        f"{name}: a manifest this expiry had to read was deleted while it ran ({exc}); another expiry of the table "
        f"is most likely running at the same time. {done} Run it again once the other one finished (if none ran, "
        "the table's metadata lists a file that is gone: check the table)."
    )


def expire_snapshots(
    table: Table,
    older_than: datetime | timedelta | str | None = None,
    retain_last: int = 1,
    delete_files: bool = True,
    dry_run: bool = False,
) -> ExpireSnapshotsResult:
    """Expire old snapshots of ``table`` and delete the files no retained snapshot or ref reaches.

    Args:
        table: The table (refreshed by the call).
        older_than: Snapshots committed before this may be expired: a datetime (naive ones are UTC), an
            age (``timedelta`` or ``"7d"``) or an ISO timestamp; default:
            now minus the table's ``history.expire.max-snapshot-age-ms`` (5 days).
        retain_last: How many of each branch's latest snapshots stay whatever their age.
        delete_files: Delete data, delete, manifest, manifest-list, statistics and dropped metadata
            files that became unreachable (``False``: only change the metadata, like PyIceberg).
        dry_run: Report what would be expired and deleted; change nothing.

    Raises:
        ValueError: ``retain_last`` below 1, or a ``history.expire.*`` property that is not a number.
        CommitFailedException: Other commits moved the table's refs on every attempt.
        MaintenanceConflictError: Another expiry running at the same time kept deleting manifests this one
            had to read (transient: a rerun finishes the job).
    """
    older_than = parse_older_than(older_than)
    older_than_ms = int(older_than.timestamp() * 1000) if older_than is not None else None
    name = ".".join(table.name())
    for attempt in range(1, _COMMIT_ATTEMPTS + 1):
        table.refresh()
        metadata = table.metadata
        plan = plan_expiry(
            metadata, now_ms=int(time.time() * 1000), older_than_ms=older_than_ms, retain_last=retain_last
        )
        if not plan.expired_snapshot_ids and not plan.removed_refs:
            return ExpireSnapshotsResult(name, dry_run, _iso(plan.cutoff_ms))
        log_before = [entry.metadata_file for entry in metadata.metadata_log] + [table.metadata_location]
        if dry_run:
            try:
                doomed = _unreachable_files(table, metadata, plan) if delete_files else _Doomed()
            except FileNotFoundError as exc:  # another expiry removed what a retained snapshot lists
                if attempt == _COMMIT_ATTEMPTS:
                    raise _concurrent_expiry(name, False, exc) from exc
                log.info("%s: a file changed under the plan (a concurrent expiry?); planning again", name)
                continue
            keep = _int_property(metadata, "write.metadata.previous-versions-max", 100) or 100
            dropped = (
                log_before[: max(0, len(log_before) - keep)] if delete_files and deletes_metadata(metadata) else []
            )
            return _result(name, True, plan, doomed, dropped, [])
        try:
            _commit(table, plan)
        except (CommitFailedException, _SnapshotGone) as exc:
            if attempt == _COMMIT_ATTEMPTS:
                raise CommitFailedException(f"{name}: other commits changed the table on every attempt: {exc}") from exc
            log.info("%s: a concurrent commit changed the table; planning the expiry again", name)
            continue
        log.info("%s: expired %d snapshot(s)", name, len(plan.expired_snapshot_ids))
        restored = _restore_refs_created_meanwhile(table, metadata, plan)
        if restored is None:
            log.warning("%s: could not check the commit's base for refs created meanwhile; no file deleted", name)
            return _result(name, False, plan, _Doomed(), [], [])
        if restored:
            # A ref created while this expiry ran pointed at a snapshot it removed: the ref and its
            # snapshot are back, and nothing they reach is deleted.
            plan = replace(
                plan,
                expired_snapshot_ids=tuple(i for i in plan.expired_snapshot_ids if i not in restored),
                retained_snapshot_ids=(*plan.retained_snapshot_ids, *restored),
            )
        if not delete_files:
            return _result(name, False, plan, _Doomed(), [], [])
        doomed = _after_commit(table, metadata, plan, name)
        log_after = {entry.metadata_file for entry in table.metadata.metadata_log} | {table.metadata_location}
        dropped = [path for path in log_before if path not in log_after] if deletes_metadata(metadata) else []
        failures: list[str] = []
        for kind, paths in [*doomed.by_kind.items(), ("metadata", dropped)]:
            failures += _files.delete_files(table.io, paths, what=f"{kind.replace('_', ' ')} of {name}")[1]
        return _result(name, False, plan, doomed, dropped, failures)
    raise AssertionError("unreachable")  # pragma: no cover


def _after_commit(table: Table, metadata: TableMetadata, plan: ExpirePlan, name: str) -> _Doomed:
    """The files to delete once the expiry committed, decided against the table as it is now."""
    try:
        for attempt in rereads(_COMMIT_ATTEMPTS):
            with attempt:
                if attempt.retry_state.attempt_number > 1:
                    log.info("%s: a retained manifest is gone (a concurrent expiry?); reading the table again", name)
                table.refresh()
                return _unreachable_files(table, metadata, plan, retained=list(table.metadata.snapshots))
    except FileNotFoundError as exc:
        raise _concurrent_expiry(name, True, exc) from exc
    raise AssertionError("unreachable")  # pragma: no cover


def _iso(epoch_ms: int | None) -> str | None:
    return None if epoch_ms is None else datetime.fromtimestamp(epoch_ms / 1000, UTC).isoformat(timespec="seconds")


def _result(
    name: str, dry_run: bool, plan: ExpirePlan, doomed: _Doomed, metadata_files: list[str], failures: list[str]
) -> ExpireSnapshotsResult:
    failed = {failure.rsplit(": ", 2)[0] for failure in failures}

    def count(kind: str) -> int:
        return sum(path not in failed for path in doomed.by_kind.get(kind, []))

    return ExpireSnapshotsResult(
        table=name,
        dry_run=dry_run,
        older_than=_iso(plan.cutoff_ms),
        expired_snapshot_ids=list(plan.expired_snapshot_ids),
        removed_refs=list(plan.removed_refs),
        deleted_data_files_count=count("data"),
        deleted_position_delete_files_count=count("position_deletes"),
        deleted_equality_delete_files_count=count("equality_deletes"),
        deleted_manifest_files_count=count("manifests"),
        deleted_manifest_lists_count=count("manifest_lists"),
        deleted_statistics_files_count=count("statistics"),
        deleted_metadata_files_count=sum(path not in failed for path in metadata_files),
        deleted_bytes=doomed.bytes,
        failed_deletes=failures,
    )
