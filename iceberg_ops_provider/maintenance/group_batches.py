"""Runs a compaction's groups: written side by side, committed several at a time, in plan order.

Up to ``concurrency`` groups are written on a pool while this thread commits those written before, once
they hold ``commit_bytes`` of input or a minute went by. If anything raises (an interrupt included), the
groups being written stop at their next batch of rows, the files of every uncommitted group are deleted
and the exception goes on; a ``SIGKILL`` leaves orphans, and the table changes only by the commits made.
"""

from __future__ import annotations

import logging
import time
from collections import deque
from collections.abc import Callable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from typing import TYPE_CHECKING

from iceberg_ops_provider.maintenance.compaction_result import CompactionGroupResult
from iceberg_ops_provider.maintenance.group_runner import (
    GroupRunner,
    WrittenGroup,
    delete_written,
    identifier,
    planned_result,
)
from iceberg_ops_provider.progress import size_text

if TYPE_CHECKING:
    from iceberg_ops_provider.maintenance.binpack import FileGroup

__all__ = ["COMMIT_INTERVAL_SECONDS", "GroupBatches"]

log = logging.getLogger(__name__)

COMMIT_INTERVAL_SECONDS = 60.0
"""Written groups are committed at least this often, however little they rewrote."""


class GroupBatches:
    """Writes and commits the groups of one compaction call; ``results`` holds each group's outcome.

    Args:
        runner: Writes and commits single groups and batches.
        commit_bytes: Input bytes of written groups that make a batch due; ``0`` commits each group alone.
        concurrency: Groups written at once.
        started: When the call started (``time.monotonic()``), for the log lines.
        total_bytes: Input bytes of all groups, for the log lines.
    """

    def __init__(
        self, runner: GroupRunner, *, commit_bytes: int, concurrency: int, started: float, total_bytes: int
    ) -> None:
        self.runner = runner
        self.commit_bytes = commit_bytes
        self.concurrency = concurrency
        self.started = started
        self.total_bytes = total_bytes
        self.results: list[CompactionGroupResult] = []
        self._pending: list[WrittenGroup] = []
        self._in_flight: deque[Future[WrittenGroup | CompactionGroupResult]] = deque()
        self._last_commit = time.monotonic()
        self._done_bytes = 0

    def run(self, groups: Sequence[FileGroup], should_stop: Callable[[], bool] | None) -> bool:
        """Write and commit ``groups``; returns whether ``should_stop`` stopped it before the last one started."""
        stopped = False
        name = identifier(self.runner.table)
        pool = ThreadPoolExecutor(max_workers=self.concurrency, thread_name_prefix="iceberg-ops-compaction")
        try:
            for group in groups:
                while len(self._in_flight) >= self.concurrency:
                    self._collect()
                if should_stop is not None and should_stop():
                    stopped = True
                    break
                self._in_flight.append(pool.submit(self.runner.write, group, planned_result(group)))
                self._commit_if_due()
            while self._in_flight:
                self._collect()
                self._commit_if_due()
            self._commit()
        except BaseException:
            self._abandon()
            raise
        finally:
            pool.shutdown(wait=True, cancel_futures=True)
            if len(self.results) < len(groups):
                log.warning("%s: stopped after %d of %d group(s)", name, len(self.results), len(groups))
        return stopped

    def _collect(self) -> None:
        """Wait for the oldest group being written; it joins the batch, or its failure the results."""
        outcome = self._in_flight.popleft().result()
        if isinstance(outcome, WrittenGroup):
            self._pending.append(outcome)
        else:
            self._record([outcome])

    def _commit_if_due(self) -> None:
        waiting = sum(item.group.bytes for item in self._pending)
        if self._pending and (
            waiting >= self.commit_bytes or time.monotonic() - self._last_commit >= COMMIT_INTERVAL_SECONDS
        ):
            self._commit()

    def _commit(self) -> None:
        batch, self._pending = self._pending, []
        self._last_commit = time.monotonic()
        if batch:
            self._record(self.runner.commit(batch))

    def _record(self, outcomes: list[CompactionGroupResult]) -> None:
        runner = self.runner
        for outcome in outcomes:
            runner.tracker.unit_done()
            self.results.append(outcome)
            self._done_bytes += outcome.bytes
            log.info(
                "%s: group %d/%d %s; %s of %s done in %.1f s",
                identifier(runner.table),
                outcome.index,
                runner.groups,
                outcome.status,
                size_text(self._done_bytes),
                size_text(self.total_bytes),
                time.monotonic() - self.started,
            )

    def _abandon(self) -> None:
        """Stop the groups being written and delete the files of every group not committed."""
        self.runner.cancelled.set()
        for future in self._in_flight:
            # Each stops at its next batch of rows and deletes its own files; its outcome no longer matters.
            try:
                outcome = future.result()
            except BaseException:  # the first error is the one raised
                continue
            if isinstance(outcome, WrittenGroup):
                self._pending.append(outcome)
        self._in_flight.clear()
        batch, self._pending = self._pending, []
        for item in batch:
            delete_written(self.runner.table, item.written, f"group {item.group.index}: ")
