"""Catalog reads for the pages: each bounded by its connection's timeout, run side by side, reused for a few seconds.

A page asks for several parts (a namespace's status, its audit trail, its tables); each part is one
:meth:`Reads.get` whose work runs in a daemon thread of its own, so the parts of a page are read at
the same time and none can hold the page longer than the connection's ``timeout``: a part that
does not finish in time is an error naming the catalog, and the page shows the others. A finished
part (value or error) is reused for ``ttl`` seconds; a part still running is joined rather than
started again (a stalled catalog costs one waiting thread per part, not one per page view), until
it has run longer than the timeout and a fresh attempt is allowed.

Catalogs are built once per connection and reused while its options stay the same.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Hashable
from concurrent.futures import Future
from concurrent.futures import TimeoutError as FutureTimeout
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from iceberg_ops_provider.core.catalog_messages import seconds_text

__all__ = ["Part", "Reads"]

T = TypeVar("T")


@dataclass(frozen=True)
class Part(Generic[T]):
    """The outcome of one part of a page: its value, or the error to show instead, and when it was read."""

    value: T | None
    error: str | None
    read_at: float  # time.time() when the read finished (or gave up)
    seconds: float  # how long it took

    @property
    def ok(self) -> bool:
        """Whether the value is there."""
        return self.error is None


@dataclass
class _Entry:
    future: Future
    started: float
    finished: float | None = None


def _error_text(exc: BaseException) -> str:
    text = str(exc).strip()
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


class Reads:
    """Bounded, concurrent, briefly cached reads (one instance per application)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._entries: dict[Hashable, _Entry] = {}
        self._catalogs: dict[str, tuple[str, Any]] = {}
        self._building: dict[str, threading.Lock] = {}

    def start(self, key: Hashable, fn: Callable[[], Any], *, ttl: float, timeout: float) -> _Entry:
        """Start (or join) the read of ``key``; :meth:`result` waits for it."""
        now = time.monotonic()
        with self._lock:
            entry = self._entries.get(key)
            fresh = entry is not None and (
                (entry.finished is not None and now - entry.finished <= ttl)
                or (entry.finished is None and now - entry.started <= timeout)
            )
            if fresh:
                return entry  # type: ignore[return-value]
            if len(self._entries) > 2000:  # forget finished reads nobody asks for any more
                self._entries = {
                    k: e for k, e in self._entries.items() if e.finished is None or now - e.finished <= ttl
                }
            entry = _Entry(Future(), now)
            self._entries[key] = entry

        def run() -> None:
            try:
                entry.future.set_result(fn())
            except BaseException as exc:  # handed to whoever waits
                entry.future.set_exception(exc)
            finally:
                entry.finished = time.monotonic()

        threading.Thread(target=run, name=f"iceberg-ops ui: {key}"[:60], daemon=True).start()
        return entry

    def result(self, entry: _Entry, *, timeout: float, catalog: str) -> Part:
        """Wait for a started read, at most until ``timeout`` seconds after it started."""
        remaining = max(0.0, entry.started + timeout - time.monotonic())
        try:
            value = entry.future.result(timeout=remaining)
        except FutureTimeout:
            return Part(
                None,
                f"The catalog of connection {catalog!r} did not answer within {seconds_text(timeout)} (the "
                "connection's timeout); the rest of the page is shown without it. Raise `timeout` in the "
                "connection's extra if the catalog is slow but working.",
                time.time(),
                time.monotonic() - entry.started,
            )
        except Exception as exc:
            return Part(None, f"Connection {catalog!r}: {_error_text(exc)}", time.time(), _took(entry))
        return Part(value, None, time.time(), _took(entry))

    def get(self, key: Hashable, fn: Callable[[], T], *, ttl: float, timeout: float, catalog: str) -> Part[T]:
        """Read ``key`` with ``fn`` (or reuse it), bounded by ``timeout`` seconds."""
        return self.result(self.start(key, fn, ttl=ttl, timeout=timeout), timeout=timeout, catalog=catalog)

    def many(self, jobs: dict[str, tuple[Hashable, Callable[[], Any]]], *, ttl: float, timeout: float, catalog: str):
        """Several reads side by side: ``{name: (key, fn)}`` -> ``{name: Part}``."""
        started = {name: self.start(key, fn, ttl=ttl, timeout=timeout) for name, (key, fn) in jobs.items()}
        return {name: self.result(entry, timeout=timeout, catalog=catalog) for name, entry in started.items()}

    def catalog(self, conn_id: str, fingerprint: str, build: Callable[[], Any]) -> Any:
        """The catalog of a connection, built on first use and again when its options change.

        The parts of a page ask for it at the same time: one of them builds it, the others wait for
        that one (each part is bounded by the connection's timeout all the same).
        """
        with self._lock:
            cached = self._catalogs.get(conn_id)
            building = self._building.setdefault(conn_id, threading.Lock())
        if cached is not None and cached[0] == fingerprint:
            return cached[1]
        with building:
            with self._lock:
                cached = self._catalogs.get(conn_id)
            if cached is not None and cached[0] == fingerprint:
                return cached[1]
            built = build()
            with self._lock:
                self._catalogs[conn_id] = (fingerprint, built)
            return built

    def clear(self) -> None:
        """Forget every cached read and catalog (tests)."""
        with self._lock:
            self._entries.clear()
            self._catalogs.clear()


def _took(entry: _Entry) -> float:
    return (entry.finished or time.monotonic()) - entry.started
