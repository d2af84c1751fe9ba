"""Publishing a move's audited branch onto ``main``, exactly once, in one metadata commit; or discarding it.

While ``main`` is still at the fork, ``main`` is fast-forwarded to the audited snapshot and the branch
removed, in one commit that requires ``main`` at the fork and the branch at the audited snapshot
(:func:`~iceberg_ops_provider.core.refs.commit_refs`). When others appended to ``main`` meanwhile,
the data files the move added on the branch are appended to ``main`` in one commit that carries the
move's state and a receipt (``iceberg-ops.published-branch`` = ``<branch>@<audited id>``) and
requires ``main``'s head as read and the branch at the audited snapshot; the branch is removed
after. Either way a publish run again (after a crash, by a retry) finds the audited snapshot in
``main``'s history, or the receipt, and commits nothing. No data file is read or written.

Another engine may fast-forward ``main`` onto the branch itself (Spark's ``fast_forward`` procedure),
leaving the branch and its record. A publish then finds the audited snapshot in ``main``'s history
(``already_published``) and removes the branch; and when the move ran on into the branch first, the
branch snapshot ``main`` was moved to takes the fork's place: ``main`` still there is fast-forwarded,
else only the move's files after that snapshot are appended.
"""

from __future__ import annotations

import logging
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from pyiceberg.exceptions import CommitFailedException
from pyiceberg.manifest import ManifestEntryStatus
from pyiceberg.table.refs import MAIN_BRANCH
from pyiceberg.table.snapshots import Operation, ancestors_of
from pyiceberg.table.update import AssertRefSnapshotId

from iceberg_ops_provider.core.refs import commit_refs
from iceberg_ops_provider.data_migration.audit import added_since_fork
from iceberg_ops_provider.data_migration.audit_branch import (
    BranchRecord,
    on_main_since,
    owned_record,
    record_of,
    unfinished,
)
from iceberg_ops_provider.data_migration.state import (
    MoveState,
    find_state,
    mirror_properties,
    move_snapshots,
    property_key,
)
from iceberg_ops_provider.data_migration.unit_commit import commit_unit
from iceberg_ops_provider.errors import MoveConflictError, MoveStateError, PublishRefusedError
from iceberg_ops_provider.messages import Arg, Message, message

if TYPE_CHECKING:
    from pyiceberg.manifest import DataFile
    from pyiceberg.table import Table
    from pyiceberg.table.metadata import TableMetadata
    from pyiceberg.table.snapshots import Snapshot

__all__ = ["PUBLISHED_KEY", "Discarded", "Published", "discard_branch", "publish_branch"]

log = logging.getLogger(__name__)

PUBLISHED_KEY = "iceberg-ops.published-branch"
"""Snapshot summary key of a publish that appended the branch's files to ``main``: ``<branch>@<audited id>``."""

ATTEMPTS = 20
"""Attempts of a publish or discard that lose to other writers' commits before giving up (transient)."""

COMBINABLE = {Operation.APPEND, Operation.REPLACE}
"""Commits on ``main`` the move's rows can be appended after whatever they touched: appends, and rewrites
that change no rows (compaction)."""


@dataclass(frozen=True)
class Published:
    """What :func:`publish_branch` did.

    ``how``: ``fast_forward`` (``main`` moved to ``snapshot_id``), ``append`` (the move's ``files`` appended
    to ``main`` as ``main_after``) or ``already_published`` (an earlier publish did it; nothing committed;
    ``snapshot_id`` is ``None`` when that publish removed the branch already).
    """

    move_id: str
    table: str
    branch: str
    how: str
    snapshot_id: int | None
    main_before: int | None
    main_after: int | None
    files: int = 0

    def to_json(self) -> dict[str, Any]:
        """JSON-able form, for XCom and the command line."""
        return {"kind": "publish", **asdict(self)}


@dataclass(frozen=True)
class Discarded:
    """What :func:`discard_branch` did: ``dropped`` the branch at ``snapshot_id``, or found none."""

    move_id: str
    table: str
    branch: str
    dropped: bool
    snapshot_id: int | None = None

    def to_json(self) -> dict[str, Any]:
        """JSON-able form, for XCom and the command line."""
        return {"kind": "discard", **asdict(self)}


def _described(snapshot: Snapshot, touched: str = "") -> str:
    operation = snapshot.summary.operation.value if snapshot.summary is not None else "unknown"
    when = datetime.fromtimestamp(snapshot.timestamp_ms / 1000, tz=UTC).isoformat(timespec="seconds")
    return f"{snapshot.snapshot_id} ({operation}{', ' + touched if touched else ''}, at {when})"


def _since(metadata: TableMetadata, head: Snapshot | None, stop: int) -> list[Snapshot] | None:
    """The snapshots of ``head``'s history after ``stop``, newest first; ``None`` when ``stop`` is not in it."""
    found = []
    for snapshot in ancestors_of(head, metadata):
        if snapshot.snapshot_id == stop:
            return found
        found.append(snapshot)
    return None


def _published(metadata: TableMetadata, record: BranchRecord, audited: int) -> bool:
    """Whether ``main`` already holds the audited snapshot: fast-forwarded to it, or its receipt appended."""
    receipt = f"{record.branch}@{audited}"
    for snapshot in _since(metadata, metadata.current_snapshot(), record.fork_snapshot_id) or ():
        if snapshot.snapshot_id == audited:
            return True
        if snapshot.summary is not None and snapshot.summary.additional_properties.get(PUBLISHED_KEY) == receipt:
            return True
    return False


def _partitions(table: Table, snapshot: Snapshot) -> set[tuple[int, tuple[Any, ...]]]:
    """The partitions (spec id, values) of the files ``snapshot`` added or removed, data and delete files."""
    touched = set()
    for manifest in snapshot.manifests(table.io):
        if manifest.added_snapshot_id != snapshot.snapshot_id:
            continue
        for entry in manifest.fetch_manifest_entry(table.io, discard_deleted=False):
            if entry.snapshot_id == snapshot.snapshot_id and entry.status != ManifestEntryStatus.EXISTING:
                touched.add((manifest.partition_spec_id, tuple(entry.data_file.partition)))
    return touched


class _Refusal:
    """Builds a :class:`PublishRefusedError` for one branch."""

    def __init__(self, table: Table, branch: str, move_id: str) -> None:
        self.table, self.branch, self.move_id = ".".join(table.name()), branch, move_id

    def __call__(self, reason: str, text: str | Message, snapshots: list[str] | None = None) -> PublishRefusedError:
        return PublishRefusedError(
            f"Move {self.move_id!r} cannot publish branch {self.branch!r} of {self.table}: " + text,
            table=self.table,
            branch=self.branch,
            reason=reason,
            snapshots=snapshots or [],
        )


def _conflicts(table: Table, record: BranchRecord, files: list[DataFile], refuse: _Refusal, base: int) -> None:
    """Refuse an append-publish that would not give ``main`` exactly its rows plus the move's.

    ``base`` is the branch's newest snapshot ``main`` holds (:func:`on_main_since`): ``main``'s commits after it
    are checked.
    """
    metadata = table.metadata
    since = _since(metadata, metadata.current_snapshot(), base)
    if since is None:
        raise refuse(
            "main_rewritten",
            f"main no longer descends from snapshot {record.fork_snapshot_id}, where the branch was cut (rolled "
            "back or replaced since); nothing was published. Discard the move and run it again.",
        )
    spec_id = metadata.default_spec_id
    stale = sorted({f.spec_id for f in files if f.spec_id != spec_id})
    if stale:
        raise refuse(
            "spec_changed",
            f"the table's partition spec changed to {spec_id} since the move wrote its files (spec "
            f"{', '.join(map(str, stale))}); nothing was published. Discard the move and run it again.",
        )
    ours = {(f.spec_id, tuple(f.partition)) for f in files}
    clashes = []
    for snapshot in reversed(since):
        operation = snapshot.summary.operation if snapshot.summary is not None else None
        if operation in COMBINABLE:
            continue
        touched = _partitions(table, snapshot)
        shared = ours & touched if all(s == spec_id for s, _ in touched) else touched
        if shared:
            values = sorted(str(list(p)) for _, p in shared)
            what = "the whole table" if values == ["[]"] else f"partitions {', '.join(values[:5])}"
            clashes.append(_described(snapshot, f"touching {what}"))
    if clashes:
        raise refuse(
            "main_changed",
            f"main changed since {_held(record, base)} in a way the move's rows "
            f"cannot be added to: {'; '.join(clashes)}. Nothing was published; the branch is kept. Discard the move "
            "and run it again on the new main, or undo those commits.",
            clashes,
        )


def _held(record: BranchRecord, base: int) -> str:
    if base == record.fork_snapshot_id:
        return f"the branch was cut from snapshot {base}"
    return f"it was fast-forwarded to the branch's snapshot {base}"


def _refuse_unaudited_commits(table: Table, record: BranchRecord, head: Snapshot, refuse: _Refusal, base: int) -> None:
    """Refuse a fast-forward that would carry what other writers' commits removed, which no audit saw.

    An audit of scope ``move`` reads every row the branch gained since ``base`` (the branch snapshot
    ``main`` holds), other writers' appends included; what their overwrites and deletes removed from
    ``main``'s rows shows only to an audit of scope ``branch``.
    """
    if record.audited_scope == "branch":
        return
    _, others = added_since_fork(table, head, base, record.move_id)
    foreign = [s for s in others if s.summary is None or s.summary.operation != Operation.APPEND]
    if foreign:
        raise refuse(
            "audit_scope",
            message(
                "commits that are not the move's removed or rewrote rows on the branch, and the passing audit read "
                f"only the rows the branch gained (scope move): {'; '.join(_described(s) for s in foreign)}. "
                "Publishing moves main to the branch's head and would carry their rows unaudited; nothing was "
                "published. Audit the whole branch ({scope}), or discard it.",
                scope=Arg("scope", "branch"),
            ),
            [_described(s) for s in foreign],
        )


def _mirrored_on_main(metadata: TableMetadata, state: MoveState | None, branch: str) -> dict[str, str]:
    """The move's state property once a fast-forward made its commits ``main``'s (nothing without a state).

    Mirrored as ``main``'s, a later run reads it against ``main``'s history: rolled back past the move's
    commits (a restore), it is refused before anything is cut or written.
    """
    if state is None:
        return {}
    committed = move_snapshots(metadata, state.move_id, branch)
    return mirror_properties(state, MAIN_BRANCH, committed[0].snapshot_id) if committed else {}


def publish_branch(table: Table, move_id: str, branch: str) -> Published:
    """Publish the audited head of ``move_id``'s ``branch`` onto ``main`` (see the module documentation).

    Raises:
        PublishRefusedError: Nothing to publish yet, no passing audit of the head, or ``main`` changed in a way
            the move's rows cannot be combined with (its ``reason`` and ``snapshots`` say which).
        MoveStateError: ``branch`` is another move's, or a tag.
        MoveConflictError: Other writers kept winning the commit (transient: publish again).
    """
    name = ".".join(table.name())
    refuse = _Refusal(table, branch, move_id)
    for _ in range(ATTEMPTS):
        table.refresh()
        metadata = table.metadata
        main_before = metadata.current_snapshot_id
        record = owned_record(metadata, branch, move_id, name)
        if record is None:
            finished, _ = find_state(metadata, move_id, MAIN_BRANCH)
            if finished is not None and finished.complete and finished.fork_snapshot_id is not None:
                return Published(move_id, name, branch, "already_published", None, main_before, main_before)
            raise refuse("no_branch", "the branch does not exist (the move never started, or it was discarded).")
        head = metadata.snapshot_by_name(branch)
        assert head is not None
        state, _ = find_state(metadata, move_id, branch)
        done = unfinished(state, record)
        if done is not None:
            raise refuse("incomplete", f"{done} units are committed to the branch; run the move to finish it first.")
        audited = record.audited_snapshot_id
        if _published(metadata, record, head.snapshot_id):
            if audited != head.snapshot_id:  # another engine moved main there (Spark's fast_forward)
                log.warning(
                    "move %s: main of %s already holds branch %s at snapshot %s, which no passing audit read "
                    "(audited: %s); it was published outside this publish, which only removes the branch",
                    move_id,
                    name,
                    branch,
                    head.snapshot_id,
                    audited,
                )
            _drop(table, record, head.snapshot_id)
            return Published(move_id, name, branch, "already_published", head.snapshot_id, main_before, main_before)
        if audited is None:
            raise refuse("not_audited", f"no audit passed on its head, snapshot {head.snapshot_id}; audit it first.")
        if audited != head.snapshot_id:
            since = _since(metadata, head, audited) or []
            raise refuse(
                "audit_stale",
                f"the audit passed on snapshot {audited}, but the branch has moved to {head.snapshot_id} since "
                f"({'; '.join(_described(s) for s in since) or 'rewritten'}); audit it again.",
                [_described(s) for s in since],
            )
        base = on_main_since(metadata, record, head)
        if main_before == base:  # main at the fork, or at the branch snapshot another engine fast-forwarded it to
            _refuse_unaudited_commits(table, record, head, refuse, base)
            try:
                commit_refs(
                    table,
                    expected={MAIN_BRANCH: main_before, branch: audited},
                    move={MAIN_BRANCH: audited},
                    remove=(branch,),
                    properties=_mirrored_on_main(metadata, state, branch),
                    remove_properties=(record.key,),
                )
            except CommitFailedException:
                continue  # main or the branch moved meanwhile: look again
            log.info("move %s: main of %s fast-forwarded to audited snapshot %s", move_id, name, audited)
            return Published(move_id, name, branch, "fast_forward", audited, main_before, audited)
        result = _append(table, record, head, state, refuse, base)
        _drop(table, record, audited)
        return result
    raise MoveConflictError(
        f"Publishing branch {branch!r} of {name} lost {ATTEMPTS} commits in a row to concurrent commits; nothing was "
        "published. Publish again."
    )


def _append(
    table: Table, record: BranchRecord, head: Snapshot, state: MoveState, refuse: _Refusal, base: int
) -> Published:
    """Append the move's files on the branch after ``base`` to ``main``, with its state and a receipt, in one commit."""
    name = ".".join(table.name())
    added, foreign = added_since_fork(table, head, base, record.move_id)
    if foreign:
        raise refuse(
            "branch_changed",
            "commits that are not the move's are on the branch and main has moved since the fork, so the branch "
            f"can only be published by moving main to it: {'; '.join(_described(s) for s in foreign)}. Nothing was "
            "published.",
            [_described(s) for s in foreign],
        )
    files = list(added.values())
    if head.schema_id is not None and head.schema_id != table.metadata.current_schema_id:
        raise refuse(
            "schema_changed",
            f"the table's schema changed (schema {table.metadata.current_schema_id}) since the audited snapshot "
            f"{head.snapshot_id} was written (schema {head.schema_id}); nothing was published. Audit the branch "
            "again after running the move on the new schema, or discard it.",
        )
    receipt = f"{record.branch}@{head.snapshot_id}"

    def decide(on_main: MoveState | None) -> MoveState | None:
        if _published(table.metadata, record, head.snapshot_id):
            return None  # an earlier attempt's commit landed
        _still_audited(table.metadata, record, head.snapshot_id, refuse)  # not discarded or re-audited since
        _conflicts(table, record, files, refuse, base)  # against main as it is now, on every attempt
        return state

    before = table.metadata.current_snapshot_id
    commit = commit_unit(
        table,
        files,
        move_id=record.move_id,
        branch=MAIN_BRANCH,
        decide=decide,
        unit_label="publish",
        summary={PUBLISHED_KEY: receipt},
        # A discard (or a unit) landing between the check above and this commit fails it, and the check refuses.
        requirements=(AssertRefSnapshotId(ref=record.branch, snapshot_id=head.snapshot_id),),
    )
    if not commit.committed:
        return Published(record.move_id, name, record.branch, "already_published", head.snapshot_id, before, before)
    log.info("move %s: %d files of branch %s appended to main of %s", record.move_id, len(files), record.branch, name)
    return Published(
        record.move_id, name, record.branch, "append", head.snapshot_id, before, commit.snapshot_id, len(files)
    )


def _still_audited(metadata: TableMetadata, record: BranchRecord, audited: int, refuse: _Refusal) -> None:
    """Refuse unless the branch is still at ``audited`` with its record saying an audit passed there."""
    ref = metadata.refs.get(record.branch)
    now = record_of(metadata, record.branch)
    if ref is None or now is None or now.move_id != record.move_id:
        raise refuse(
            "no_branch",
            "the branch was discarded while the publish read it; nothing was published. Run the move again.",
        )
    if ref.snapshot_id != audited:
        raise refuse(
            "audit_stale",
            f"the branch moved from the audited snapshot {audited} to {ref.snapshot_id} while the publish read it; "
            "nothing was published. Audit it again.",
        )
    if now.audited_snapshot_id != audited:
        raise refuse(
            "not_audited",
            f"an audit of snapshot {audited} failed while the publish read it, withdrawing the one that passed; "
            "nothing was published. Fix the data and audit it again, or discard it.",
        )


def _drop(table: Table, record: BranchRecord, head: int) -> None:
    """Remove the published branch and its record (a failure is left to the next publish or discard)."""
    try:
        commit_refs(table, expected={record.branch: head}, remove=(record.branch,), remove_properties=(record.key,))
    except Exception as exc:  # published already; the next publish or discard removes it
        log.warning(
            "could not remove published branch %s (%s); publish or discard again removes it", record.branch, exc
        )


def discard_branch(table: Table, move_id: str, branch: str) -> Discarded:
    """Remove ``move_id``'s ``branch`` and its records; ``main`` is untouched.

    The data files only the branch referenced stay in storage until snapshot expiry (the branch's
    snapshots are no longer protected by a ref) and orphan-file removal delete them.

    Raises:
        MoveStateError: ``branch`` is another move's, or a tag; or the move was published already and
            the branch is one its publish left (``reason`` ``published``; nothing changed).
        MoveConflictError: The branch kept moving (a run of the move still committing; transient).
    """
    name = ".".join(table.name())
    for _ in range(ATTEMPTS):
        table.refresh()
        metadata = table.metadata
        record = owned_record(metadata, branch, move_id, name)
        if record is None:
            return Discarded(move_id, name, branch, dropped=False)
        head = metadata.refs[branch].snapshot_id
        if _published(metadata, record, head):  # a publish that stopped before removing the branch
            raise MoveStateError(
                f"Move {move_id!r} was published to main of {name} already (main holds the branch's snapshot "
                f"{head}, or its files); discarding cannot take its rows off main, and nothing was changed. Publish "
                "again to remove the branch it left; to undo the rows, restore main to a tag taken before the "
                "publish.",
                reason="published",
            )
        mirrored = metadata.properties.get(property_key(move_id), "")
        gone = [record.key] + ([property_key(move_id)] if f'"branch":"{branch}"' in mirrored else [])
        try:
            commit_refs(table, expected={branch: head}, remove=(branch,), remove_properties=gone)
        except CommitFailedException:
            continue
        log.info("move %s: branch %s of %s discarded at snapshot %s", move_id, branch, name, head)
        return Discarded(move_id, name, branch, dropped=True, snapshot_id=head)
    raise MoveConflictError(
        f"Discarding branch {branch!r} of {name} lost {ATTEMPTS} commits in a row; a run of move {move_id!r} may "
        "still be committing to it. Stop it, then discard again."
    )
