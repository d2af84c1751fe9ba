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
    only when none of its changes were committed.

    Attributes:
        direction: ``upgrade`` or ``downgrade``.
        cause: The exception the migration raised (also ``__cause__``).
        completed: Results of the migrations this run finished before the failure.
    """

    transient: ClassVar[bool] = True

    def __init__(self, version: str, direction: str, cause: BaseException, *, hint: str = "") -> None:
        self.version = version
        self.direction = direction
        self.cause = cause
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
