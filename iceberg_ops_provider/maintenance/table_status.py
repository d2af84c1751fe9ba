"""What a table needs, in one state and its reasons, and what its maintenance policy says now: from metadata alone.

:func:`table_status` sums up the maintenance queue's measure of a table
(:func:`~iceberg_ops_provider.maintenance.queue.measure_table`, so a list of tables and ``maintain queue``
agree on what each table needs) as one of :data:`STATES`, with the needs, the hold and the budget behind it.
:func:`policy_state` says whether the table's policy lets maintenance run now. Both are facts: each front
words them.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from iceberg_ops_provider.errors import MaintenancePolicyError
from iceberg_ops_provider.maintenance.health import TableHealthReport, table_health_report
from iceberg_ops_provider.maintenance.policy import table_policy
from iceberg_ops_provider.maintenance.queue import QueuedTable, QueueError, measure_table

if TYPE_CHECKING:
    from pyiceberg.table import Table

__all__ = ["POLICY_STATES", "STATES", "PolicyState", "TableStatus", "policy_state", "status_of", "table_status"]

STATES: tuple[str, ...] = ("unreadable", "policy_error", "over_budget", "due", "healthy", "disabled")
"""Every :attr:`TableStatus.state`, the ones calling for attention first (the order a list sorts them in).

``unreadable``: a manifest list or manifest is missing or unreadable; ``policy_error``: a policy property holds
a value its key does not accept; ``over_budget``: compaction is due and rewrites more than the policy's
``max_rewrite_bytes`` lets one run rewrite; ``due``: work is due (``needs``); ``healthy``: nothing is due;
``disabled``: the policy turns maintenance off (the table is not measured).
"""

POLICY_STATES: tuple[str, ...] = ("invalid", "off", "quiet_hours", "on")
"""Every :attr:`PolicyState.state`: a bad policy, maintenance off, inside the quiet hours now, or free to run."""


@dataclass(frozen=True)
class TableStatus:
    """One table's state (one of :data:`STATES`) and the facts behind it.

    ``needs`` are the actions due (the health report's, in the order to run them); ``held`` is ``quiet_hours``
    when the policy keeps the due work from starting now (``disabled`` for a ``disabled`` table); ``score`` the
    queue's rank of the work (``None`` when nothing is due); ``compaction_bytes`` the bytes the due compaction
    rewrites and ``max_rewrite_bytes`` the policy's cap per run. A table that could not be measured has
    ``error_kind`` (``policy`` or ``metadata``), ``error`` (the exception's type) and ``message``.
    """

    table: str
    state: str
    needs: tuple[str, ...] = ()
    held: str | None = None
    score: float | None = None
    compaction_bytes: int = 0
    max_rewrite_bytes: int | None = None
    error_kind: str | None = None
    error: str | None = None
    message: str | None = None

    @property
    def rank(self) -> int:
        """The state's place in :data:`STATES` (0 calls for attention most)."""
        return STATES.index(self.state)

    def to_json(self) -> dict[str, Any]:
        """JSON-able form."""
        return {
            "table": self.table,
            "state": self.state,
            "needs": list(self.needs),
            "held": self.held,
            "score": self.score,
            "compaction_bytes": self.compaction_bytes,
            "max_rewrite_bytes": self.max_rewrite_bytes,
            "error_kind": self.error_kind,
            "error": self.error,
            "message": self.message,
        }


def status_of(measured: QueuedTable | QueueError | str) -> TableStatus:
    """The status of what :func:`~iceberg_ops_provider.maintenance.queue.measure_table` returned for a table."""
    if isinstance(measured, str):
        return TableStatus(measured, "healthy")
    if isinstance(measured, QueueError):
        state = "policy_error" if measured.kind == "policy" else "unreadable"
        return TableStatus(
            measured.table, state, error_kind=measured.kind, error=measured.error, message=measured.message
        )
    if measured.held == "disabled":
        state = "disabled"
    elif measured.over_budget:
        state = "over_budget"
    else:
        state = "due" if measured.needs else "healthy"
    return TableStatus(
        measured.table,
        state,
        needs=measured.needs,
        held=measured.held,
        score=measured.score if measured.needs else None,
        compaction_bytes=measured.compaction_bytes,
        max_rewrite_bytes=measured.max_rewrite_bytes,
    )


def table_status(
    table: Table,
    moment: datetime | None = None,
    *,
    health: Callable[[Table], TableHealthReport] = table_health_report,
) -> TableStatus:
    """The status of a loaded table at ``moment`` (default now), measured as the maintenance queue measures it.

    Reads the table's manifest list and manifests through ``health`` (see
    :func:`~iceberg_ops_provider.maintenance.queue.measure_table`), never a data file; never raises for the
    table's own state: a bad policy or a missing manifest is its ``state``.
    """
    moment = datetime.now(UTC) if moment is None else moment
    return status_of(measure_table(".".join(table.name()), table, moment, health=health))


@dataclass(frozen=True)
class PolicyState:
    """Whether a table's maintenance policy lets maintenance run now (one of :data:`POLICY_STATES`).

    ``keys_set`` are the policy's property keys the table sets (empty: every value is the default); ``message``
    says what is wrong with an ``invalid`` policy (it names the keys and what each accepts).
    """

    state: str
    keys_set: tuple[str, ...] = ()
    message: str | None = None

    def to_json(self) -> dict[str, Any]:
        """JSON-able form."""
        return {"state": self.state, "keys_set": list(self.keys_set), "message": self.message}


def policy_state(table: Table, moment: datetime | None = None) -> PolicyState:
    """What ``table``'s policy says at ``moment`` (default now), from its properties alone."""
    try:
        policy = table_policy(table)
    except MaintenancePolicyError as exc:
        return PolicyState("invalid", message=str(exc))
    keys = tuple(source for source in policy.sources.values() if source != "default")
    held = policy.skip_reason(moment)
    return PolicyState({"disabled": "off", "quiet_hours": "quiet_hours"}.get(held or "", "on"), keys)
