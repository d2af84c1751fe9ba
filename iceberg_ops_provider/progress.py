"""Progress of long work (rows, bytes, rate, ETA), reported through one callback and the log.

Long engine calls take ``on_progress``, called with :class:`Progress` snapshots (keep it quick); the same
tracker logs a line at a steady cadence, so a task log shows the work moving. A tracker made with
``report_on_add=False`` calls it only on the threads that call :meth:`ProgressTracker.poll`,
:meth:`~ProgressTracker.unit_done` and :meth:`~ProgressTracker.finish` (the data mover: the thread that
commits its units), never on the worker threads that count.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

__all__ = ["Progress", "ProgressCallback", "ProgressTracker", "duration_text", "size_text"]

log = logging.getLogger(__name__)

_MIB = 2**20
_CALLBACK_EVERY = 0.5  # seconds between calls of on_progress


@dataclass(frozen=True)
class Progress:
    """A snapshot of the progress of one piece of long work.

    Attributes:
        label: What is being done (``move sales.orders -> archive.orders``).
        bytes: Input bytes done so far (``total_bytes``: in all, when known).
        units_done: Units of work finished (a move's units, a compaction's groups).
        files_done: Input files done (a compaction's small files); ``0`` when the work does not count files.
        unit_name: What a unit is called in messages (``unit``, ``group``).
    """

    label: str
    rows: int
    bytes: int
    total_bytes: int | None
    units_done: int
    units_total: int | None
    elapsed: float
    files_done: int = 0
    files_total: int | None = None
    unit_name: str = "unit"

    @property
    def bytes_per_second(self) -> float:
        """Input bytes per second so far."""
        return self.bytes / self.elapsed if self.elapsed > 0 else 0.0

    @property
    def rows_per_second(self) -> float:
        """Rows per second so far."""
        return self.rows / self.elapsed if self.elapsed > 0 else 0.0

    @property
    def eta_seconds(self) -> float | None:
        """Seconds left at the rate so far, when the total is known and something is done."""
        if not self.total_bytes or not self.bytes or self.elapsed <= 0:
            return None
        return max(0.0, (self.total_bytes - self.bytes) / self.bytes_per_second)

    def describe(self) -> str:
        """One line for a log or a terminal."""
        parts = [f"{self.rows:,} rows", size_text(self.bytes)]
        if self.total_bytes:
            parts[-1] += f" of {size_text(self.total_bytes)} ({100 * self.bytes / self.total_bytes:.0f}%)"
        if self.files_total:
            parts.append(f"{self.files_done:,} of {self.files_total:,} files")
        if self.units_total:
            parts.append(f"{self.unit_name} {self.units_done} of {self.units_total} done")
        parts.append(f"{size_text(self.bytes_per_second)}/s, {self.rows_per_second:,.0f} rows/s")
        if (eta := self.eta_seconds) is not None:
            parts.append(f"ETA {duration_text(eta)}")
        return f"{self.label}: " + ", ".join(parts)


ProgressCallback = Callable[[Progress], None]
"""What long engine calls accept as ``on_progress``."""


def size_text(nbytes: float) -> str:
    """``nbytes`` in the largest binary unit that keeps it at 1 or more (``812 B``, ``3.4 KiB``, ``1,024.0 MiB``)."""
    if nbytes < 1024:
        return f"{nbytes:,.0f} B"
    if nbytes < _MIB:
        return f"{nbytes / 1024:,.1f} KiB"
    if nbytes < 2**30 * 10:
        return f"{nbytes / _MIB:,.1f} MiB"
    return f"{nbytes / 2**30:,.2f} GiB"


def duration_text(seconds: float) -> str:
    """``seconds`` as the command line and logs write a time left (``4s``, ``2m05s``, ``1h03m``)."""
    seconds = round(seconds)
    if seconds < 60:
        return f"{seconds}s"
    minutes, seconds = divmod(seconds, 60)
    if minutes < 60:
        return f"{minutes}m{seconds:02d}s"
    hours, minutes = divmod(minutes, 60)
    return f"{hours}h{minutes:02d}m"


class ProgressTracker:
    """Counts work from any thread, logs it every ``log_every`` seconds and hands it to ``on_progress``.

    Args:
        units_done: Units already done before this call (a resumed move's committed units).
        on_progress: Gets a :class:`Progress` at most twice a second, per unit done, and at the end.
        log_every: Seconds between log lines (``0`` logs nothing).
        report_on_add: Whether :meth:`add` calls ``on_progress`` (on the thread that counts); without it,
            :meth:`poll` does, on its caller's thread, so that an error the callback raises is that thread's.
    """

    def __init__(
        self,
        label: str,
        *,
        total_bytes: int | None = None,
        units_total: int | None = None,
        units_done: int = 0,
        on_progress: ProgressCallback | None = None,
        log_every: float = 10.0,
        files_total: int | None = None,
        unit_name: str = "unit",
        report_on_add: bool = True,
    ) -> None:
        self.label, self.total_bytes, self.units_total = label, total_bytes, units_total
        self.files_total, self.unit_name = files_total, unit_name
        self._on_progress, self._log_every = on_progress, log_every
        self._report_on_add = report_on_add
        self._unreported = False  # counted since the callback last ran
        self._lock = threading.Lock()
        self._started = self._last_log = time.monotonic()
        self._rows = self._bytes = self._files = 0
        self._units = units_done
        self._last_callback = 0.0

    def snapshot(self) -> Progress:
        """The progress now."""
        with self._lock:
            return self._snapshot_locked()

    def _snapshot_locked(self) -> Progress:
        elapsed = time.monotonic() - self._started
        done = {"rows": self._rows, "bytes": self._bytes, "units_done": self._units, "files_done": self._files}
        totals = {"total_bytes": self.total_bytes, "units_total": self.units_total, "files_total": self.files_total}
        return Progress(self.label, **done, **totals, elapsed=elapsed, unit_name=self.unit_name)

    def add(self, rows: int, nbytes: int, files: int = 0) -> None:
        """Count ``rows`` rows, ``nbytes`` input bytes and ``files`` input files done (thread-safe)."""
        now = time.monotonic()
        with self._lock:
            self._rows += rows
            self._bytes += nbytes
            self._files += files
            self._unreported = True
            log_due = self._log_every > 0 and now - self._last_log >= self._log_every
            callback_due = (
                self._report_on_add and self._on_progress is not None and now - self._last_callback >= _CALLBACK_EVERY
            )
            if log_due:
                self._last_log = now
            if callback_due:
                self._last_callback, self._unreported = now, False
            progress = self._snapshot_locked() if log_due or callback_due else None
        if progress is not None:
            if log_due:
                log.info("%s", progress.describe())
            if callback_due and self._on_progress is not None:
                self._on_progress(progress)

    def poll(self) -> None:
        """Hand the progress to ``on_progress`` when something was counted since its last call, at most twice a second.

        Called by the thread that should run the callback, while it waits for the counting threads.
        """
        if self._on_progress is None:
            return
        now = time.monotonic()
        with self._lock:
            if not self._unreported or now - self._last_callback < _CALLBACK_EVERY:
                return
            self._last_callback, self._unreported = now, False
            progress = self._snapshot_locked()
        self._on_progress(progress)

    def unit_done(self) -> None:
        """Count one unit finished and report it."""
        with self._lock:
            self._units += 1
            self._last_callback, self._unreported = time.monotonic(), False
            progress = self._snapshot_locked()
        if self._on_progress is not None:
            self._on_progress(progress)

    def finish(self) -> Progress:
        """Report the final progress (log line and callback) and return it."""
        progress = self.snapshot()
        if self._log_every > 0:
            log.info("%s", progress.describe())
        if self._on_progress is not None:
            self._on_progress(progress)
        return progress
