"""Progress of long commands on the terminal, and Ctrl-C that stops work at its next safe point.

Everything goes to stderr: stdout stays for the result (``--json``).
"""

from __future__ import annotations

import dataclasses
import signal
import sys
import threading
import time
from collections.abc import Callable
from types import FrameType
from typing import Any, Literal, TextIO

import click

from iceberg_ops_provider.progress import Progress, size_text

__all__ = ["ProgressDisplay", "StopOnInterrupt"]

Mode = Literal["auto", "bar", "lines", "none"]
_BAR_WIDTH = 24
_MIN_LABEL = 16  # characters of a long label kept on a narrow terminal
_MIN_LINE_GAP = 1.0  # seconds between plain lines, however fast units finish


def _eta(seconds: float | None) -> str:
    if seconds is None:
        return "ETA ?"
    seconds = round(seconds)
    minutes, seconds = divmod(seconds, 60)
    hours, minutes = divmod(minutes, 60)
    return f"ETA {hours}:{minutes:02d}:{seconds:02d}" if hours else f"ETA {minutes}:{seconds:02d}"


def _detail(progress: Progress, width: int | None = None) -> str:
    """The figures next to the bar: bytes, rows, files, units, rate, ETA; the least useful go first when narrow."""
    size = size_text(progress.bytes)
    if progress.total_bytes:
        size += f" / {size_text(progress.total_bytes)}"
    parts: list[tuple[int, str]] = [(0, size), (2, f"{progress.rows:,} rows")]  # (drop order, text); 0 stays
    if progress.files_total:
        parts.append((3, f"{progress.files_done:,}/{progress.files_total:,} files"))
    if progress.units_total:
        parts.append((4, f"{progress.unit_name}s {progress.units_done}/{progress.units_total}"))
    parts += [(1, f"{size_text(progress.bytes_per_second)}/s"), (0, _eta(progress.eta_seconds))]
    text = " · ".join(part for _, part in parts)
    while width is not None and len(text) > width and any(priority for priority, _ in parts):
        parts.remove(max(parts, key=lambda part: part[0]))
        text = " · ".join(part for _, part in parts)
    return text


def _short_label(label: str, room: int) -> str:
    """``label`` in ``room`` characters (at least ``_MIN_LABEL``), its middle left out: the figures go last."""
    room = max(room, _MIN_LABEL)
    if len(label) <= room:
        return label
    head = (room - 1) // 2
    return f"{label[:head]}…{label[len(label) - (room - 1 - head) :]}"


class ProgressDisplay:
    """Shows the progress the engine reports (thread-safe); use as a context manager and pass it as ``on_progress``.

    ``mode``: ``bar`` (a live rich bar), ``lines`` (a plain line per unit done, at most one a second, and
    every ``interval`` seconds), ``none``, or ``auto`` (a bar on a terminal). ``last``: the latest snapshot.
    """

    def __init__(self, mode: Mode = "auto", *, interval: float = 10.0, stream: TextIO | None = None) -> None:
        self.stream = stream if stream is not None else sys.stderr
        if mode == "auto":
            mode = "bar" if _isatty(self.stream) else "lines"
        self.mode = mode
        self.interval = interval
        self.last: Progress | None = None
        self._lock = threading.RLock()  # re-entrant: a signal handler may print while the main thread does
        self._bar: Any = None
        self._tasks: dict[str, Any] = {}
        self._printed: dict[str, tuple[float, Progress]] = {}
        self._pending: dict[str, Progress] = {}

    def __enter__(self) -> ProgressDisplay:
        if self.mode == "bar":
            from rich.console import Console
            from rich.progress import BarColumn, TaskProgressColumn, TextColumn
            from rich.progress import Progress as Bar

            self._bar = Bar(
                TextColumn("[bold]{task.description}"),
                BarColumn(bar_width=_BAR_WIDTH),
                TaskProgressColumn(),
                TextColumn("{task.fields[detail]}"),
                console=Console(file=self.stream),
                refresh_per_second=4,
                redirect_stdout=False,
            )
            self._bar.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        if self._bar is not None:
            self._bar.stop()
            self._bar = None
        elif self.mode == "lines":
            with self._lock:
                for progress in list(self._pending.values()):
                    printed = self._printed.get(progress.label)
                    if printed is None or _figures(printed[1]) != _figures(progress):
                        self._line(progress)
                self._pending.clear()

    def __call__(self, progress: Progress) -> None:
        """Take one snapshot (thread-safe)."""
        with self._lock:
            self.last = progress
            if self.mode == "none":
                return
            if self._bar is not None:
                self._draw(progress)
                return
            printed = self._printed.get(progress.label)
            since = time.monotonic() - printed[0] if printed is not None else self.interval
            unit_done = printed is None or printed[1].units_done != progress.units_done
            if since >= self.interval or (unit_done and since >= _MIN_LINE_GAP):
                self._line(progress)
            else:
                self._pending[progress.label] = progress

    def note(self, message: str) -> None:
        """Print a message above the bar (or as a line) on the display's stream."""
        with self._lock:
            if self._bar is not None:
                self._bar.console.print(message, markup=False, highlight=False)
            else:
                click.echo(message, file=self.stream)

    def _draw(self, progress: Progress) -> None:
        task = self._tasks.get(progress.label)
        total = progress.total_bytes or None
        if task is None:
            task = self._bar.add_task(progress.label, total=total, detail="")
            self._tasks[progress.label] = task
        width = self._bar.console.width - _BAR_WIDTH - 8  # the bar, its percentage and the gaps
        essential = _detail(dataclasses.replace(progress, files_total=None, units_total=None))  # size, rows, rate
        label = _short_label(progress.label, width - len(essential))
        detail = _detail(progress, max(width - len(label), 20))
        self._bar.update(task, description=label, completed=progress.bytes, total=total, detail=detail)

    def _line(self, progress: Progress) -> None:
        self._printed[progress.label] = (time.monotonic(), progress)
        self._pending.pop(progress.label, None)
        click.echo(progress.describe(), file=self.stream)


def _figures(progress: Progress) -> tuple[int, int, int, int]:
    return progress.rows, progress.bytes, progress.files_done, progress.units_done


def _isatty(stream: TextIO) -> bool:
    try:
        return stream.isatty()
    except (AttributeError, ValueError):
        return False


class StopOnInterrupt:
    """While active, Ctrl-C (SIGINT) first asks the work to stop at its next safe point, then interrupts it.

    The first Ctrl-C calls :attr:`stop` (safe from a signal handler: it sets a flag) and has ``notice``
    print ``message``; the second raises ``KeyboardInterrupt``. Before :attr:`stop` is set the first
    Ctrl-C raises at once; after :meth:`finished` Ctrl-C is ignored. Installed in the main thread only,
    and not when SIGINT is ignored. ``requested``: whether Ctrl-C was pressed.
    """

    def __init__(self, notice: Callable[[str], None], message: str) -> None:
        self.notice = notice
        self.message = message
        self.stop: Callable[[], None] | None = None
        self.requested = False
        self._finished = False
        self._previous: Any = None
        self._installed = False

    def __enter__(self) -> StopOnInterrupt:
        # A SIGINT the parent set to be ignored (``nohup``, a background job of a non-interactive shell) stays so.
        if threading.current_thread() is threading.main_thread() and signal.getsignal(signal.SIGINT) != signal.SIG_IGN:
            self._previous = signal.signal(signal.SIGINT, self._handle)
            self._installed = True
        return self

    def __exit__(self, exc_type: type[BaseException] | None, *exc_info: object) -> None:
        if self._installed:
            # Exiting because of Ctrl-C: one more must not turn the clean exit into a traceback.
            leaving = self.requested and exc_type is not None and issubclass(exc_type, SystemExit)
            signal.signal(signal.SIGINT, signal.SIG_IGN if leaving else self._previous)
            self._installed = False

    def finished(self) -> None:
        """The work ended: from now on Ctrl-C is ignored until the context exits."""
        self._finished = True

    def _handle(self, signum: int, frame: FrameType | None) -> None:
        if self._finished:
            return
        if self.requested or self.stop is None:
            self.requested = True
            raise KeyboardInterrupt
        self.requested = True
        self.stop()
        self.notice(self.message)
