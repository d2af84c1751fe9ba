"""Tags of a table, and ``main`` set back to one: create, list and drop tags; preview and make a restore.

Unlike PyIceberg's ``create_tag``, which moves a tag that exists, :func:`create_tag` refuses an existing
name unless asked to replace it. A restore is previewed first (the commits it undoes), then
:func:`restore_to_tag` moves ``main`` to the tag's snapshot in one commit that requires ``main`` to be
where the preview saw it; nothing is deleted (docs/tags-and-restore.md).
"""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

from pyiceberg.table.refs import MAIN_BRANCH, SnapshotRef, SnapshotRefType

from iceberg_ops_provider.core.refs import commit_refs, commits_since, move_ref
from iceberg_ops_provider.data_migration.state import MOVE_ID_KEY
from iceberg_ops_provider.data_steps.state import STEP_KEY
from iceberg_ops_provider.errors import RefError
from iceberg_ops_provider.maintenance.expire import ref_expires_at_ms
from iceberg_ops_provider.maintenance.group_runner import OPERATION_PROPERTY
from iceberg_ops_provider.maintenance.times import parse_age_ms
from iceberg_ops_provider.messages import Arg, message

if TYPE_CHECKING:
    from pyiceberg.table import Table
    from pyiceberg.table.metadata import TableMetadata
    from pyiceberg.table.snapshots import Snapshot

__all__ = [
    "EXPIRES_SOON",
    "RefInfo",
    "RestorePreview",
    "TagCreated",
    "TagRestored",
    "UndoneCommit",
    "create_tag",
    "drop_tag",
    "list_refs",
    "preview_restore",
    "restore_to_tag",
]

EXPIRES_SOON = timedelta(days=1)
"""A ref whose age limit runs out within this long (or has run out) is one expiry will drop soon."""

_COUNTS = {
    "added-records": "added_rows",
    "deleted-records": "deleted_rows",
    "added-data-files": "added_files",
    "deleted-data-files": "deleted_files",
}
"""Snapshot summary counts a restore preview shows, and their names in it."""


_LATEST_MS = int((datetime.max.replace(tzinfo=UTC) - datetime(1970, 1, 1, tzinfo=UTC)).total_seconds() * 1000)
"""The last moment a ``datetime`` holds, in epoch milliseconds: a ref that expires later never does, in effect."""


def _utc(epoch_ms: int) -> datetime:
    return datetime.fromtimestamp(epoch_ms / 1000, UTC)


@dataclass(frozen=True)
class RefInfo:
    """A tag or branch of a table: where it points, its age limit, and when expiry drops it.

    ``max_age_ms`` is the ref's own ``max-ref-age-ms``; ``expires_at`` applies the table's default too
    (``None``: never, as for ``main``); ``expires_soon``: within :data:`EXPIRES_SOON` of when it was read.
    """

    name: str
    kind: str
    snapshot_id: int
    committed_at: datetime | None
    max_age_ms: int | None
    expires_at: datetime | None
    expires_soon: bool

    def to_json(self) -> dict[str, Any]:
        """JSON-able form (times as ISO 8601)."""
        return {
            **asdict(self),
            "committed_at": self.committed_at.isoformat() if self.committed_at else None,
            "expires_at": self.expires_at.isoformat() if self.expires_at else None,
        }


def _ref_info(metadata: TableMetadata, name: str, now_ms: int) -> RefInfo:
    ref = metadata.refs[name]
    snapshot = metadata.snapshot_by_id(ref.snapshot_id)
    expires = ref_expires_at_ms(metadata, name)
    if expires is not None and expires > _LATEST_MS:  # an age limit such as Java's Long.MAX_VALUE: never
        expires = None
    soon = expires is not None and expires - now_ms <= EXPIRES_SOON.total_seconds() * 1000
    return RefInfo(
        name=name,
        kind=ref.snapshot_ref_type.value,
        snapshot_id=ref.snapshot_id,
        committed_at=_utc(snapshot.timestamp_ms) if snapshot is not None else None,
        max_age_ms=ref.max_ref_age_ms,
        expires_at=_utc(expires) if expires is not None else None,
        expires_soon=soon,
    )


def list_refs(table: Table) -> list[RefInfo]:
    """Every ref of ``table``: ``main`` first, then the other branches, then the tags, each by name.

    Raises:
        ValueError: The table's ``history.expire.max-ref-age-ms`` is not an integer.
    """
    metadata, now_ms = table.metadata, int(time.time() * 1000)

    def order(name: str) -> tuple[int, str]:
        kind = metadata.refs[name].snapshot_ref_type
        return (0 if name == MAIN_BRANCH else 1 if kind == SnapshotRefType.BRANCH else 2), name

    return [_ref_info(metadata, name, now_ms) for name in sorted(metadata.refs, key=order)]


def _label(table: Table) -> str:
    return ".".join(table.name())


def _tags(metadata: TableMetadata) -> list[str]:
    return sorted(name for name, ref in metadata.refs.items() if ref.snapshot_ref_type == SnapshotRefType.TAG)


def _tag(table: Table, name: str) -> SnapshotRef:
    """The tag ``name``; a :class:`RefError` when there is none (``missing``, listing the tags) or it is a branch."""
    metadata = table.metadata
    ref = metadata.refs.get(name)
    label, current = _label(table), metadata.current_snapshot_id
    if ref is None:
        tags = _tags(metadata)
        raise RefError(
            f"{label} has no tag {name!r} (never created, dropped, or removed by snapshot expiry); its tags: "
            f"{', '.join(tags) or 'none'}. Nothing was changed.",
            table=label,
            ref=name,
            reason="missing",
            current_snapshot_id=current,
            tags=tags,
        )
    if ref.snapshot_ref_type != SnapshotRefType.TAG:
        raise RefError(
            f"{name!r} of {label} is a branch, not a tag: only tags are created, dropped and restored to here. "
            "Nothing was changed.",
            table=label,
            ref=name,
            reason="branch",
            snapshot_id=ref.snapshot_id,
            current_snapshot_id=current,
            tags=_tags(metadata),
        )
    return ref


@dataclass(frozen=True)
class TagCreated:
    """What :func:`create_tag` did: the tag as it is now; ``created`` is ``False`` when it was there already.

    ``replaced``: the snapshot an existing tag pointed at before it was moved (``None`` unless replaced).
    """

    table: str
    tag: RefInfo
    created: bool
    replaced: int | None = None

    def to_json(self) -> dict[str, Any]:
        """JSON-able form (what the operator pushes to XCom, with ``tag`` and ``snapshot_id`` on top)."""
        return {
            "table": self.table,
            "tag": self.tag.name,
            "snapshot_id": self.tag.snapshot_id,
            "created": self.created,
            "replaced": self.replaced,
            "ref": self.tag.to_json(),
        }


def create_tag(
    table: Table,
    name: str,
    *,
    snapshot_id: int | None = None,
    max_age: timedelta | int | str | None = None,
    exist_ok: bool = False,
    replace: bool = False,
) -> TagCreated:
    """Tag ``snapshot_id`` (default: ``main``'s head) as ``name``, in one commit requiring no such ref meanwhile.

    Args:
        table: The table.
        name: The tag's name.
        snapshot_id: The snapshot to tag; default the table's current one.
        max_age: How long snapshot expiry keeps the tag, counted from the tagged snapshot's commit
            (``"7d"``, ``"12h"``, ``"30m"``, a ``timedelta`` or milliseconds); default the table's
            ``history.expire.max-ref-age-ms`` (forever).
        exist_ok: A tag ``name`` on that very snapshot, with that age limit, is fine: nothing is committed
            (a retried task, a command run again).
        replace: A tag ``name`` on another snapshot is moved to this one (never a branch).

    Raises:
        RefError: An empty name; a ref of that name (``exists``, naming its snapshot); an unknown
            snapshot (``unknown_snapshot``, naming the current one); no snapshot to tag (``no_snapshot``).
        RefMovedError: A ref of that name was created, moved or dropped meanwhile.
        ValueError: ``max_age`` is not a positive age.
    """
    metadata, label = table.metadata, _label(table)
    max_age_ms = parse_age_ms(max_age) if max_age is not None else None
    current = metadata.current_snapshot_id
    if not name or name.strip() != name:
        raise RefError(
            f"{name!r} is not a tag name: give a name that is not empty and has no spaces around it.",
            table=label,
            ref=name,
            reason="invalid_name",
            current_snapshot_id=current,
        )
    target = current if snapshot_id is None else snapshot_id
    if target is None:
        raise RefError(
            f"{label} has no snapshot yet: there is nothing to tag. Nothing was changed.",
            table=label,
            ref=name,
            reason="no_snapshot",
        )
    if metadata.snapshot_by_id(target) is None:
        raise RefError(
            message(
                f"{label} has no snapshot {target} (it may have expired); its current snapshot is {current}. "
                "Give one of its snapshots, or leave out {snapshot_id} to tag the current one. Nothing was changed.",
                about="snapshot_id",
                snapshot_id=Arg("snapshot_id"),
            ),
            table=label,
            ref=name,
            reason="unknown_snapshot",
            snapshot_id=target,
            current_snapshot_id=current,
        )
    existing = metadata.refs.get(name)
    if existing is not None:
        is_tag = existing.snapshot_ref_type == SnapshotRefType.TAG
        if is_tag and exist_ok and existing.snapshot_id == target and existing.max_ref_age_ms == max_age_ms:
            return TagCreated(label, _ref_info(metadata, name, int(time.time() * 1000)), created=False)
        if not (is_tag and replace):
            kind, fix = ("tag", "Drop it first, or choose") if is_tag else ("branch", "Choose")
            raise RefError(
                f"{label} already has a {kind} {name!r}, on snapshot {existing.snapshot_id}"
                f"{' (the one asked for)' if existing.snapshot_id == target else ''}; it was not moved. {fix} "
                "another name. Nothing was changed.",
                table=label,
                ref=name,
                reason="exists",
                snapshot_id=existing.snapshot_id,
                current_snapshot_id=current,
                tags=_tags(metadata),
            )
    tag = SnapshotRef(snapshot_id=target, snapshot_ref_type=SnapshotRefType.TAG, max_ref_age_ms=max_age_ms)
    before = existing.snapshot_id if existing is not None else None
    commit_refs(table, expected={name: before}, set_refs={name: tag})
    return TagCreated(label, _ref_info(table.metadata, name, int(time.time() * 1000)), created=True, replaced=before)


def drop_tag(table: Table, name: str) -> RefInfo:
    """Remove the tag ``name`` in one commit requiring it unmoved; the tag as it was.

    The snapshot stays; snapshot expiry removes it (and the files only it holds) when nothing else keeps it.

    Raises:
        RefError: No such tag (``missing``, listing the tags) or ``name`` is a branch.
        RefMovedError: The tag was moved or dropped meanwhile.
    """
    ref = _tag(table, name)
    dropped = _ref_info(table.metadata, name, int(time.time() * 1000))
    commit_refs(table, expected={name: ref.snapshot_id}, remove=(name,))
    return dropped


@dataclass(frozen=True)
class UndoneCommit:
    """A commit on ``main`` that a restore undoes: its snapshot, time, operation and summary counts.

    ``committed_by`` names the iceberg-ops job that made it, when its summary says so: ``data_step``,
    ``move`` or ``compaction``, with ``committed_by_id`` (a step's or move's id).
    """

    snapshot_id: int
    committed_at: datetime
    operation: str
    counts: dict[str, int] = field(default_factory=dict)
    committed_by: str | None = None
    committed_by_id: str | None = None

    @classmethod
    def of(cls, snapshot: Snapshot) -> UndoneCommit:
        """The commit ``snapshot`` made."""
        summary = snapshot.summary
        properties = dict(summary.additional_properties) if summary is not None else {}
        counts = {name: int(properties[key]) for key, name in _COUNTS.items() if properties.get(key, "").isdigit()}
        by, by_id = None, None
        if properties.get(STEP_KEY):
            by, by_id = "data_step", properties[STEP_KEY]
        elif properties.get(MOVE_ID_KEY):
            by, by_id = "move", properties[MOVE_ID_KEY]
        elif properties.get(OPERATION_PROPERTY) == "compaction":
            by = "compaction"
        operation = summary.operation.value if summary is not None else "unknown"
        return cls(snapshot.snapshot_id, _utc(snapshot.timestamp_ms), operation, counts, by, by_id)

    def to_json(self) -> dict[str, Any]:
        """JSON-able form."""
        return {**asdict(self), "committed_at": self.committed_at.isoformat()}


@dataclass(frozen=True)
class RestorePreview:
    """What setting ``main`` back to tag ``tag`` would undo; read only.

    ``undone``: the commits on ``main`` that are not ancestors of the tagged snapshot, newest first (none
    when ``main`` is there already, or behind it); ``descends``: whether ``main`` descends from the tag.
    """

    table: str
    tag: str
    tag_snapshot_id: int
    head_snapshot_id: int | None
    descends: bool
    undone: tuple[UndoneCommit, ...] = ()

    @property
    def changes(self) -> bool:
        """Whether a restore would move ``main`` at all."""
        return self.head_snapshot_id != self.tag_snapshot_id

    def to_json(self) -> dict[str, Any]:
        """JSON-able form."""
        return {
            "table": self.table,
            "tag": self.tag,
            "tag_snapshot_id": self.tag_snapshot_id,
            "head_snapshot_id": self.head_snapshot_id,
            "descends": self.descends,
            "changes": self.changes,
            "undone": [commit.to_json() for commit in self.undone],
        }


def preview_restore(table: Table, tag: str) -> RestorePreview:
    """What :func:`restore_to_tag` would undo: the commits on ``main`` since tag ``tag``'s snapshot.

    Raises:
        RefError: No such tag (``missing``, listing the tags) or ``tag`` is a branch.
    """
    ref = _tag(table, tag)
    metadata = table.metadata
    main = metadata.refs.get(MAIN_BRANCH)
    head = main.snapshot_id if main is not None else None
    undone = commits_since(metadata, head, ref.snapshot_id)
    since_tag = commits_since(metadata, ref.snapshot_id, head)
    descends = not since_tag  # every ancestor of the tagged snapshot is one of main's
    return RestorePreview(_label(table), tag, ref.snapshot_id, head, descends, tuple(map(UndoneCommit.of, undone)))


@dataclass(frozen=True)
class TagRestored:
    """What :func:`restore_to_tag` did: ``main`` moved from ``from_snapshot_id`` to ``to_snapshot_id``.

    ``moved`` is ``False`` when ``main`` was there already. Nothing was deleted: the undone snapshots stay
    until snapshot expiry removes them.
    """

    table: str
    tag: str
    from_snapshot_id: int | None
    to_snapshot_id: int
    moved: bool
    undone: int

    def to_json(self) -> dict[str, Any]:
        """JSON-able form."""
        return {"kind": "restore", **asdict(self)}


def restore_to_tag(table: Table, preview: RestorePreview) -> TagRestored:
    """Set ``main`` to the tagged snapshot ``preview`` showed, in one commit requiring ``main`` where it showed it.

    The tag must still point where it did too. ``main`` keeps its retention fields, the tag stays, and
    no snapshot or file is removed.

    Raises:
        ValueError: ``preview`` is of another table.
        RefMovedError: A commit landed on ``main``, or the tag moved or went, since the preview (naming it).
    """
    if preview.table != _label(table):
        raise ValueError(f"The restore preview is of {preview.table}, not {_label(table)}. Nothing was changed.")
    # Also when main is there already: the requirements then say it still is, and nothing is written.
    move_ref(
        table,
        MAIN_BRANCH,
        preview.tag_snapshot_id,
        expected=preview.head_snapshot_id,
        also_expected={preview.tag: preview.tag_snapshot_id},
    )
    undone = len(preview.undone)
    return TagRestored(
        preview.table, preview.tag, preview.head_snapshot_id, preview.tag_snapshot_id, preview.changes, undone
    )
