"""Who holds a namespace's migration lock: :class:`LockInfo`, how it is stored, and when it is stale."""

from __future__ import annotations

import getpass
import json
import math
import os
import socket
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

__all__ = [
    "ACTIVE_RUNS",
    "DEFAULT_STALE_AFTER",
    "PROPERTY_PREFIX",
    "LockInfo",
    "check_stale_after",
    "process_identity",
]

DEFAULT_STALE_AFTER = 180.0
"""Seconds without a lease renewal after which a lock counts as abandoned and may be taken over."""

PROPERTY_PREFIX = "iceberg-ops.lock."
"""The prefix of the lock table properties that describe the holder (and of its snapshot summary)."""

_MIN_STALE_AFTER = 1.0

ACTIVE_RUNS: set[str] = set()
"""Runs of this process that hold (or are taking) a lock: a lock naming this process and a run not
listed here was left by a run that ended without releasing it, and may be taken over at once."""


def process_identity() -> tuple[str, str, int]:
    """``(user, host, pid)`` of this process."""
    try:
        user = getpass.getuser()
    except Exception:  # no login name in some containers
        user = str(os.getuid()) if hasattr(os, "getuid") else "unknown"
    return user, socket.gethostname(), os.getpid()


def _process_is_gone(pid: int) -> bool:
    """Whether no process with ``pid`` exists on this host (a live process of another user counts as alive)."""
    if pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    except OSError:  # PermissionError: it exists, under another user
        return False
    return False


def _timestamp(value: str | None) -> datetime | None:
    if not value:
        return None
    try:
        parsed = datetime.fromisoformat(value)
    except ValueError:
        return None
    return parsed if parsed.tzinfo is not None else parsed.replace(tzinfo=UTC)


def _seconds(value: str | None) -> float:
    try:
        seconds = float(value) if value is not None else DEFAULT_STALE_AFTER
    except ValueError:
        return DEFAULT_STALE_AFTER
    return seconds if math.isfinite(seconds) and seconds > 0 else DEFAULT_STALE_AFTER


def _pid(value: str | None) -> int:
    try:
        return int(value or 0)
    except ValueError:
        return 0


def check_stale_after(value: object) -> float:
    """A valid lease length in seconds.

    Raises:
        ValueError: Not a finite number of at least one second (renewals run every quarter of it).
    """
    if (
        isinstance(value, bool)
        or not isinstance(value, int | float)
        or not _MIN_STALE_AFTER <= value <= 7 * 24 * 3600  # also refuses NaN, and ints too big for a float
    ):
        raise ValueError(
            f"stale_after must be a number of seconds between {_MIN_STALE_AFTER:g} and one week, got {value!r}: "
            "the lock is renewed every quarter of it and taken over after it."
        )
    return float(value)


@dataclass(frozen=True)
class LockInfo:
    """Who holds a namespace's lock.

    Attributes:
        owner: The user that took it.
        lease_expires_at: When the lease runs out unless renewed (``None`` for a lock written by an
            older release, which had no lease: it counts from ``acquired_at``).
        snapshot_id: The lock table snapshot of this acquisition (what release and renewal assert).
        context: Where the holder runs, beyond the process (for example Airflow's dag, run, task and try).
    """

    namespace: str
    owner: str
    host: str
    pid: int
    run_id: str
    acquired_at: datetime
    lease_expires_at: datetime | None = None
    stale_after: float = DEFAULT_STALE_AFTER
    snapshot_id: int | None = field(default=None, compare=False)
    context: Mapping[str, str] = field(default_factory=dict, compare=False)

    def expires_at(self) -> datetime:
        """When the lease runs out."""
        return self.lease_expires_at or self.acquired_at + timedelta(seconds=self.stale_after)

    def describe(self) -> str:
        """``run 1a2b... (alice@etl-3, pid 42) since 2026-11-30T10:00:00+00:00 (5 minute(s) ago)``."""
        age = datetime.now(UTC) - self.acquired_at
        minutes = int(age.total_seconds() // 60)
        ago = f"{minutes} minute(s) ago" if minutes else f"{int(age.total_seconds())} second(s) ago"
        where = "".join(f", {key} {value}" for key, value in self.context.items())
        return (
            f"run {self.run_id} ({self.owner}@{self.host}, pid {self.pid}{where}) since "
            f"{self.acquired_at.isoformat()} ({ago})"
        )

    def to_properties(self) -> dict[str, str]:
        """The table properties that store it (:meth:`to_json`'s fields, named ``iceberg-ops.lock.run-id`` etc.)."""
        data = {**self.to_json(), "stale_after": repr(float(self.stale_after))}
        data["context"] = json.dumps(dict(self.context), sort_keys=True)
        return {PROPERTY_PREFIX + key.replace("_", "-"): str(value) for key, value in data.items()}

    @classmethod
    def from_properties(cls, namespace: str, properties: Mapping[str, str], snapshot_id: int | None = None) -> LockInfo:
        """Read it back from table properties (tolerating a lock written by hand or by an older release)."""
        acquired = _timestamp(properties.get(f"{PROPERTY_PREFIX}acquired-at")) or datetime.fromtimestamp(0, UTC)
        stale_after = _seconds(properties.get(f"{PROPERTY_PREFIX}stale-after"))
        try:
            context = json.loads(properties.get(f"{PROPERTY_PREFIX}context", "{}"))
        except ValueError:
            context = {}
        return cls(
            namespace=properties.get(f"{PROPERTY_PREFIX}namespace", namespace),
            owner=properties.get(f"{PROPERTY_PREFIX}owner", "unknown"),
            host=properties.get(f"{PROPERTY_PREFIX}host", "unknown"),
            pid=_pid(properties.get(f"{PROPERTY_PREFIX}pid")),
            run_id=properties.get(f"{PROPERTY_PREFIX}run-id", "unknown"),
            acquired_at=acquired,
            lease_expires_at=_timestamp(properties.get(f"{PROPERTY_PREFIX}lease-expires-at")),
            stale_after=stale_after,
            snapshot_id=snapshot_id,
            context={str(k): str(v) for k, v in context.items()} if isinstance(context, dict) else {},
        )

    def stale_cause(self, now: datetime | None = None) -> str | None:
        """Why this lock may be taken over, as a fact; ``None`` while it is live.

        ``lease_expired``, ``process_gone`` (its holder on this host no longer runs) or ``run_ended`` (its run, in
        this very process, ended without releasing it).
        """
        now = now or datetime.now(UTC)
        if now >= self.expires_at():
            return "lease_expired"
        if self.host == socket.gethostname():
            if self.pid != os.getpid() and _process_is_gone(self.pid):
                return "process_gone"
            if self.pid == os.getpid() and self.run_id not in ACTIVE_RUNS:
                return "run_ended"
        return None

    def stale_reason(self, now: datetime | None = None) -> str | None:
        """Why this lock may be taken over (lease expired, holder process gone), or ``None`` if it is live."""
        cause = self.stale_cause(now)
        if cause == "lease_expired":
            return f"its lease expired at {self.expires_at().isoformat()} (no renewal for {self.stale_after:g} s)"
        if cause == "process_gone":
            return f"its process (pid {self.pid}) no longer runs on this host"
        if cause == "run_ended":
            return "its run, in this very process, ended without releasing it"
        return None

    def to_json(self) -> dict[str, object]:
        """JSON-able form."""
        return {
            "namespace": self.namespace,
            "owner": self.owner,
            "host": self.host,
            "pid": self.pid,
            "run_id": self.run_id,
            "acquired_at": self.acquired_at.isoformat(),
            "lease_expires_at": self.expires_at().isoformat(),
            "stale_after": self.stale_after,
            "context": dict(self.context),
        }
