"""What a policy run did, per policy type, table and namespace (``to_json()`` for XCom), and the error it raises."""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from typing import Any

from pyiceberg.exceptions import CommitFailedException, CommitStateUnknownException

from iceberg_ops_provider.errors import (
    IcebergOpsError,
    MaintenanceConflictError,
    MaintenanceError,
    PolarisAuthError,
    PolarisError,
    PolarisNotFoundError,
    PolarisServerError,
    PolicyContentError,
)
from iceberg_ops_provider.polaris.parameters import ResolvedParameters
from iceberg_ops_provider.polaris.policies import PolicyType

__all__ = [
    "DRY_RUN",
    "FAILED",
    "RAN",
    "SKIPPED_DISABLED",
    "SKIPPED_NO_POLICY",
    "NamespacePolicyOutcome",
    "PolicyOutcome",
    "TablePolicyOutcome",
    "describe",
    "stops_every_table",
    "transient",
]

RAN = "ran"
DRY_RUN = "dry run"
FAILED = "failed"
SKIPPED_DISABLED = "skipped: disabled"
SKIPPED_NO_POLICY = "skipped: no policy"


def describe(exc: BaseException) -> str:
    """``Type: message`` of an exception, as outcomes and logs show it."""
    return f"{type(exc).__name__}: {exc}"


def transient(exc: BaseException) -> bool:
    """Whether the same run may succeed later without a change (a conflict, a server that did not answer)."""
    if isinstance(exc, IcebergOpsError):
        return exc.transient
    return isinstance(exc, CommitFailedException | CommitStateUnknownException | ConnectionError | TimeoutError)


@dataclass
class PolicyOutcome:
    """What one policy type did on one table.

    ``action`` is ``ran``, ``dry run``, ``failed``, ``skipped: disabled`` or ``skipped: no policy``;
    ``defined_in`` is the namespace the policy is defined in (not where it is attached); ``results`` holds the
    function's results (one per location for orphan removal), for a dry run what a real run would do.
    """

    policy_type: PolicyType
    action: str
    policy: str | None = None
    defined_in: tuple[str, ...] | None = None
    inherited: bool | None = None
    enabled: bool | None = None
    policy_version: int | None = None
    function: str | None = None
    parameters: ResolvedParameters | None = None
    notes: list[str] = field(default_factory=list)
    results: list[dict[str, Any]] = field(default_factory=list)
    error: str | None = None
    transient: bool | None = None
    seconds: float = 0.0

    def to_json(self) -> dict[str, Any]:
        """JSON-ready form (for XCom)."""
        resolved = self.parameters.to_json() if self.parameters is not None else {}
        return {
            **{item.name: getattr(self, item.name) for item in fields(self)},
            "policy_type": self.policy_type.value,
            "defined_in": list(self.defined_in) if self.defined_in is not None else None,
            "parameters": resolved.get("parameters", {}),
            "unknown_keys": resolved.get("unknown_keys", []),
            "not_applied": resolved.get("not_applied", {}),
            "notes": [*self.notes, *resolved.get("notes", [])],
            "seconds": round(self.seconds, 3),
        }


def stops_every_table(exc: BaseException) -> bool:
    """Whether a failure to read one table's policies will fail every other table the same way.

    Refused credentials or privileges, an unknown catalog or namespace, and a Polaris that does not answer: asking
    again for every table of a namespace would only repeat the error (and the token requests, and
    the timeouts).
    """
    if isinstance(exc, PolarisAuthError | PolarisServerError):
        return True
    if isinstance(exc, PolarisNotFoundError):
        # Only a missing table is the table's own; an unknown catalog or namespace is every table's.
        return exc.error_type != "NoSuchTableException"
    return isinstance(exc, PolarisError) and exc.status is None and not isinstance(exc, PolicyContentError)


def _failure_error(what: str, failures: list[tuple[str, str, bool]], result: Any) -> MaintenanceError:
    retryable = all(transient for _, _, transient in failures)
    shown = "; ".join(f"{where}: {error.rstrip('.')}" for where, error, _ in failures[:3])
    more = f" (and {len(failures) - 3} more)" if len(failures) > 3 else ""
    advice = (
        "Every failure may pass on a retry: run it again."
        if retryable
        else "Fix what each error names (the policy, the table or the argument) and run it again."
    )
    message = (
        f"Policy maintenance of {what} failed: {shown}{more}. A failure stops only its own policy type (or its "
        f"table, when the table or its policies could not be read); the error's `result` holds the whole outcome. "
        f"{advice}"
    )
    error = MaintenanceConflictError(message) if retryable else MaintenanceError(message)
    error.result = result  # type: ignore[attr-defined]  # MaintenanceError declares no result
    return error


@dataclass
class TablePolicyOutcome:
    """What the policies of one table did (``policies`` in :data:`RUN_ORDER`).

    ``error`` says why nothing ran (``cause`` is its exception, not in the JSON); ``skipped`` why the table
    was left alone without failing (dropped since the namespace was listed).
    """

    table: str
    dry_run: bool
    policies: list[PolicyOutcome] = field(default_factory=list)
    unknown_policies: list[dict[str, str]] = field(default_factory=list)
    error: str | None = None
    transient: bool | None = None
    seconds: float = 0.0
    cause: BaseException | None = field(default=None, repr=False, compare=False)
    skipped: str | None = None

    def failures(self) -> list[tuple[str, str, bool]]:
        """``(where, error, transient)`` of each failure."""
        if self.error is not None:
            return [(self.table, self.error, bool(self.transient))]
        return [
            (f"{self.table} {outcome.policy_type.value}", outcome.error or "failed", bool(outcome.transient))
            for outcome in self.policies
            if outcome.action == FAILED
        ]

    @property
    def failed(self) -> bool:
        """Whether the table, or any of its policy types, failed."""
        return bool(self.failures())

    def raise_for_failures(self) -> None:
        """Raise if anything failed, with this outcome as the error's ``result``.

        Raises:
            MaintenanceConflictError: Every failure may pass on a retry.
            MaintenanceError: Some failure needs a change first.
        """
        failures = self.failures()
        if failures:
            raise _failure_error(f"table {self.table}", failures, self)

    def to_json(self) -> dict[str, Any]:
        """JSON-ready form (for XCom): ``policies`` keyed by policy type, in the order they ran."""
        return {
            **{item.name: getattr(self, item.name) for item in fields(self) if item.name != "cause"},
            "status": "failed" if self.failed else "ok",
            "policies": {outcome.policy_type.value: outcome.to_json() for outcome in self.policies},
            "unknown_policies": [dict(item) for item in self.unknown_policies],
            "seconds": round(self.seconds, 3),
        }


@dataclass
class NamespacePolicyOutcome:
    """What the policies of every table of a namespace did (``tables`` in name order)."""

    namespace: str
    dry_run: bool
    tables: list[TablePolicyOutcome] = field(default_factory=list)

    @property
    def failed_tables(self) -> list[str]:
        """The tables where something failed."""
        return [table.table for table in self.tables if table.failed]

    @property
    def failed(self) -> bool:
        """Whether any table failed."""
        return any(table.failed for table in self.tables)

    def raise_for_failures(self) -> None:
        """Raise if any table failed, with this outcome as the error's ``result``.

        Raises:
            MaintenanceConflictError: Every failure may pass on a retry.
            MaintenanceError: Some failure needs a change first.
        """
        failures = [failure for table in self.tables for failure in table.failures()]
        if failures:
            what = f"namespace {self.namespace} ({len(self.failed_tables)} of {len(self.tables)} table(s))"
            raise _failure_error(what, failures, self)

    def to_json(self) -> dict[str, Any]:
        """JSON-ready form (for XCom): ``tables`` keyed by table name."""
        return {
            "namespace": self.namespace,
            "dry_run": self.dry_run,
            "status": "failed" if self.failed else "ok",
            "tables_count": len(self.tables),
            "failed_tables": self.failed_tables,
            "tables": {table.table: table.to_json() for table in self.tables},
        }
