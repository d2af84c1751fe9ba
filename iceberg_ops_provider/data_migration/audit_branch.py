"""A move's own branch (``DataMover(branch=...)``): its name checked, its record, its creation from ``main``.

The branch is cut from ``main``'s head in one commit that also writes the table property
``iceberg-ops.branch.<name>`` (:class:`BranchRecord`: the move that owns it, the fork snapshot, and the
branch head a passing audit vouched for). That commit requires the branch not to exist, so two workers
starting the same move cut it once, and a branch of anyone else is never taken over.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from pyiceberg.exceptions import CommitFailedException
from pyiceberg.table.refs import MAIN_BRANCH, SnapshotRefType
from pyiceberg.table.snapshots import ancestors_of

from iceberg_ops_provider.core.refs import RECORD_PREFIX, BranchRecord, commit_refs, record_of
from iceberg_ops_provider.data_migration.state import STAGING_BRANCH_PREFIX, MoveState
from iceberg_ops_provider.errors import InvalidMoveError, MoveConflictError, MoveStateError
from iceberg_ops_provider.messages import Arg, message

if TYPE_CHECKING:
    from pyiceberg.table import Table
    from pyiceberg.table.metadata import TableMetadata
    from pyiceberg.table.snapshots import Snapshot

__all__ = [
    "RECORD_PREFIX",
    "BranchRecord",
    "check_branch_name",
    "cut_branch",
    "is_audit_branch",
    "on_main_since",
    "record_of",
    "unfinished",
]

CUT_ATTEMPTS = 10

# Git's rules for a ref name, which Spark's identifiers and the REST catalog both accept: no control
# characters, spaces or ~^:?*[\ anywhere, no "..", "@{", "//", no leading or trailing "/" or ".".
_FORBIDDEN = re.compile(r"[\x00-\x20\x7f~^:?*\[\\]|\.\.|@\{|//|^[/.]|[/.]$|\.lock$")
MAX_NAME_LENGTH = 200


def is_audit_branch(branch: str) -> bool:
    """Whether a move's ``branch`` is one it was given to write, audit and publish (not ``main`` or a staging one)."""
    return branch != MAIN_BRANCH and not branch.startswith(STAGING_BRANCH_PREFIX)


def check_branch_name(branch: object) -> str:
    """``branch`` if it can name a move's branch; else :class:`InvalidMoveError` saying why."""

    def bad(why: str) -> InvalidMoveError:
        return InvalidMoveError(message(f"{{branch}} {why}", about="branch", branch=Arg("branch", branch)))

    if not isinstance(branch, str) or not branch:
        raise bad("must be a non-empty branch name.")
    if branch == MAIN_BRANCH:
        raise bad("cannot be main: the move writes to a branch of its own, and publishing moves main to it.")
    if branch.startswith(STAGING_BRANCH_PREFIX):
        raise bad(f"starts with {STAGING_BRANCH_PREFIX!r}, which names the staging branches of overwrite moves.")
    if len(branch) > MAX_NAME_LENGTH:
        raise bad(f"is {len(branch)} characters long; at most {MAX_NAME_LENGTH} are allowed.")
    found = _FORBIDDEN.search(branch)
    if found is not None:
        raise bad(
            f"is not a valid ref name ({found.group()!r} at character {found.start() + 1}): use letters, digits "
            "and - _ . /, without spaces, '..', or a leading or trailing '/' or '.'."
        )
    return branch


def unfinished(state: MoveState | None, record: BranchRecord) -> str | None:
    """How much of the move's current run is on the branch of ``record`` (``1 of 3``), ``None`` when all of it."""
    if state is None or state.fork_snapshot_id != record.fork_snapshot_id:
        return "none of its"  # nothing, or only what main held when the branch was cut
    return None if state.complete else f"{len(state.done)} of {state.unit_count}"


def on_main_since(metadata: TableMetadata, record: BranchRecord, head: Snapshot) -> int:
    """The newest snapshot of the branch (from ``head`` back to its fork) that ``main`` holds too.

    That is the fork, unless another engine fast-forwarded ``main`` onto the branch (Spark's
    ``fast_forward`` procedure moves ``main`` and leaves the branch and its record): then it is the
    branch snapshot ``main`` was moved to, and only the move's commits after it are new to ``main``.
    Also the fork when ``main`` no longer descends from it (publish refuses that).
    """
    fork = record.fork_snapshot_id
    held: set[int] = set()
    for snapshot in ancestors_of(metadata.current_snapshot(), metadata):
        held.add(snapshot.snapshot_id)
        if snapshot.snapshot_id == fork:
            break
    else:
        return fork
    for snapshot in ancestors_of(head, metadata):
        if snapshot.snapshot_id in held:
            return snapshot.snapshot_id
    return fork


def owned_record(metadata: TableMetadata, branch: str, move_id: str, table_name: str) -> BranchRecord | None:
    """The record of ``branch`` when it belongs to ``move_id``; ``None`` when the branch does not exist.

    Raises:
        MoveStateError: ``branch`` is a tag, a branch of another move, or a branch no move cut.
    """
    ref = metadata.refs.get(branch)
    if ref is None:
        return None
    if ref.snapshot_ref_type == SnapshotRefType.TAG:
        raise MoveStateError(
            message(
                f"{table_name} has a tag named {branch!r}: a move's {{branch}} must be a name no ref has.",
                about="branch",
                branch=Arg("branch", branch),
            )
        )
    record = record_of(metadata, branch)
    if record is None:
        raise MoveStateError(
            message(
                f"{table_name} already has a branch {branch!r} that no move cut (it has no property "
                f"{RECORD_PREFIX}{branch}): a move writes only to a branch of its own. Choose another {{branch}}.",
                about="branch",
                branch=Arg("branch", branch),
            )
        )
    if record.move_id != move_id:
        raise MoveStateError(
            message(
                f"Branch {branch!r} of {table_name} belongs to move {record.move_id!r}, not to {move_id!r}. To "
                "act on that move (audit, publish or discard it), pass {owner} with the arguments it was "
                "defined with; otherwise publish or discard it first, or choose another {branch}.",
                about="branch",
                owner=Arg("move_id", record.move_id),
                branch=Arg("branch"),
            )
        )
    return record


def cut_branch(table: Table, branch: str, move_id: str) -> BranchRecord:
    """Cut ``branch`` from ``main``'s head for ``move_id`` unless it is already the move's; its record.

    Raises:
        MoveStateError: See :func:`owned_record`.
        MoveConflictError: Other writers kept winning the commit (transient).
    """
    name = ".".join(table.name())
    for _ in range(CUT_ATTEMPTS):
        table.refresh()
        record = owned_record(table.metadata, branch, move_id, name)
        if record is not None:
            return record
        head = table.metadata.current_snapshot_id
        assert head is not None, "the caller gives an empty table a snapshot first"
        record = BranchRecord(branch, move_id, head)
        try:
            commit_refs(table, expected={branch: None}, move={branch: head}, properties=record.to_properties())
        except CommitFailedException:
            continue  # another worker cut it, or another writer committed: look again
        return record
    raise MoveConflictError(
        f"Could not cut branch {branch!r} of {name} for move {move_id!r}: {CUT_ATTEMPTS} commits in a row lost to "
        "concurrent commits. Run the move again."
    )
