"""The polling loop the iceberg-ops triggers share: check a catalog until done or until an absolute deadline.

Checks run in the provider's own threads per connection; each run yields one event ``{"status", "message",
"seen"}`` (docs/sensors.md, "Deferrable, reschedule and poke").
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import functools
import threading
from abc import abstractmethod
from collections.abc import AsyncIterator, Callable
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, TypeVar

from airflow.triggers.base import BaseTrigger, TriggerEvent

from iceberg_ops_provider.core.polling import describe_error, is_transient, timeout_message
from iceberg_ops_provider.hooks.catalog import IcebergCatalogHook

if TYPE_CHECKING:
    from pyiceberg.catalog import Catalog

__all__ = ["CHECK_THREADS_PER_CONNECTION", "DEADLINE_GRACE", "CatalogPollingTrigger", "CheckResult", "as_utc_datetime"]

CHECK_THREADS_PER_CONNECTION = 4
"""Threads that run the checks of the triggers on one Airflow connection, in one triggerer."""

DEADLINE_GRACE = 5.0
"""Seconds a check still running at the deadline is waited for before the wait ends without it."""

T = TypeVar("T")
_POOLS: dict[str, ThreadPoolExecutor] = {}
_POOLS_LOCK = threading.Lock()

CheckResult = tuple[bool, dict[str, Any], str]
"""What one check returns: whether the wait is over, what was seen (JSON-able), and that seen in words."""


def as_utc_datetime(value: datetime | str | float, what: str) -> datetime:
    """A timezone-aware UTC datetime from an aware datetime, its ISO 8601 text, or a UNIX timestamp.

    Raises:
        ValueError: A naive datetime (which would be read in the machine's zone).
    """
    if isinstance(value, int | float):
        return datetime.fromtimestamp(value, UTC)
    value = datetime.fromisoformat(value) if isinstance(value, str) else value
    if value.tzinfo is None:
        raise ValueError(f"{what} must be a timezone-aware datetime or its ISO 8601 text, got {value!r}.")
    return value.astimezone(UTC)


async def _connection(conn_id: str) -> Any:
    """The Airflow connection, read without blocking the event loop."""
    lookup = getattr(IcebergCatalogHook, "aget_connection", None)
    if lookup is not None:  # Airflow 3.2+: the triggerer serves it asynchronously
        return await lookup(conn_id)
    from asgiref.sync import sync_to_async

    return await sync_to_async(IcebergCatalogHook.get_connection)(conn_id)


def _open_catalog(connection: Any) -> Catalog:
    """The catalog of an Airflow connection, opened to read (blocking: REST catalogs already talk to their server)."""
    from iceberg_ops_provider.catalogs import open_catalog
    from iceberg_ops_provider.hooks.catalog import connection_spec

    return open_catalog(connection_spec(connection), access="read")


def _call(target: Any, method: str) -> None:
    """``target.method()`` when it has one, ignoring its failure (a catalog's ``close``, an engine's ``dispose``)."""
    with contextlib.suppress(Exception):
        getattr(target, method, lambda: None)()


def _pool(conn_id: str) -> ThreadPoolExecutor:
    """The threads that run the checks of the triggers on ``conn_id`` (created once per process)."""
    with _POOLS_LOCK:
        pool = _POOLS.get(conn_id)
        if pool is None:
            pool = ThreadPoolExecutor(CHECK_THREADS_PER_CONNECTION, thread_name_prefix=f"iceberg-ops-check-{conn_id}")
            _POOLS[conn_id] = pool
        return pool


class _CheckOverran(Exception):
    """A check was still running when the wait's deadline (plus the grace) passed."""


class CatalogPollingTrigger(BaseTrigger):
    """Check an Iceberg catalog every ``poll_interval`` seconds until the check passes or ``deadline``.

    Subclasses say what they wait for (:meth:`waiting_for`), check once (:meth:`check`, run in a
    thread) and add their own arguments to :meth:`serialize` (:meth:`arguments`).

    Args:
        iceberg_conn_id: The Airflow connection of the catalog.
        deadline: When to stop waiting: an absolute time (aware datetime, ISO 8601 text or UNIX
            timestamp), kept by a trigger re-created after a triggerer restart.
        poll_interval: Seconds between checks.
        started_at: When the wait began, for the timeout message (default: now; kept when serialized).
    """

    def __init__(
        self,
        *,
        deadline: datetime | str | float,
        iceberg_conn_id: str = IcebergCatalogHook.default_conn_name,
        poll_interval: float = 60.0,
        started_at: datetime | str | float | None = None,
    ) -> None:
        super().__init__()
        self.iceberg_conn_id = iceberg_conn_id
        self.deadline = as_utc_datetime(deadline, "deadline")
        self.poll_interval = float(poll_interval)
        self.started_at = as_utc_datetime(started_at, "started_at") if started_at is not None else datetime.now(UTC)

    @abstractmethod
    def arguments(self) -> dict[str, Any]:
        """The subclass's own constructor arguments, JSON-able."""

    @abstractmethod
    def waiting_for(self) -> str:
        """What the trigger waits for, for messages."""

    @abstractmethod
    def check(self, catalog: Catalog, connection: Any) -> CheckResult:
        """Check once (blocking; runs in a thread). Raises what the catalog raises."""

    def serialize(self) -> tuple[str, dict[str, Any]]:
        """The class path and the keyword arguments that re-create this trigger, deadline included."""
        return (
            f"{type(self).__module__}.{type(self).__qualname__}",
            {
                **self.arguments(),
                "iceberg_conn_id": self.iceberg_conn_id,
                "deadline": self.deadline.isoformat(),
                "poll_interval": self.poll_interval,
                "started_at": self.started_at.isoformat(),
            },
        )

    def _event(self, status: str, message: str, seen: dict[str, Any] | None) -> TriggerEvent:
        return TriggerEvent({"status": status, "message": message, "seen": seen})

    def transient(self, exc: BaseException) -> bool:
        """Whether the wait goes on after ``exc`` (default: :func:`~iceberg_ops_provider.core.polling.is_transient`)."""
        return is_transient(exc)

    async def _in_thread(self, remaining: float, function: Callable[..., T], *args: Any) -> T:
        """``function(*args)`` in a check thread of this connection, waited for until the deadline plus the grace."""
        loop = asyncio.get_running_loop()
        call = functools.partial(contextvars.copy_context().run, function, *args)
        future = loop.run_in_executor(_pool(self.iceberg_conn_id), call)
        finished, _ = await asyncio.wait({future}, timeout=max(remaining, 0.0) + DEADLINE_GRACE)
        if not finished:
            future.cancel()  # only stops a call still queued; one running ends on its own
            raise _CheckOverran(
                f"the check was still running {DEADLINE_GRACE:g} s after the deadline (the catalog did not answer "
                "in time; each of its calls is bounded by the connection's `timeout`)"
            )
        return future.result()

    async def run(self) -> AsyncIterator[TriggerEvent]:
        """Check until done, a permanent error, or the deadline; yield one event."""
        catalog: Catalog | None = None
        connection: Any = None
        seen: dict[str, Any] | None = None
        seen_text: str | None = None
        last_error: str | None = None
        try:
            while True:
                remaining = (self.deadline - datetime.now(UTC)).total_seconds()
                try:
                    if catalog is None:
                        connection = await _connection(self.iceberg_conn_id)
                        catalog = await self._in_thread(remaining, _open_catalog, connection)
                    done, seen, seen_text = await self._in_thread(remaining, self.check, catalog, connection)
                    last_error = None
                    if done:
                        yield self._event("success", f"Done waiting for {self.waiting_for()}: {seen_text}.", seen)
                        return
                    self.log.info("Waiting for %s; seen: %s", self.waiting_for(), seen_text)
                except _CheckOverran as exc:
                    last_error = str(exc)
                    catalog = None  # its thread may still use it; the trigger ends below
                except Exception as exc:
                    if not self.transient(exc):
                        message = f"Stopped waiting for {self.waiting_for()}: {describe_error(exc)}"
                        yield self._event("failed", message, seen)
                        return
                    last_error = describe_error(exc)
                    self.log.warning("Check failed, trying again at the next poll: %s", last_error)
                    _call(catalog, "close")
                    catalog = None
                _call(getattr(catalog, "engine", None), "dispose")  # a SQL catalog's pooled connections
                now = datetime.now(UTC)
                remaining = (self.deadline - now).total_seconds()
                if remaining <= 0:
                    waited = (now - self.started_at).total_seconds()
                    message = timeout_message(self.waiting_for(), round(waited, 1), seen_text, last_error)
                    yield self._event("timeout", message, seen)
                    return
                await asyncio.sleep(min(self.poll_interval, remaining))
        finally:
            _call(catalog, "close")
