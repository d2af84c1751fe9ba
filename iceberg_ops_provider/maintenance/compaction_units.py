"""Compaction that fans out: a plan of serializable units, each rewritten and committed on its own, anywhere.

:func:`plan_compaction_units` returns JSON-able :class:`CompactionUnit` values; :func:`run_compaction_units`
rewrites each exactly once: a unit runs only while every one of its files is live, else it is ``skipped``.
"""

from __future__ import annotations

import hashlib
import inspect
import logging
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import asdict, dataclass, replace
from typing import TYPE_CHECKING, Any, Literal

from pyiceberg.expressions import AlwaysTrue

from iceberg_ops_provider.core.documents import read_back
from iceberg_ops_provider.errors import MaintenanceConflictError
from iceberg_ops_provider.maintenance.binpack import FileGroup
from iceberg_ops_provider.maintenance.candidates import plan_candidates, refuse_equality_deletes
from iceberg_ops_provider.maintenance.compaction import compact_small_files_streaming
from iceberg_ops_provider.maintenance.group_runner import (
    CompactionGroupResult,
    CompactionResult,
    GroupRunner,
    build_result,
)
from iceberg_ops_provider.progress import ProgressCallback, ProgressTracker

if TYPE_CHECKING:
    from pyiceberg.expressions import BooleanExpression
    from pyiceberg.table import FileScanTask, Table

__all__ = ["CompactionUnit", "plan_compaction_units", "planning_arguments", "run_compaction_units"]

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class CompactionUnit:
    """One group of a compaction plan, to be rewritten and committed on its own (by any process).

    ``partition`` is ``day=2026-11-03`` (``""`` when unpartitioned), ``data_files`` are sorted, and
    ``bytes`` is their size when planned on ``planned_snapshot_id``.
    """

    table: str
    index: int
    partition: str
    spec_id: int
    data_files: tuple[str, ...]
    bytes: int
    expected_output_files: int
    strategy: str
    target_file_size_bytes: int
    planned_snapshot_id: int

    @property
    def unit_id(self) -> str:
        """A stable id of the unit: its table and files (the same files give the same id in every plan)."""
        digest = hashlib.sha256("\n".join([self.table, *self.data_files]).encode()).hexdigest()
        return digest[:16]

    def to_json(self) -> dict[str, Any]:
        """JSON-able form, with ``unit_id`` (ignored by :meth:`from_json`)."""
        data = asdict(self)
        data["data_files"] = list(self.data_files)
        data["unit_id"] = self.unit_id
        return data

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> CompactionUnit:
        """A unit from :meth:`to_json`'s form.

        Raises:
            ValueError: Not a mapping, a key missing, or a value of the wrong type; the message names it.
        """
        fix = "pass units as plan_compaction_units() returned them (CompactionUnit.to_json())"
        if isinstance(data, Mapping) and "partition" in data and data["partition"] is None:
            # an unpartitioned unit's "" comes back as None from Airflow's native template rendering
            data = {**data, "partition": ""}
        unit = read_back(cls, data, "A compaction unit", fix)
        if not unit.data_files:
            raise ValueError(f"A compaction unit's data_files must be a non-empty list of paths: {fix}.")
        return replace(unit, data_files=tuple(sorted(unit.data_files)))


def plan_compaction_units(
    table: Table,
    target_file_size_bytes: int | None = None,
    min_input_files: int = 5,
    where: str | BooleanExpression | None = None,
    strategy: Literal["binpack", "sort"] = "binpack",
    max_rewrite_bytes: int | None = None,
) -> list[CompactionUnit]:
    """The units a compaction of ``table`` would rewrite (none: nothing to compact); writes nothing.

    Takes the arguments of :func:`~iceberg_ops_provider.maintenance.compaction.compact_small_files_streaming`
    and raises what it raises for them; with ``max_rewrite_bytes``, only the units one run may rewrite.
    """
    planned = compact_small_files_streaming(
        table,
        target_file_size_bytes,
        min_input_files,
        where,
        strategy,
        dry_run=True,
        max_rewrite_bytes=max_rewrite_bytes,
    )
    if planned.planned_snapshot_id is None:
        return []
    return [
        CompactionUnit(
            table=planned.table,
            index=group.index,
            partition=group.partition,
            spec_id=group.spec_id,
            data_files=tuple(sorted(group.data_files)),
            bytes=group.bytes,
            expected_output_files=group.expected_output_files,
            strategy=planned.strategy,
            target_file_size_bytes=planned.target_file_size_bytes,
            planned_snapshot_id=planned.planned_snapshot_id,
        )
        for group in planned.groups
    ]


_PLANNING_DEFAULTS = {name: p.default for name, p in inspect.signature(plan_compaction_units).parameters.items()}


def planning_arguments(given: Mapping[str, Any]) -> list[str]:
    """Those of ``given`` (arguments of :func:`plan_compaction_units`) not at its default (``""`` counts as unset)."""
    return [name for name, value in given.items() if value not in (_PLANNING_DEFAULTS[name], "")]


def _units(table: Table, units: Iterable[CompactionUnit | Mapping[str, Any]]) -> list[CompactionUnit]:
    parsed = [unit if isinstance(unit, CompactionUnit) else CompactionUnit.from_json(unit) for unit in units]
    name = ".".join(table.name())
    foreign = sorted({unit.table for unit in parsed if unit.table != name})
    if foreign:
        raise ValueError(
            f"units of {', '.join(foreign)} were given to the compaction of {name}: pass each table's own."
        )
    strategies = {unit.strategy for unit in parsed} - {"binpack", "sort"}
    if strategies:
        raise ValueError(f"unknown compaction strategy {sorted(strategies)} in the units: 'binpack' or 'sort'.")
    return parsed


def _live(table: Table, paths: Iterable[str]) -> dict[str, FileScanTask]:
    """The current snapshot's tasks (with their position deletes) of those of ``paths`` still live."""
    wanted = set(paths)
    snapshot = table.current_snapshot()
    if snapshot is None or not wanted:
        return {}
    tasks = plan_candidates(table.metadata, table.io, snapshot, AlwaysTrue(), lambda f: f.file_path in wanted)
    return {task.file.file_path: task for task in tasks}


def run_compaction_units(
    table: Table,
    units: Iterable[CompactionUnit | Mapping[str, Any]],
    on_progress: ProgressCallback | None = None,
    should_stop: Callable[[], bool] | None = None,
) -> CompactionResult:
    """Rewrite the given units of ``table`` (or their JSON), each as one commit, exactly once (see the module).

    ``should_stop`` is asked before each unit; once ``True`` no further unit starts (``stopped``). The
    result's ``groups`` are the units, each ``committed``, ``skipped`` (another run already replaced its
    files) or, with ``stopped``, left out.

    Raises:
        ValueError: A unit of another table, malformed JSON, or an unknown strategy; nothing was written.
        UnsupportedDeleteFilesError: The table holds equality delete files; nothing was written.
        MaintenanceConflictError: Concurrent commits changed the files of some units (not replaced them):
            those were not committed, the others were; running the same units again redoes only them.
    """
    started = time.monotonic()
    parsed = _units(table, units)
    name = ".".join(table.name())
    table.refresh()
    metadata = table.metadata
    snapshot = table.current_snapshot()
    first = parsed[0] if parsed else None
    base = {
        "table": name,
        "dry_run": False,
        "strategy": first.strategy if first else "binpack",
        "target_file_size_bytes": first.target_file_size_bytes if first else 0,
    }
    if snapshot is not None and parsed:
        refuse_equality_deletes(table, snapshot)
    live = _live(table, (path for unit in parsed for path in unit.data_files))
    tracker = ProgressTracker(
        f"compact {name}",
        total_bytes=sum(unit.bytes for unit in parsed),
        units_total=len(parsed),
        on_progress=on_progress,
        files_total=sum(len(unit.data_files) for unit in parsed),
    )
    runners: dict[tuple[str, int], GroupRunner] = {}
    results: list[CompactionGroupResult] = []
    stopped = False
    for unit in parsed:
        if should_stop is not None and should_stop():
            stopped = True
            break
        planned = CompactionGroupResult(
            index=unit.index,
            partition=unit.partition,
            spec_id=unit.spec_id,
            status="planned",
            data_files=list(unit.data_files),
            bytes=unit.bytes,
            expected_output_files=unit.expected_output_files,
        )
        tasks = [live.get(path) for path in unit.data_files]
        if not all(tasks):
            gone = sum(task is None for task in tasks)
            log.info("%s: unit %d skipped: %d of its %d file(s) are no longer live", name, unit.index, gone, len(tasks))
            results.append(_skipped(planned, f"{gone} of its {len(tasks)} file(s) were already replaced or removed"))
            tracker.unit_done()
            continue
        group = FileGroup(
            index=unit.index,
            spec_id=unit.spec_id,
            partition=tasks[0].file.partition,  # type: ignore[union-attr]
            partition_path=unit.partition,
            tasks=tuple(tasks),  # type: ignore[arg-type]
            output_files=unit.expected_output_files,
            repartition=unit.spec_id != metadata.default_spec_id,
        )
        key = (unit.strategy, unit.target_file_size_bytes)
        if key not in runners:
            runners[key] = GroupRunner(
                table, metadata, len(parsed), unit.strategy, unit.target_file_size_bytes, tracker
            )
        # The runner knows what its commits rewrote and removed, so a delete file goes only once all its targets did.
        removable = runners[key].removable([group])[0]
        planned = replace(planned, delete_files=[d.file_path for d in removable])
        outcome = runners[key].run(group, planned, removable)
        tracker.unit_done()
        if outcome.status == "failed":
            table.refresh()
            if not _live(table, unit.data_files):  # another run's commit replaced them first
                outcome = _skipped(outcome, f"another run replaced its files first ({outcome.error})")
        results.append(outcome)
    if parsed:
        tracker.finish()
    snapshot_id = snapshot.snapshot_id if snapshot is not None else None
    skipped = sum(r.status == "skipped" for r in results)
    seconds = time.monotonic() - started
    result = build_result(
        base, snapshot_id, parsed, results, 0.0, seconds, stopped=stopped, skipped_groups_count=skipped
    )
    if result.failed_groups_count:
        failed = [r for r in results if r.status == "failed"]
        error = MaintenanceConflictError(
            f"{name}: {len(failed)} of {len(parsed)} compaction unit(s) were not committed because concurrent commits "
            f"changed their files (first: unit {failed[0].index}, {failed[0].error}). The other "
            f"{result.committed_groups_count} were committed or skipped as done. Run the same units again to redo them."
        )
        error.result = result
        raise error
    return result


def _skipped(result: CompactionGroupResult, why: str) -> CompactionGroupResult:
    return replace(result, status="skipped", error=why, added_data_files=[], added_bytes=0, snapshot_id=None)
