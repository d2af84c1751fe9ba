"""The one exception hierarchy of iceberg-ops.

Every error the package raises on purpose derives from :class:`IcebergOpsError`, so callers can
catch everything iceberg-ops reports with one ``except`` clause. Where Python has a natural
built-in category (a bad value, a missing package, a bad type) the class derives from that
built-in as well, so ``except ValueError`` keeps working for code that expects it.

Every message says what was wrong and what to do about it.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, ClassVar

__all__ = [
    "CatalogConfigError",
    "CatalogUnavailableError",
    "ConcurrentMigrationError",
    "ForbiddenPromotionError",
    "IcebergOpsError",
    "DryRunLimit",
    "IntentRecordError",
    "InvalidOperationError",
    "IrreversibleMigrationError",
    "ModelError",
    "ProjectConfigError",
    "ScaffoldingError",
    "MigrationDiscoveryError",
    "MigrationError",
    "MigrationFailedError",
    "MigrationIntegrityError",
    "MigrationNotRecordedError",
    "MigrationTargetError",
    "PartialMigrationError",
    "MissingExtraError",
    "SchemaContractError",
    "SchemaEvolutionError",
    "SnapshotNotFoundError",
    "TypeParseError",
    "UnknownCatalogKindError",
    "UnsupportedTypeError",
    "UpsertError",
    "CatalogAuthError",
    "MissingAirflowError",
    "ConfirmationRequiredError",
    "MaintenanceError",
    "UnsafeLocationError",
    "FileListingError",
    "UnsupportedDeleteFilesError",
    "MaintenanceConflictError",
    "DataMoveError",
    "InvalidMoveError",
    "ReconciliationError",
    "MoveStateError",
    "MoveConflictError",
    "VerificationFailedError",
    "PolarisError",
    "PolarisAuthError",
    "PolarisForbiddenError",
    "PolarisNotFoundError",
    "PolarisConflictError",
    "PolarisRequestError",
    "PolarisServerError",
    "PolicyContentError",
]


class IcebergOpsError(Exception):
    """Base class of every error iceberg-ops raises on purpose.

    Attributes:
        transient: Whether trying the same thing again later may succeed (a lock held by another
            run, a commit conflict, a catalog that did not answer). Permanent errors (bad input,
            configuration, integrity, an irreversible migration) need a change first. The command
            line maps this to exit codes and the Airflow operators to retry or fail at once.
    """

    transient: ClassVar[bool] = False


class CatalogConfigError(IcebergOpsError, ValueError):
    """A catalog was asked for with options that cannot work (bad name, bad value, wrong kind)."""


class CatalogUnavailableError(IcebergOpsError, ConnectionError):
    """The catalog (or its storage) did not answer in time, or could not be reached.

    Attributes:
        endpoint: What was called (a URL, a database, a service), as far as it is known.
        timeout: The bound that was exceeded, in seconds, when the error is a timeout.
    """

    transient: ClassVar[bool] = True

    def __init__(self, message: str, *, endpoint: str = "", timeout: float | None = None) -> None:
        self.endpoint = endpoint
        self.timeout = timeout
        super().__init__(message)


class UnknownCatalogKindError(CatalogConfigError):
    """``CatalogFactory.build`` was given a kind it does not know.

    Attributes:
        kind: The kind that was asked for.
        valid_kinds: The kinds that exist.
    """

    def __init__(self, kind: str, valid_kinds: Sequence[str]) -> None:
        self.kind = kind
        self.valid_kinds = tuple(valid_kinds)
        super().__init__(
            f"Unknown catalog kind {kind!r}. Valid kinds are: {', '.join(self.valid_kinds)}. "
            "A catalog type of PyIceberg's own opens with CatalogFactory.load(name, type=..., ...); "
            "anything else, build the catalog yourself and pass the catalog object."
        )


class MissingExtraError(IcebergOpsError, ImportError):
    """An optional dependency is not installed.

    Attributes:
        extra: The ``iceberg-ops`` extra that installs it.
        install_command: The exact command that fixes the problem.
    """

    def __init__(self, what: str, extra: str, missing_module: str | None) -> None:
        self.extra = extra
        self.install_command = f"pip install 'iceberg-ops[{extra}]'"
        missing = f" (module {missing_module!r} could not be imported)" if missing_module else ""
        super().__init__(
            f"{what} needs the optional dependencies of the {extra!r} extra{missing}. "
            f"Install them with: {self.install_command}",
            name=missing_module,
        )


class UnsupportedTypeError(IcebergOpsError, TypeError):
    """A column has an Arrow type that an Iceberg table cannot hold.

    Attributes:
        column: Dotted path of the offending column (``""`` when converting a bare type).
        arrow_type: The Arrow type, as text.
    """

    def __init__(self, column: str, arrow_type: str, hint: str) -> None:
        self.column = column
        self.arrow_type = arrow_type
        where = f"Column {column!r}" if column else "The type"
        super().__init__(f"{where} has Arrow type {arrow_type}, which Iceberg cannot store. {hint}")


class TypeParseError(IcebergOpsError, ValueError):
    """A type given as a string (``"decimal(12,2)"``, ``"list<string>"``) could not be parsed."""


class SchemaContractError(IcebergOpsError, ValueError):
    """Arrow data does not satisfy a table's schema.

    Attributes:
        violations: Every problem found, not only the first.
    """

    def __init__(self, table: str, violations: Sequence[object]) -> None:
        self.violations = list(violations)
        lines = "\n".join(f"  - {violation}" for violation in self.violations)
        super().__init__(
            f"The data does not match the schema of {table} ({len(self.violations)} problem(s)):\n{lines}\n"
            "Cast or rename the columns of the data, or evolve the table's schema first."
        )


class SchemaEvolutionError(IcebergOpsError, ValueError):
    """A schema change was refused because it would break readers or lose data."""


class ForbiddenPromotionError(SchemaEvolutionError):
    """A column type change that the Iceberg specification does not allow.

    Attributes:
        column: Dotted path of the column.
        old_type: Current type, as Iceberg text.
        new_type: Requested type, as Iceberg text.
    """

    def __init__(self, column: str, old_type: object, new_type: object, reason: str) -> None:
        self.column = column
        self.old_type = str(old_type)
        self.new_type = str(new_type)
        super().__init__(
            f"Cannot change column {column!r} from {self.old_type} to {self.new_type}: {reason} "
            "Iceberg allows only int -> long, float -> double and widening a decimal's precision at the "
            "same scale. To change the type otherwise, add a new column, backfill it and drop the old one."
        )


class SnapshotNotFoundError(IcebergOpsError, LookupError):
    """A snapshot id or timestamp does not name a snapshot of the table."""


class UpsertError(IcebergOpsError, ValueError):
    """An upsert was asked for with data or keys that cannot work."""


class MigrationError(IcebergOpsError):
    """Base class of the errors of the migration engine."""


class MigrationDiscoveryError(MigrationError):
    """A migration file could not be used: bad name, duplicate number, syntax error, no ``Migration`` class.

    Raised before anything touches the catalog.

    Attributes:
        path: The offending file (or folder).
    """

    def __init__(self, path: object, problem: str) -> None:
        self.path = str(path)
        super().__init__(f"{self.path}: {problem}")


class InvalidOperationError(MigrationError, ValueError):
    """A migration operation was called with arguments that cannot work (unknown column, bad transform...)."""


class IrreversibleMigrationError(MigrationError):
    """Raised by a ``downgrade()`` that cannot undo its ``upgrade()``.

    The runner stops, leaves that version applied and reports the reason given here.
    """


class MigrationFailedError(MigrationError):
    """A migration's ``upgrade()`` or ``downgrade()`` raised; the run stopped there.

    The original exception is ``__cause__``, and also :attr:`cause`.

    Attributes:
        version: The migration's version.
        direction: ``upgrade`` or ``downgrade``.
        cause: The exception the migration raised.
        completed: Results of the migrations this run finished before the failure.

    It counts as transient: the cause may be a conflict or a network failure, and a retry runs the
    migration again only when none of its changes were committed.
    """

    transient: ClassVar[bool] = True

    def __init__(self, version: str, direction: str, cause: BaseException, *, hint: str = "") -> None:
        self.version = version
        self.direction = direction
        self.cause = cause
        self.completed: list[object] = []
        reason = str(cause).rstrip(".")
        super().__init__(
            f"Migration {version} failed during {direction}(): {type(cause).__name__}: {reason}. "
            + (hint or "Its changes to each table were not committed; fix the migration and run again.")
        )


class MigrationNotRecordedError(MigrationError):
    """A migration's changes were committed but its history row could not be written.

    The run stops here. Its intent record and the receipts in the tables let the next run record the
    version without running it again; ``stamp`` records it by hand.

    It counts as transient: the next run settles it by itself.

    Attributes:
        version: The migration's version.
        direction: ``upgrade`` or ``downgrade``.
    """

    transient: ClassVar[bool] = True

    def __init__(self, version: str, direction: str, cause: BaseException) -> None:
        self.version = version
        self.direction = direction
        reason = str(cause).rstrip(".")
        super().__init__(
            f"Migration {version} ran its {direction}() and its changes were committed, but recording it in "
            f"the history failed: {type(cause).__name__}: {reason}. The next run records it from the receipts "
            "in its tables without running it again (fix what blocked the write first); to record it by hand, "
            f"`stamp` {version} after an upgrade, the version below after a downgrade."
        )


class ConcurrentMigrationError(MigrationError):
    """Another run is migrating the same namespace (or wrote its history first, or took over its lock).

    Attributes:
        namespace: The namespace being migrated.
        holder: Who holds the lock (owner, host, pid, run id, since when), when known.
    """

    transient: ClassVar[bool] = True

    def __init__(self, namespace: str, message: str, holder: dict[str, str] | None = None) -> None:
        self.namespace = namespace
        self.holder = dict(holder or {})
        super().__init__(message)


class PartialMigrationError(MigrationError):
    """A migration touching several tables committed to some of them and not to the others.

    Found after a crash (or a failed commit) from the run's intent record and the receipts in each
    table's commit. Nothing can finish or undo it safely without a person: the runner refuses to
    migrate the namespace until someone does, then records the outcome with ``stamp``.

    Attributes:
        namespace: The namespace.
        version: The migration's version.
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
        run = f" (run {run_id})" if run_id else ""
        if direction == "upgrade":
            how = (
                f"Either finish the remaining changes by hand and record the migration as applied with "
                f"`iceberg-ops stamp {version}`, or undo the committed ones and stamp the version below it "
                "(or `base`)."
            )
        else:
            how = (
                f"Either finish the rollback by hand and stamp the version below {version} (or `base`), or "
                f"redo the rolled-back changes and record `iceberg-ops stamp {version}`."
            )
        super().__init__(
            f"Migration {version} of namespace {namespace!r} was only partly committed by its {direction}(){run}: "
            f"committed: {', '.join(self.committed) or 'nothing'}; not committed: "
            f"{', '.join(self.not_committed) or 'nothing'}. Nothing more runs in this namespace until this is "
            f"resolved. {how} A stamp (runner.stamp) clears this record."
        )


class DryRunLimit(MigrationError):
    """A dry run of a migration (``plan``) reached something it cannot stage.

    That is a table or the catalog used directly; the planner reports the migration's risk as unknown
    from there. Nothing was changed.
    """


class IntentRecordError(MigrationError):
    """The intent record an interrupted run left in the lock table cannot be read (it was edited by hand?).

    Nothing runs in the namespace until a person checks its tables and records the outcome with
    ``stamp``, which clears the record.
    """


class MigrationTargetError(MigrationError, ValueError):
    """A target (``head``, ``base``, ``0003``, ``+1``, ``-2``) that does not fit the direction or the state."""


class MigrationIntegrityError(MigrationError):
    """Applied migrations and the files on disk disagree: changed, missing or out-of-order files.

    Attributes:
        problems: One line per problem found.
    """

    def __init__(self, namespace: str, problems: Sequence[str], how_to_allow: str) -> None:
        self.problems = list(problems)
        lines = "\n".join(f"  - {problem}" for problem in self.problems)
        super().__init__(
            f"Refusing to migrate namespace {namespace!r}: the migration files disagree with its history:\n"
            f"{lines}\n{how_to_allow}"
        )


class ModelError(IcebergOpsError, ValueError):
    """A table model file (``models/*.yaml``) is malformed; the message names the file and the key."""


class ProjectConfigError(IcebergOpsError, ValueError):
    """``iceberg-ops.yaml`` (or a command-line option) is missing, malformed or contradictory."""


class ScaffoldingError(IcebergOpsError):
    """Scaffolding refused to write, usually because the file already exists."""


class CatalogAuthError(CatalogConfigError):
    """The catalog (or its storage) refused the credentials, or none could be found.

    A 401 or 403 answer, a SigV4 signature the server does not accept, an expired token, an access
    key it does not know, or no AWS credentials anywhere (options, environment, profile). Trying
    again does not help: the credentials, their permissions or the signing settings must change.

    Attributes:
        endpoint: What refused (a URL, a bucket, a service), as far as it is known.
        settings: The options and environment variables to check, most likely first.
    """

    transient: ClassVar[bool] = False

    def __init__(self, message: str, *, endpoint: str = "", settings: Sequence[str] = ()) -> None:
        self.endpoint = endpoint
        self.settings = tuple(settings)
        super().__init__(message)


class MissingAirflowError(MissingExtraError):
    """An Airflow connection was asked for (``--conn-id``, ``airflow_conn_id:``) where Airflow is not installed.

    Attributes:
        conn_id: The connection that was asked for.
        install_command: The command that installs Airflow.
    """

    transient: ClassVar[bool] = False

    def __init__(self, conn_id: str, missing_module: str | None) -> None:
        self.conn_id = conn_id
        self.extra = ""
        self.install_command = "pip install apache-airflow"
        missing = f" (module {missing_module!r} could not be imported)" if missing_module else ""
        ImportError.__init__(
            self,
            f"Reading the Airflow connection {conn_id!r} (--conn-id, or `airflow_conn_id:` in iceberg-ops.yaml) "
            f"needs Apache Airflow{missing}. Install it with: {self.install_command}; or describe the catalog "
            "without Airflow: `catalog:` in iceberg-ops.yaml, or --catalog / --catalog-name.",
            name=missing_module,
        )


class ConfirmationRequiredError(IcebergOpsError):
    """A change that loses data or rewrites history was asked for without confirmation (``--yes``); nothing ran."""


class MaintenanceError(IcebergOpsError):
    """Base class of the errors of table maintenance (compaction, expiry, orphan removal, manifest rewrite)."""


class UnsafeLocationError(MaintenanceError, ValueError):
    """A maintenance call was pointed at a location outside the table's own (nothing was deleted)."""

    transient: ClassVar[bool] = False


class FileListingError(MaintenanceError):
    """Listing a table's files failed part way; orphan removal deleted nothing (retry when storage answers)."""

    transient: ClassVar[bool] = True


class UnsupportedDeleteFilesError(MaintenanceError):
    """The table holds delete files this toolkit cannot apply (equality deletes); nothing was rewritten."""

    transient: ClassVar[bool] = False


class MaintenanceConflictError(MaintenanceError):
    """A concurrent commit changed or removed files a maintenance commit rewrites; that commit was not made.

    Earlier groups of the same call stay committed; running it again picks up where it stopped.

    Attributes:
        result: For a compaction, the :class:`~iceberg_ops_provider.maintenance.compaction.CompactionResult`
            of the whole call (which groups were committed, which failed and why), else ``None``.
    """

    transient: ClassVar[bool] = True
    result: Any = None


class DataMoveError(IcebergOpsError):
    """Base class of the errors of the data mover (:mod:`iceberg_ops_provider.data_migration`)."""


class InvalidMoveError(DataMoveError, ValueError):
    """An argument of a move is invalid (a mode, a verify method, a filter, a missing table); nothing was written."""


class ReconciliationError(DataMoveError, ValueError):
    """The source's columns cannot be written to the target as asked (checked before anything is written).

    A required target column with no source column, a source column the target lacks, an
    incompatible type, or values that do not fit a narrower target type. The message names the
    column and what to change (``rename``, ``columns``, or the target's schema).
    """


class MoveStateError(DataMoveError, ValueError):
    """A move cannot start or resume as asked; nothing was written.

    Its ``move_id`` already belongs to another source snapshot, filter or mapping, or the source
    changed in a way the chosen ``mode`` cannot carry (rows deleted or overwritten since an
    incremental move's last run).
    """


class MoveConflictError(DataMoveError):
    """A unit's commit kept losing to concurrent commits on the target; what committed stays committed.

    Running the same move again resumes with the units not yet committed.
    """

    transient: ClassVar[bool] = True


class VerificationFailedError(DataMoveError):
    """The target does not hold the source's rows: the move's verification found a difference.

    Attributes:
        report: The :class:`~iceberg_ops_provider.data_migration.results.VerifyReport` with the details.
    """

    report: Any = None

    def __init__(self, message: str, report: Any = None) -> None:
        super().__init__(message)
        self.report = report


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
