"""Copies a move's units one after the other with the same lanes, so no core idles between units.

The pieces of every unit wait in one queue, in unit order; the caller commits units in order while the
lanes copy at most ``lookahead`` units ahead, which bounds the work a dying process loses.
"""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import pyarrow as pa

from iceberg_ops_provider.data_migration.source_pieces import SourcePiece

if TYPE_CHECKING:
    from pyiceberg.manifest import DataFile

__all__ = ["CopyOutcome", "CopyPipeline", "Stopped", "UnitCopy"]


class Stopped(Exception):
    """The pipeline stopped (a lane failed, or the caller left): a lane stops at its next batch."""


@dataclass
class UnitCopy:
    """One unit's copy: what its lanes wrote, and how far it got.

    ``written`` lists every file created for it the moment it is created; ``skipped``: dropped by
    :meth:`CopyPipeline.skip` before any of it was copied.
    """

    index: int
    data_files: list[DataFile] = field(default_factory=list)
    rows: int = 0
    bytes_read: int = 0
    rows_changed: int = 0
    written: list[str] = field(default_factory=list)
    skipped: bool = False
    pieces_total: int = 0
    pieces_left: int = 0  # not yet taken by a lane
    lanes_in: int = 0  # lanes that took some of its pieces and have not closed their files of it

    @property
    def done(self) -> bool:
        """Whether every piece was copied and every file of the unit closed."""
        return self.pieces_left == 0 and self.lanes_in == 0

    @property
    def bytes_written(self) -> int:
        """Bytes of the unit's new data files."""
        return sum(data_file.file_size_in_bytes for data_file in self.data_files)


@dataclass
class CopyOutcome:
    """What a copy wrote (new uncommitted data files, rows, bytes read and written), or one lane of one unit.

    ``rows_changed``: what the copier's ``changed_rows`` counted, if it has one.
    """

    data_files: list[DataFile] = field(default_factory=list)
    rows: int = 0
    bytes_read: int = 0
    bytes_written: int = 0
    rows_changed: int = 0


class CopyPipeline:
    """Runs ``lanes`` threads over the pieces of ``units`` in order; use as a context manager.

    Each lane callable runs in its own thread with this pipeline and loops over :meth:`take` until it
    returns ``None``. ``lookahead``: units beyond the oldest unreleased one that lanes may copy.
    """

    def __init__(
        self,
        units: Sequence[Sequence[SourcePiece]],
        lanes: Sequence[Callable[[CopyPipeline], None]],
        lookahead: int = 1,
    ) -> None:
        self.units = [
            UnitCopy(index, pieces_total=len(pieces), pieces_left=len(pieces)) for index, pieces in enumerate(units)
        ]
        self._queue: deque[tuple[UnitCopy, SourcePiece]] = deque(
            (unit, piece) for unit, pieces in zip(self.units, units, strict=True) for piece in pieces
        )
        self._lanes = lanes
        self._threads: list[threading.Thread] = []
        self.lookahead = lookahead
        self._released = 0  # units released so far, in order
        self._next = 0  # the unit next_unit returns next
        self._changed = threading.Condition()
        self.stop = threading.Event()
        self.error: BaseException | None = None

    def __enter__(self) -> CopyPipeline:
        for number, lane in enumerate(self._lanes):
            thread = threading.Thread(
                target=self._run_lane, args=(lane,), name=f"iceberg-ops-copy-{number}", daemon=True
            )
            self._threads.append(thread)
            thread.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def close(self) -> None:
        """Stop the lanes and wait until every one closed or aborted its files (also when interrupted)."""
        with self._changed:
            self.stop.set()
            self._changed.notify_all()
        interrupted: BaseException | None = None
        for thread in self._threads:
            while thread.is_alive():
                try:
                    thread.join()
                except BaseException as exc:  # e.g. a second Ctrl-C: the files are still closed first
                    interrupted = interrupted or exc
        pa.default_memory_pool().release_unused()
        if interrupted is not None:
            raise interrupted

    def _run_lane(self, lane: Callable[[CopyPipeline], None]) -> None:
        try:
            lane(self)
        except BaseException as exc:
            with self._changed:
                if self.error is None and not isinstance(exc, Stopped):
                    self.error = exc
                self.stop.set()
                self._changed.notify_all()

    def take(self, current: UnitCopy | None, *, wait: bool) -> tuple[UnitCopy, SourcePiece] | None:
        """The next piece for a lane whose open files belong to ``current``; raises :class:`Stopped` once stopped.

        Without ``wait``, ``None`` means no piece can be taken right now (the lane should close its files
        of ``current``, :meth:`leave` it and ask again with ``wait``); with ``wait``, that every piece was
        taken. A piece of another unit counts the lane in that unit; the lane then leaves ``current`` first.
        """
        with self._changed:
            while True:
                if self.stop.is_set():
                    raise Stopped()
                if self._queue and self._queue[0][0].index <= self._released + self.lookahead:
                    unit, piece = self._queue.popleft()
                    unit.pieces_left -= 1
                    if unit is not current:
                        unit.lanes_in += 1
                    return unit, piece
                if not wait or not self._queue:
                    return None
                self._changed.wait()

    def leave(self, unit: UnitCopy, share: CopyOutcome) -> None:
        """A lane closed its files of ``unit``: add what it wrote."""
        with self._changed:
            unit.data_files.extend(share.data_files)
            unit.rows += share.rows
            unit.bytes_read += share.bytes_read
            unit.rows_changed += share.rows_changed
            unit.lanes_in -= 1
            self._changed.notify_all()

    def next_unit(self, waiting: Callable[[], None] | None = None, every: float = 0.5) -> UnitCopy:
        """Wait until the next unit (in order) is copied, and return it; raises a lane's failure (every lane stops).

        While it waits, ``waiting`` is called on this (the caller's) thread, without the pipeline's lock, each
        time the lanes move on and at least every ``every`` seconds: an error it raises is raised here (the
        lanes stop when the caller leaves the pipeline).
        """
        unit = self.units[self._next]
        while True:
            with self._changed:
                if unit.done or self.error is not None or self.stop.is_set():
                    break
                self._changed.wait(every if waiting is not None else None)
            if waiting is not None:
                waiting()
        with self._changed:
            if self.error is not None:
                raise self.error
            if not unit.done:
                raise Stopped()
        self._next += 1
        return unit

    def release(self, unit: UnitCopy) -> None:
        """The caller is done with ``unit`` (committed or discarded): lanes may start one more unit."""
        with self._changed:
            self._released = max(self._released, unit.index + 1)
            self._changed.notify_all()

    def skip(self, index: int) -> bool:
        """Drop unit ``index`` if no lane took any of its pieces and it was not returned; whether it was dropped."""
        with self._changed:
            unit = self.units[index]
            if index < self._next or unit.skipped or unit.pieces_left != unit.pieces_total or unit.lanes_in:
                return False
            self._queue = deque(entry for entry in self._queue if entry[0] is not unit)
            unit.pieces_left = 0
            unit.skipped = True
            self._changed.notify_all()
            return True
