"""Catalog reads for the pages: each bounded by its connection's timeout, run side by side, reused for a few seconds.

A stalled catalog must not take the api-server's request threads with it: :data:`RETRY_AFTER`, :data:`MAX_WAITING`
and :data:`MAX_RUNNING` bound its reads (docs/ui.md, "A slow catalog never hangs a page").
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Callable, Hashable
from concurrent.futures import Future
from concurrent.futures import TimeoutError as FutureTimeout
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

from iceberg_ops_provider.ui.metadata_cache import MetadataCache

__all__ = ["MAX_RUNNING", "MAX_RUNNING_ALL", "MAX_WAITING", "MAX_WAITING_ALL", "RETRY_AFTER", "Part", "Reads"]

T = TypeVar("T")

# The bounds the module's docstring describes: seconds a catalog that timed out is not asked again; requests
# that may wait for one catalog, and for all; reads that may run for one catalog, and for all.
RETRY_AFTER = 30.0
MAX_WAITING = 4
MAX_WAITING_ALL = 12
MAX_RUNNING = 6
MAX_RUNNING_ALL = 24


@dataclass(frozen=True)
class Part(Generic[T]):
    """The outcome of one part of a page: its value, or the error to show instead, and when it was read."""

    value: T | None
    error: str | None
    read_at: float  # time.time() when the read finished (or gave up)
    seconds: float  # how long it took
    pending: bool = False  # still being read when the request stopped waiting (it goes on)
    exception: BaseException | None = field(default=None, compare=False, repr=False)  # never shown: see `error`

    @property
    def ok(self) -> bool:
        """Whether the value is there."""
        return self.error is None


@dataclass
class _Entry:
    future: Future
    started: float
    finished: float | None = None
    words: Callable[[BaseException], str] | None = None


class _NotAnswering(Exception):
    """A read not started because its catalog is known not to answer (the message is the page's error)."""


_LATER = "; reload in a moment (the rest of the page is shown without it)."
_RAISE_TIMEOUT = "Raise `timeout` in the connection's extra if the catalog is slow but working."


class Reads:
    """Bounded, concurrent, briefly cached reads (one instance per application)."""

    def __init__(
        self,
        *,
        retry_after: float = RETRY_AFTER,
        max_waiting: int = MAX_WAITING,
        max_waiting_all: int = MAX_WAITING_ALL,
        max_running: int = MAX_RUNNING,
        max_running_all: int = MAX_RUNNING_ALL,
    ) -> None:
        self._lock = threading.Lock()
        self._entries: dict[Hashable, _Entry] = {}
        self._catalogs: dict[str, tuple[str, Any]] = {}
        self._building: dict[str, threading.Lock] = {}
        self._retry_after, self._max_waiting, self._max_waiting_all = retry_after, max_waiting, max_waiting_all
        self._max_running, self._max_running_all = max_running, max_running_all
        self._silent: dict[str, tuple[float, float, float]] = {}  # catalog -> (monotonic, epoch, timeout)
        self._answered: dict[str, float] = {}  # catalog -> monotonic time of its last answer (or refusal)
        self._failed_builds: dict[str, tuple[str, float, BaseException]] = {}
        self._waiting: dict[str, int] = {}
        self._running: dict[str, int] = {}
        self.metadata = MetadataCache()
        """Facts computed from a table's metadata, kept per metadata location."""

    def _timed_out(self, catalog: str, deadline: float, timeout: float) -> None:
        """Record that ``catalog`` had no answer by ``deadline``, unless it answered since (the pause runs from it)."""
        if deadline <= self._answered.get(catalog, float("-inf")):
            return  # the catalog has answered (or refused) since: that is the news
        epoch = time.time() - (time.monotonic() - deadline)
        current = self._silent.get(catalog)
        if current is None or current[0] < deadline:
            self._silent[catalog] = (deadline, epoch, timeout)

    def _silence(self, catalog: str, now: float) -> str | None:
        """Why ``catalog`` is not asked now (it timed out less than ``retry_after`` ago), else ``None``."""
        silent = self._silent.get(catalog)
        if silent is None:
            return None
        since, epoch, timeout = silent
        if now - since > self._retry_after:
            del self._silent[catalog]
            return None
        at = time.strftime("%H:%M:%S", time.gmtime(epoch))
        return (
            f"The catalog of connection {catalog!r} did not answer within {timeout:g} s at {at} UTC; "
            f"it is asked again {math.ceil(self._retry_after - (now - since))} s from now (the rest of the page "
            f"is shown without it). {_RAISE_TIMEOUT}"
        )

    def start(
        self,
        key: Hashable,
        fn: Callable[[], Any],
        *,
        ttl: float,
        timeout: float,
        catalog: str,
        words: Callable[[BaseException], str] | None = None,
    ) -> _Entry:
        """Start (or join) the read of ``key`` from ``catalog``; ``words`` words its error for the page."""
        now = time.monotonic()
        with self._lock:
            entry = self._entries.get(key)
            fresh = entry is not None and (
                (entry.finished is not None and now - entry.finished <= ttl)
                or (entry.finished is None and now - entry.started <= timeout)
            )
            if fresh:
                return entry  # type: ignore[return-value]
            if entry is not None and entry.finished is None:
                # Still running past its timeout, though nobody waited that long (a page waiting less):
                # the catalog did not answer in time all the same.
                self._timed_out(catalog, entry.started + timeout, timeout)
            refusal = self._silence(catalog, now)
            if refusal is None and sum(self._running.values()) >= self._max_running_all:
                refusal = f"{self._max_running_all} catalog reads are running already{_LATER}"
            if refusal is None and self._running.get(catalog, 0) >= self._max_running:
                refusal = f"The catalog of connection {catalog!r} is still answering {self._max_running} earlier reads"
                refusal += _LATER
            if refusal is not None:
                refused = _Entry(Future(), now, now)
                refused.future.set_exception(_NotAnswering(refusal))
                return refused
            self._running[catalog] = self._running.get(catalog, 0) + 1
            if len(self._entries) > 2000:  # forget finished reads nobody asks for any more
                self._entries = {
                    k: e for k, e in self._entries.items() if e.finished is None or now - e.finished <= ttl
                }
            entry = _Entry(Future(), now, words=words)
            self._entries[key] = entry

        def run() -> None:
            value: Any = None
            error: BaseException | None = None
            try:
                value = fn()
            except BaseException as exc:  # handed to whoever waits
                error = exc
            entry.finished = time.monotonic()
            with self._lock:
                self._running[catalog] -= 1
                if error is None or not _is_timeout(error):
                    self._silent.pop(catalog, None)  # it answers (a refusal is an answer too)
                    self._answered[catalog] = entry.finished
                else:  # the catalog's own bound gave up: it did not answer, whoever was waiting
                    self._timed_out(catalog, entry.started + timeout, timeout)
            if error is not None:
                entry.future.set_exception(error)
            else:
                entry.future.set_result(value)

        threading.Thread(target=run, name=f"iceberg-ops ui: {key}"[:60], daemon=True).start()
        return entry

    def result(self, entry: _Entry, *, timeout: float, catalog: str, wait: float | None = None) -> Part:
        """Wait for a started read until ``timeout`` after its start, or ``wait`` seconds (then it is pending)."""
        now = time.monotonic()
        remaining = max(0.0, entry.started + timeout - now)
        patience = remaining if wait is None else min(remaining, wait)
        if not entry.future.done() and remaining <= 0:  # timed out already (a part read beside a slower one)
            return self._late(entry, timeout=timeout, catalog=catalog, gave_up=True)
        if not entry.future.done():
            with self._lock:
                silence = self._silence(catalog, now)
                busy = self._waiting.get(catalog, 0) >= self._max_waiting
                crowded = sum(self._waiting.values()) >= self._max_waiting_all
                if silence is None and not busy and not crowded:
                    self._waiting[catalog] = self._waiting.get(catalog, 0) + 1
            if silence is not None:
                return Part(None, silence, time.time(), now - entry.started)
            if busy or crowded:
                why = (
                    f"The catalog of connection {catalog!r} is still answering {self._max_waiting} earlier requests"
                    if busy
                    else f"{self._max_waiting_all} requests are waiting for catalogs already"
                )
                return Part(None, f"{why}{_LATER}", time.time(), now - entry.started, pending=True)
            try:
                entry.future.result(timeout=patience)
            except FutureTimeout:
                return self._late(entry, timeout=timeout, catalog=catalog, gave_up=patience >= remaining)
            except Exception:
                pass  # reported below
            finally:
                with self._lock:
                    self._waiting[catalog] -= 1
        try:
            value = entry.future.result(timeout=0)
        except _NotAnswering as exc:
            return Part(None, str(exc), time.time(), _took(entry))
        except Exception as exc:
            if _took(entry) >= timeout and _is_timeout(exc):  # the catalog's own bound gave up: the page's words
                return self._late(entry, timeout=timeout, catalog=catalog, gave_up=True)
            what = ": ".join(filter(None, (type(exc).__name__, str(exc).strip())))
            text = entry.words(exc) if entry.words is not None else f"Connection {catalog!r}: {what}"
            return Part(None, text, time.time(), _took(entry), exception=exc)
        return Part(value, None, time.time(), _took(entry))

    def _late(self, entry: _Entry, *, timeout: float, catalog: str, gave_up: bool) -> Part:
        waited = time.monotonic() - entry.started
        if not gave_up:
            text = (
                f"The catalog of connection {catalog!r} has not answered after "
                f"{round(waited) if waited >= 1 else round(waited, 1):g} s; it is still being "
                f"asked (up to the connection's timeout, {timeout:g} s): reload to see."
            )
            return Part(None, text, time.time(), waited, pending=True)
        with self._lock:
            self._timed_out(catalog, entry.started + timeout, timeout)
        text = (
            f"The catalog of connection {catalog!r} did not answer within {timeout:g} s (the "
            f"connection's timeout); the rest of the page is shown without it. {_RAISE_TIMEOUT}"
        )
        return Part(None, text, time.time(), waited)

    def many(
        self,
        jobs: dict[str, tuple[Hashable, Callable[[], Any]]],
        *,
        ttl: float,
        timeout: float,
        catalog: str,
        words: Callable[[BaseException], str] | None = None,
    ) -> dict[str, Part]:
        """Several reads side by side: ``{name: (key, fn)}`` -> ``{name: Part}``."""
        started = {
            name: self.start(key, fn, ttl=ttl, timeout=timeout, catalog=catalog, words=words)
            for name, (key, fn) in jobs.items()
        }
        return {name: self.result(entry, timeout=timeout, catalog=catalog) for name, entry in started.items()}

    def catalog(self, conn_id: str, fingerprint: str, build: Callable[[], Any]) -> Any:
        """The catalog of a connection, built on first use and again when its options change.

        One part builds it while the others wait; when that build fails, the waiting parts fail with its
        error rather than each building again (against a hung catalog, a timeout apiece).
        """
        asked = time.monotonic()
        with self._lock:
            cached = self._catalogs.get(conn_id)
            building = self._building.setdefault(conn_id, threading.Lock())
        if cached is not None and cached[0] == fingerprint:
            return cached[1]
        with building:
            with self._lock:
                cached = self._catalogs.get(conn_id)
                failed = self._failed_builds.get(conn_id)
            if cached is not None and cached[0] == fingerprint:
                return cached[1]
            if failed is not None and failed[0] == fingerprint and failed[1] >= asked:
                raise failed[2]  # the build this part waited for failed just now
            try:
                built = build()
            except BaseException as exc:
                with self._lock:
                    self._failed_builds[conn_id] = (fingerprint, time.monotonic(), exc)
                raise
            with self._lock:
                self._catalogs[conn_id] = (fingerprint, built)
                self._failed_builds.pop(conn_id, None)
            return built

    def clear(self) -> None:
        """Forget every cached read and catalog (tests)."""
        with self._lock:
            held = (self._entries, self._catalogs, self._silent, self._answered, self._failed_builds, self._waiting)
            for cache in held:
                cache.clear()
        self.metadata.clear()


def _is_timeout(exc: BaseException) -> bool:
    """Whether ``exc`` is a catalog call that gave up waiting (the engine's bound, or the socket's)."""
    from iceberg_ops_provider.errors import CatalogUnavailableError

    return isinstance(exc, TimeoutError) or (isinstance(exc, CatalogUnavailableError) and exc.timeout is not None)


def _took(entry: _Entry) -> float:
    return (entry.finished or time.monotonic()) - entry.started
