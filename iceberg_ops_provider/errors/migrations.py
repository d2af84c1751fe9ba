"""The errors of migrations: discovery, operations, runs, recording, locking and integrity."""

from __future__ import annotations

from collections.abc import Sequence
from typing import ClassVar

from iceberg_ops_provider.errors.base import IcebergOpsError


class MigrationError(IcebergOpsError):
    """Base class of the errors of the migration engine."""


class MigrationDiscoveryError(MigrationError):
    """A migration file could not be used (bad name, duplicate number, syntax error...); the catalog was not touched.

    Attributes:
        path: The offending file (or folder).
        problem: What is wrong with it (the message without the path).
        line: The line of the file the problem is on, when known (a syntax error, a failing import).
    """

    def __init__(self, path: object, problem: str, *, line: int | None = None) -> None:
        self.path = str(path)
        self.problem = problem
        self.line = line
        super().__init__(f"{self.path}: {problem}")


class InvalidOperationError(MigrationError, ValueError):
    """A migration operation was called with arguments that cannot work (unknown column, bad transform...)."""


class IrreversibleMigrationError(MigrationError):
    """Raised by a ``downgrade()`` that cannot undo its ``upgrade()``: the version stays applied."""


class MigrationFailedError(MigrationError):
    """A migration's ``upgrade()`` or ``downgrade()`` raised; the run stopped there.

    Transient: the cause may be a conflict or a network failure, and a retry runs the migration again
    only when none of its changes were committed; permanent when the cause is one of this project's
    errors that says retrying cannot help (a refused input, a data step whose files another writer rewrote).

    Attributes:
        direction: ``upgrade`` or ``downgrade``.
        cause: The exception the migration raised (also ``__cause__``).
        completed: Results of the migrations this run finished before the failure.
    """

    transient: bool = True

    def __init__(self, version: str, direction: str, cause: BaseException, *, hint: str = "") -> None:
        self.version = version
        self.direction = direction
        self.cause = cause
        if isinstance(cause, IcebergOpsError):  # a cause known not to pass (a refused input) makes a retry futile
            self.transient = cause.transient
        self.completed: list[object] = []
        super().__init__(
            f"Migration {version} failed during {direction}(): {type(cause).__name__}: {str(cause).rstrip('.')}. "
            + (hint or "Its changes to each table were not committed; fix the migration and run again.")
        )


class MigrationNotRecordedError(MigrationError):
    """A migration's changes were committed but its history row could not be written; the run stops.

    Transient: the next run records the ``version`` from the intent record and the tables' receipts.
    """

    transient: ClassVar[bool] = True

    def __init__(self, version: str, direction: str, cause: BaseException) -> None:
        self.version = version
        self.direction = direction
        super().__init__(
            f"Migration {version} ran its {direction}() and its changes were committed, but recording it in the "
            f"history failed: {type(cause).__name__}: {str(cause).rstrip('.')}. The next run records it from the "
            "receipts in its tables without running it again (fix what blocked the write first); to record it by hand, "
            f"`stamp` {version} after an upgrade, the version below after a downgrade."
        )


class ConcurrentMigrationError(MigrationError):
    """Another run is migrating the same namespace (or wrote its history first, or took over its lock).

    Attributes:
        holder: Who holds the lock (owner, host, pid, run id, since when), when known.
    """

    transient: ClassVar[bool] = True

    def __init__(self, namespace: str, message: object, holder: dict[str, str] | None = None) -> None:
        self.namespace = namespace
        self.holder = dict(holder or {})
        super().__init__(message)


class PartialMigrationError(MigrationError):
    """A migration touching several tables committed to some of them and not to the others.

    Found after a crash from the intent record and the tables' receipts; the namespace is refused until a
    person settles it and records the outcome with ``stamp``.

    Attributes:
        direction: ``upgrade`` or ``downgrade``.
        committed: The tables (and what was done to them) whose changes reached the catalog.
        not_committed: The tables whose changes did not.
    """

    def __init__(
        self,
        namespace: str,
        version: str,
        direction: str,
        committed: Sequence[str],
        not_committed: Sequence[str],
        *,
        run_id: str = "",
    ) -> None:
        self.namespace = namespace
        self.version = version
        self.direction = direction
        self.committed = list(committed)
        self.not_committed = list(not_committed)
        self.run_id = run_id
        from iceberg_ops_provider.messages import Hint, message

        run = f" (run {run_id})" if run_id else ""
        if self.committed:
            what = (
                f"was only partly committed by its {direction}(){run}: committed: {', '.join(self.committed)}; "
                f"not committed: {', '.join(self.not_committed) or 'nothing'}"
            )
            how = message(
                "Either finish the remaining changes by hand and record the migration as applied with {stamp}, or "
                "undo the committed ones and stamp the version below it (or `base`)."
                if direction == "upgrade"
                else f"Either finish the rollback by hand and stamp the version below {version} (or `base`), or "
                "redo the rolled-back changes and record {stamp}.",
                stamp=Hint("stamp", f"MigrationRunner.stamp({version!r})", {"version": version}),
            )
        else:
            what = (
                f"was interrupted in its {direction}(){run} with changes that cannot be checked: "
                f"{', '.join(self.not_committed) or 'none listed'} (nothing else of it was committed)"
            )
            again = "run the upgrade again" if direction == "upgrade" else "run the rollback again"
            how = (
                f"Check those tables: if nothing landed, stamp the version {direction} started from and {again}; "
                "if something did, finish or undo the rest by hand and stamp the version that matches the tables."
            )
        super().__init__(
            f"Migration {version} of namespace {namespace!r} {what}. Nothing more runs in this namespace until this "
            "is resolved. "
            + how
            + message(" A stamp ({stamp}) clears this record.", stamp=Hint("stamp_command", "MigrationRunner.stamp()"))
        )


class DryRunLimit(MigrationError):
    """A dry run (``plan``) reached a table or catalog used directly: its risk is unknown from there."""


class IntentRecordError(MigrationError):
    """An interrupted run's intent record cannot be read; nothing runs in the namespace until a ``stamp`` clears it."""


class MigrationTargetError(MigrationError, ValueError):
    """A target (``head``, ``base``, ``0003``, ``+1``, ``-2``) that does not fit the direction or the state."""


class MigrationIntegrityError(MigrationError):
    """Applied migrations and the files on disk disagree: changed, missing or out-of-order files.

    Attributes:
        problems: One line per problem found.
        kinds: The kinds of problems found (``changed``, ``missing``, ``out_of_order``), for a front
            that says in its own words how to allow them.
    """

    def __init__(
        self, namespace: str, problems: Sequence[str], how_to_allow: object, *, kinds: Sequence[str] = ()
    ) -> None:
        self.namespace = namespace
        self.problems = list(problems)
        self.kinds = tuple(kinds)
        lines = "\n".join(f"  - {problem}" for problem in self.problems)
        super().__init__(
            f"Refusing to migrate namespace {namespace!r}: the migration files disagree with its history:\n{lines}\n"
            + how_to_allow  # type: ignore[operator]  # text or a Message (which adds text on either side)
        )


class UnfinishedDataStepsError(MigrationError):
    """A migration stopped in its data steps, and this run cannot finish them.

    Its schema changes are committed and each data step continues from its last committed unit when
    the same migration runs again in the same direction; this run was asked for something else, or
    the migration no longer asks for the same data steps.

    Attributes:
        namespace: The namespace.
        version: The interrupted migration's version.
        direction: The direction it was running in (the next run in that direction finishes it).
        run_id: The interrupted run.
        changed: The data steps the file asks for now differ from those the run started: the step ids
            or definitions recorded (``expected``) and asked for now (``found``).
    """

    def __init__(
        self,
        namespace: str,
        version: str,
        direction: str,
        run_id: str,
        *,
        expected: Sequence[str] = (),
        found: Sequence[str] = (),
    ) -> None:
        self.namespace, self.version, self.direction, self.run_id = namespace, version, direction, run_id
        self.expected, self.found = list(expected), list(found)
        self.changed = bool(self.expected or self.found)
        if self.changed:
            what = (
                f"its file now asks for other data steps than the run started: started {', '.join(self.expected)}; "
                f"asked for now {', '.join(self.found) or 'none'}. Restore the file as it was to let the next "
                f"{direction} finish them, or settle the tables by hand and record the outcome with a stamp"
            )
        else:
            what = (
                f"its schema changes are committed and its data steps continue where they stopped when the "
                f"{direction} of {version} runs again; run that first"
            )
        super().__init__(
            f"Migration {version} of namespace {namespace!r} stopped in its data steps ({direction}, run {run_id}): "
            f"{what}."
        )


class RestorePointError(MigrationError):
    """A table's rows cannot be brought back to the restore point of a migration's data steps; nothing changed.

    Attributes:
        table: The table.
        tag: The restore point's tag.
        reason: ``missing`` (never taken, expired or removed), ``not_an_ancestor`` (``main``'s history
            was rewritten since) or ``foreign_commits`` (others committed since: ``commits`` names them).
        commits: The snapshots committed since that are not the migration's own data steps.
    """

    def __init__(self, table: str, tag: str, *, reason: str, commits: Sequence[str] = ()) -> None:
        self.table, self.tag, self.reason, self.commits = table, tag, reason, list(commits)
        why = {
            "missing": f"its restore point (tag {tag}) does not exist: never taken, or it expired or was removed",
            "not_an_ancestor": f"main no longer descends from its restore point (tag {tag})",
            "foreign_commits": (
                f"{len(self.commits)} commit(s) other than the migration's own data steps landed since its restore "
                f"point (tag {tag}), and moving back would lose them: {', '.join(self.commits)}"
            ),
        }[reason]
        fix = (
            "To keep them, undo the upgrade's data steps with data operations in the downgrade (update_rows, "
            "delete_rows) instead of restore_data."
            if reason == "foreign_commits"
            else "Undo the upgrade's data steps with data operations in the downgrade (update_rows, delete_rows) "
            "instead of restore_data."
        )
        super().__init__(f"Cannot restore the rows of {table}: {why}. Nothing was changed. {fix}")
