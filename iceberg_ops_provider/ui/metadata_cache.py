"""What the pages compute from a table's metadata, kept per metadata file, so one state is read once.

A table's metadata location names one state of it: its snapshots, refs, schemas, specs and properties, and
through them its manifests. Whatever is computed from that state alone (a health verdict, a histogram of file
sizes, a snapshot timeline) stays true while the location stays the same, however often a page asks. A page
reads the location (one catalog call that loads the table) and computes the rest only when it changed.

Facts that depend on the clock as well as the metadata (what is expirable *now*, a lock's lease) are computed
on each view, or kept under a kind that names the time they hold for (:func:`clock_kind`: a health report is
kept for at most :data:`CLOCK_SECONDS`, by the namespace's list and the table's page alike).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Hashable
from typing import Any, TypeVar

from cachetools import LRUCache

__all__ = ["CLOCK_SECONDS", "MAX_ENTRIES", "MetadataCache", "clock_kind"]

T = TypeVar("T")

MAX_ENTRIES = 4096
"""Facts kept at most, the least recently used dropped first (each is a page's part of one table).

A namespace's table list keeps one small health measure per table: a list of a few thousand tables sorted
by health stays within it.
"""

CLOCK_SECONDS = 600
"""Seconds a fact that also reads the clock (what is expirable now) is kept for an unchanged metadata location."""


def clock_kind(kind: str, now: float | None = None) -> str:
    """``kind`` for a fact that also reads the clock: a new kind, so a new computation, every :data:`CLOCK_SECONDS`."""
    moment = time.time() if now is None else now
    return f"{kind}@{int(moment // CLOCK_SECONDS)}"


class MetadataCache:
    """Facts by ``(kind, catalog, table, metadata location)``, computed once per location (thread-safe).

    Two views asking at once for the same missing fact may both compute it (the pages' reads already join a
    part being read); the result is the same, and the one stored last is kept.
    """

    def __init__(self, max_entries: int = MAX_ENTRIES) -> None:
        self._lock = threading.Lock()
        self._facts: LRUCache[Hashable, Any] = LRUCache(maxsize=max_entries)
        self.computed = 0
        """How many facts were computed (not found kept) since the cache was made: what a page cost."""

    def get(self, kind: str, catalog: str, table: str, metadata_location: str | None, compute: Callable[[], T]) -> T:
        """The ``kind`` fact of ``table`` at ``metadata_location``, computed by ``compute`` unless kept already.

        A table without a metadata location (one a catalog answers for without a file) is computed every time.
        """
        if metadata_location is None:
            with self._lock:
                self.computed += 1
            return compute()
        key = (kind, catalog, table, metadata_location)
        with self._lock:
            if key in self._facts:
                return self._facts[key]
        value = compute()
        with self._lock:
            self._facts[key] = value
            self.computed += 1
        return value

    def __len__(self) -> int:
        with self._lock:
            return len(self._facts)

    def clear(self) -> None:
        """Forget every kept fact (tests)."""
        with self._lock:
            self._facts.clear()
