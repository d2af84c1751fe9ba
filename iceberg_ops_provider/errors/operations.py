"""The errors of table maintenance, the data mover and the Apache Polaris client, and refused confirmations."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, ClassVar

from pyiceberg.exceptions import CommitFailedException

from iceberg_ops_provider.errors.base import IcebergOpsError


class ConfirmationRequiredError(IcebergOpsError):
    """A change that loses data or rewrites history was asked for without confirmation; nothing ran.

    Attributes:
        losses: What the change would lose (``0003: drop column orders.note``), when it loses data.
        parameter: The argument that confirms it (``allow_destructive``), which each front words.
    """

    def __init__(self, message: object, *, losses: Sequence[str] = (), parameter: str = "") -> None:
        self.losses = list(losses)
        self.parameter = parameter
        super().__init__(message)


class MaintenanceError(IcebergOpsError):
    """Base class of the errors of table maintenance (compaction, expiry, orphan removal, manifest rewrite)."""


class UnsafeLocationError(MaintenanceError, ValueError):
    """A maintenance call was pointed at a location outside the table's own (nothing was deleted)."""


class FileListingError(MaintenanceError):
    """Listing a table's files failed part way; orphan removal deleted nothing (retry when storage answers)."""

    transient: ClassVar[bool] = True


class UnsupportedDeleteFilesError(MaintenanceError):
    """The table holds delete files this toolkit cannot apply (equality deletes); nothing was rewritten."""


class MaintenanceConflictError(MaintenanceError):
    """A concurrent commit changed files a maintenance commit rewrites; earlier groups stay committed.

    Attributes:
        result: For a compaction, the :class:`~iceberg_ops_provider.maintenance.compaction.CompactionResult`
            of the whole call (which groups were committed, which failed and why), else ``None``.
    """

    transient: ClassVar[bool] = True
    result: Any = None


class MaintenancePolicyError(MaintenanceError, ValueError):
    """A table's maintenance policy (its properties) holds a value it does not accept, or an unknown key.

    Raised before anything is done to the table; other tables of a multi-table run go on. ``key``, ``value``,
    ``accepted`` and ``closest`` are those of the first problem; ``problems`` lists them all.

    Attributes:
        table: The table, dotted (empty when the properties are checked before they belong to one).
        key: The property key at fault (``iceberg-ops.maintenance.quiet-hours``).
        value: The value it holds (``None`` when not set).
        accepted: What the key accepts, in words (empty for an unknown key).
        closest: For an unknown key, the known key closest to it, if any.
        problems: Each problem as a ``(key, value, accepted, closest)`` tuple.
    """

    def __init__(
        self, message: object, *, table: str = "", problems: Sequence[tuple[str, Any, str, str | None]] = ()
    ) -> None:
        self.table = table
        self.problems = list(problems)
        self.key, self.value, self.accepted, self.closest = self.problems[0] if self.problems else ("", None, "", None)
        super().__init__(message)


class DataMoveError(IcebergOpsError):
    """Base class of the errors of the data mover (:mod:`iceberg_ops_provider.data_migration`)."""


class InvalidMoveError(DataMoveError, ValueError):
    """An argument of a move is invalid (a mode, a verify method, a filter, a missing table); nothing was written."""


class ReconciliationError(DataMoveError, ValueError):
    """The source's columns cannot be written to the target as asked; checked before anything is written.

    The message names the column and what to change (``rename``, ``columns``, or the target's schema).
    """


class MoveStateError(DataMoveError, ValueError):
    """A move cannot start or resume: its ``move_id`` is another move's, or ``mode`` cannot carry the change.

    Attributes:
        reason: What state stopped it, where a caller may act on it: ``published`` (its branch was
            published to ``main``: nothing left to audit, or to discard), else ``""``.
    """

    def __init__(self, message: object, *, reason: str = "") -> None:
        self.reason = reason
        super().__init__(message)


class MoveConflictError(DataMoveError):
    """A unit's commit kept losing to concurrent commits on the target; running the move again resumes it."""

    transient: ClassVar[bool] = True


class PublishRefusedError(DataMoveError):
    """A move's branch cannot be published; ``main`` and the branch are unchanged.

    Attributes:
        table: The target table, dotted.
        branch: The move's branch.
        reason: ``no_branch`` (never cut, or discarded), ``incomplete`` (units left), ``not_audited`` (no
            passing audit), ``audit_stale`` (the branch moved after the audit), ``audit_scope`` (overwrites or
            deletes of another writer on the branch, which an audit of scope ``move`` cannot show),
            ``branch_changed`` (commits on the branch that are not the move's, which only a fast-forward could
            carry), ``main_rewritten``
            (``main`` no longer descends from the fork), ``main_changed`` (commits on ``main`` since the fork
            that cannot be combined with the move's rows), ``schema_changed`` or ``spec_changed``.
        snapshots: The commits the refusal is about, each as ``id (operation, what it touched)``.
    """

    def __init__(self, message: object, *, table: str, branch: str, reason: str, snapshots: Sequence[str] = ()) -> None:
        self.table = table
        self.branch = branch
        self.reason = reason
        self.snapshots = list(snapshots)
        super().__init__(message)


class VerificationFailedError(DataMoveError):
    """The target does not hold the source's rows: the move's verification found a difference.

    Attributes:
        report: The :class:`~iceberg_ops_provider.data_migration.results.VerifyReport` with the details.
    """

    def __init__(self, message: str, report: Any = None) -> None:
        super().__init__(message)
        self.report = report


class DataStepError(IcebergOpsError):
    """Base class of the errors of data steps (:mod:`iceberg_ops_provider.data_steps`)."""


class InvalidDataStepError(DataStepError, ValueError):
    """A data step names a column the table lacks, a value or function that does not fit, or a bad ``where``.

    Checked before the step's first commit (a function that misbehaves later stops the step before
    its unit commits). Attributes (empty when they do not apply):

    Attributes:
        table: The table, dotted.
        column: The column the problem is about.
        closest: The table's column closest to an unknown ``column``.
        expected: What the column takes (its type, a length, ...).
        got: What was given instead.
    """

    def __init__(
        self,
        message: object,
        *,
        table: str = "",
        column: str = "",
        closest: str | None = None,
        expected: str = "",
        got: str = "",
    ) -> None:
        self.table = table
        self.column = column
        self.closest = closest
        self.expected = expected
        self.got = got
        super().__init__(message)


class DataStepStateError(DataStepError, ValueError):
    """A data step cannot resume: its recorded state belongs to another step definition, or cannot be read.

    Attributes:
        step_id: The step's id.
    """

    def __init__(self, message: object, *, step_id: str = "") -> None:
        self.step_id = step_id
        super().__init__(message)


class DataStepConflictError(DataStepError):
    """A unit of a data step could not commit: another writer removed or rewrote its files, or kept winning.

    Units committed before stay committed. Transient when commits kept losing races (``contention``:
    running the step again resumes it); permanent when another writer rewrote or removed files the
    unit reads (``foreign_rewrite``: every run would fail the same way).

    Attributes:
        step_id: The step's id.
        unit: The unit's index.
        reason: ``contention`` or ``foreign_rewrite``.
    """

    transient: bool = True

    def __init__(self, message: object, *, step_id: str = "", unit: int = -1, reason: str = "contention") -> None:
        self.step_id = step_id
        self.unit = unit
        self.reason = reason
        self.transient = reason == "contention"
        super().__init__(message)


class RefError(IcebergOpsError, ValueError):
    """A tag cannot be created, dropped or restored to as asked; nothing changed.

    Attributes:
        table: The table, dotted.
        ref: The tag (or branch) asked for.
        reason: ``exists`` (a tag or branch of that name exists: ``snapshot_id`` is where it points),
            ``unknown_snapshot`` (no such snapshot: ``snapshot_id`` is the id asked for), ``missing`` (no
            such tag: ``tags`` lists those there are), ``branch`` (the name is a branch, not a tag),
            ``no_snapshot`` (the table has no snapshot to tag) or ``invalid_name``.
        snapshot_id: The snapshot the reason is about, when there is one.
        current_snapshot_id: The table's current snapshot (``main``'s head), ``None`` without one.
        tags: The table's tags, by name.
    """

    def __init__(
        self,
        message: object,
        *,
        table: str,
        ref: str,
        reason: str,
        snapshot_id: int | None = None,
        current_snapshot_id: int | None = None,
        tags: Sequence[str] = (),
    ) -> None:
        self.table, self.ref, self.reason = table, ref, reason
        self.snapshot_id, self.current_snapshot_id, self.tags = snapshot_id, current_snapshot_id, list(tags)
        super().__init__(message)


class RefMovedError(IcebergOpsError, CommitFailedException):
    """A ref moved (or appeared, or went) between the read a change was decided on and its commit; nothing changed.

    A ``CommitFailedException`` too: a guarded commit whose guard failed.

    Attributes:
        table: The table, dotted.
        ref: The ref that moved (``main`` for a commit that landed on the table).
        expected: Where the change expected it (``None``: absent).
        found: Where it is now (``None``: absent).
        commits: The commits on it since ``expected`` (``id (operation, at time)``), newest first.
    """

    transient: ClassVar[bool] = True

    def __init__(
        self, table: str, ref: str, expected: int | None, found: int | None, commits: Sequence[str] = ()
    ) -> None:
        self.table, self.ref, self.expected, self.found, self.commits = table, ref, expected, found, list(commits)
        if expected is None:
            what = f"was created (on snapshot {found})"
        elif found is None:
            what = f"was removed (it was on snapshot {expected})"
        else:
            what = f"moved from snapshot {expected} to {found}"
        since = f"; committed since: {', '.join(self.commits)}" if self.commits else ""
        super().__init__(
            f"{ref} of {table} {what} after it was read{since}. Nothing was changed; look at the table again and "
            "repeat if it still applies."
        )


class PolarisError(IcebergOpsError):
    """Apache Polaris's policy API refused a request, answered something unexpected, or was not reached.

    Attributes:
        url: The request's URL (without credentials), when there was one.
        status: The HTTP status Polaris answered with, if it answered.
        error_type: The ``type`` of Polaris's error envelope (``NoSuchTableException``, ...), if given.
    """

    def __init__(self, message: str, *, url: str = "", status: int | None = None, error_type: str = "") -> None:
        self.url = url
        self.status = status
        self.error_type = error_type
        super().__init__(message)


class PolarisAuthError(PolarisError):
    """Polaris refused the credentials (401) or the token could not be obtained; change the credentials."""


class PolarisForbiddenError(PolarisAuthError):
    """The principal may not read what was asked (403); grant its role the privilege the message names."""


class PolarisNotFoundError(PolarisError, LookupError):
    """The catalog, namespace, table or policy does not exist in Polaris (404)."""


class PolarisConflictError(PolarisError):
    """Polaris refused a change that conflicts with its current state (409); reload and try again."""

    transient: ClassVar[bool] = True


class PolarisRequestError(PolarisError, ValueError):
    """Polaris refused the request as malformed (400, 422), or the client was given bad arguments."""


class PolarisServerError(PolarisError):
    """Polaris failed (5xx), throttled (429) past the retries, or could not be reached in time."""

    transient: ClassVar[bool] = True


class PolicyContentError(PolarisError, ValueError):
    """A policy's ``content`` is not valid for its type (not JSON, an unknown key, ``enable`` not a boolean, ...).

    Attributes:
        policy: The policy's name, as far as it is known.
    """

    def __init__(self, message: str, *, policy: str = "", url: str = "") -> None:
        self.policy = policy
        super().__init__(message, url=url)
