"""Data mover operators: move rows between Iceberg tables, plan a move for fan-out, verify a move.

Thin fronts over :class:`iceberg_ops_provider.data_migration.DataMover` (the fan-out pattern: ``docs/airflow.md``).
The default ``move_id`` comes from the task instance, so a retried task resumes the move its failed try started.
"""

from __future__ import annotations

import json
import time
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from airflow.sdk import BaseOperator, conf

from iceberg_ops_provider.hooks.catalog import IcebergCatalogHook
from iceberg_ops_provider.hooks.version_compat import AirflowFailException
from iceberg_ops_provider.operators.lineage import IcebergLineageMixin
from iceberg_ops_provider.operators.wording import operator_message
from iceberg_ops_provider.progress import size_text

if TYPE_CHECKING:
    from airflow.sdk import Context
    from pyiceberg.expressions import BooleanExpression

    from iceberg_ops_provider.data_migration import DataMover
    from iceberg_ops_provider.data_migration.results import MoveResult


__all__ = ["IcebergDataMoveOperator", "IcebergMovePlanOperator", "IcebergMoveVerifyOperator", "default_move_id"]

# The engine checks these too; repeated here so a typo fails at DAG parse without importing the engine.
MODES = ("append", "overwrite", "incremental")
VERIFY_METHODS = ("count", "checksum", "sample")
DEFAULT_COMMIT_EVERY_BYTES = 256 * 2**20
MOVE_TEMPLATE_FIELDS = ("source", "target", "where", "move_id", "branch", "source_conn_id", "target_conn_id")


def default_move_id(context: Context | Mapping[str, Any]) -> str | None:
    """The move id of the running task instance: the same on every try of it, different for any other.

    Built from the dag id, task id, map index and logical date (else the run id); ``None`` outside a
    task instance (the engine then uses its own default).
    """
    ti = context.get("ti") or context.get("task_instance")
    if ti is None:
        return None
    logical_date = context.get("logical_date")
    if logical_date is None:
        logical_date = getattr(context.get("dag_run"), "logical_date", None)
    when = logical_date.isoformat() if logical_date is not None else str(ti.run_id)
    return f"airflow:{ti.dag_id}:{ti.task_id}:{getattr(ti, 'map_index', -1)}:{when}"


def _text(value: str | None) -> str | None:
    """A templated optional argument: an empty rendering (an unset param) means not given."""
    if value is None:
        return None
    text = str(value).strip()
    return text or None


class _MoveOperator(IcebergLineageMixin, BaseOperator):
    """What the three operators share: the move's arguments, the mover, and the error mapping."""

    template_fields: Sequence[str] = MOVE_TEMPLATE_FIELDS
    ui_color = "#fdebd0"
    _active_mover: DataMover | None = None
    """The mover of the running try (to report what a failed try committed)."""

    def __init__(
        self,
        *,
        source: str,
        target: str,
        source_conn_id: str = IcebergCatalogHook.default_conn_name,
        target_conn_id: str | None = None,
        where: str | BooleanExpression | None = None,
        columns: Sequence[str] | None = None,
        rename: Mapping[str, str] | None = None,
        mode: str = "append",
        move_id: str | None = None,
        create_target: bool = False,
        commit_every_bytes: int = DEFAULT_COMMIT_EVERY_BYTES,
        rewrite: bool = False,
        branch: str | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        if mode not in MODES:
            raise ValueError(f"mode={mode!r} is not a move mode; use one of {', '.join(MODES)}.")
        if int(commit_every_bytes) <= 0:
            raise ValueError(f"commit_every_bytes={commit_every_bytes!r} must be a positive number of bytes.")
        self.source = source
        self.target = target
        self.source_conn_id = source_conn_id
        self.target_conn_id = target_conn_id
        self.where = where
        self.columns = columns
        self.rename = rename
        self.mode = mode
        self.move_id = move_id
        self.create_target = create_target
        self.commit_every_bytes = commit_every_bytes
        self.rewrite = rewrite
        self.branch = branch

    def _mover(
        self,
        move_id: str | None,
        verify: str | None = None,
        source_snapshot_id: int | None = None,
        *,
        reading: bool = False,
    ) -> DataMover:
        """The engine for this move, on the catalogs of the connections (only read when ``reading``)."""
        from iceberg_ops_provider.data_migration import DataMover

        target_access = "read" if reading else "create" if self.create_target else "write"
        target_conn_id = _text(self.target_conn_id)
        separate = bool(target_conn_id) and target_conn_id != self.source_conn_id
        source_catalog = IcebergCatalogHook(iceberg_conn_id=self.source_conn_id).catalog_for(
            "read" if separate or reading else target_access
        )
        target_catalog = (
            IcebergCatalogHook(iceberg_conn_id=target_conn_id).catalog_for(target_access) if separate else None
        )
        self._active_mover = DataMover(
            source_catalog,
            self.source,
            self.target,
            target_catalog,
            where=_text(self.where) if isinstance(self.where, str) else self.where,
            columns=list(self.columns) if self.columns else None,
            rename=dict(self.rename) if self.rename else None,
            create_target=self.create_target,
            mode=self.mode,
            move_id=move_id,
            commit_every_bytes=int(self.commit_every_bytes),
            verify=verify,
            source_snapshot_id=source_snapshot_id,
            rewrite=self.rewrite,
            branch=self._branch(),
        )
        return self._active_mover

    def _branch(self) -> str | None:
        """The branch the move was given; refused when one was given and rendered empty (an unset param)."""
        branch = _text(self.branch)
        if branch is None and self.branch is not None:
            # Moving to main instead would publish the rows without the audit the DAG has for them.
            raise ValueError(
                f"branch={self.branch!r} is empty (a template rendered it so): give the branch name, or leave "
                "branch out (None) to move straight to main."
            )
        return branch

    def execute(self, context: Context) -> Any:
        """Run the operator's step; permanent errors fail the task at once, transient ones are retried.

        Raises:
            AirflowFailException: Bad input or a failed verification: retrying cannot help.
            IcebergOpsError: A transient error: the retry resumes with the units not yet committed.
        """
        from iceberg_ops_provider.errors import IcebergOpsError, VerificationFailedError

        self.record_lineage()
        self._active_mover = None
        started_ms = int(time.time() * 1000)
        try:
            try:
                return self._execute(context)
            except BaseException:
                # A move that fails part way has committed some units: report what this try wrote.
                self.collect_lineage(lambda: self._record_after_failure(started_ms))
                raise
        except VerificationFailedError as exc:
            if exc.report is not None and "ti" in context:
                context["ti"].xcom_push(key="report", value=exc.report.to_json())
            raise AirflowFailException(operator_message(exc)) from exc
        except IcebergOpsError as exc:
            if exc.transient:
                raise
            raise AirflowFailException(operator_message(exc)) from exc
        except ValueError as exc:  # a bad argument: the same on every try
            raise AirflowFailException(operator_message(exc)) from exc

    def _execute(self, context: Context) -> Any:
        raise NotImplementedError

    def _record_after_failure(self, started_ms: int) -> None:
        """Record what a failed try committed (nothing by default: only the move operator commits)."""

    def _record_tables(
        self,
        mover: DataMover,
        *,
        source_snapshot_id: int | None,
        target_read: bool = False,
        result: MoveResult | None = None,
        created: bool = False,
    ) -> None:
        """Record the source as read at ``source_snapshot_id``; the target as read, or as written by ``result``.

        ``created``: this run created the target (``create_target``), reported as its ``CREATE``.
        """
        from iceberg_ops_provider.lineage import table_lineage

        source = mover.source_catalog.load_table(mover.source)
        inputs = [table_lineage(mover.source_catalog, source, snapshot_id=source_snapshot_id)]
        outputs = []
        if target_read or result is not None:
            target = mover.target_catalog.load_table(mover.target)
            if result is None:
                inputs.append(table_lineage(mover.target_catalog, target))
            else:
                written = result.target_snapshot_ids[-1] if result.target_snapshot_ids else None
                overwrote = self.mode == "overwrite" and written is not None
                change = "create" if created else ("overwrite" if overwrote else None)
                outputs.append(
                    table_lineage(
                        mover.target_catalog,
                        target,
                        snapshot_id=written,
                        rows=result.rows,
                        bytes=result.bytes_written,
                        files=result.files_written,
                        change=change,
                    )
                )
        self.record_lineage(inputs, outputs)


class IcebergDataMoveOperator(_MoveOperator):
    """Move the rows of one Iceberg table into another, exactly once, resuming after a failed try.

    The move commits unit by unit, each commit carrying its progress: a retried task (or a second run
    with the same ``move_id``) skips the committed units; a finished move run again changes nothing.

    Args:
        source: The source table, ``namespace.table`` (templated).
        target: The target table (templated).
        source_conn_id: The source catalog's connection (templated).
        target_conn_id: The target catalog's connection; default the source's (templated).
        where: A row filter on the source in PyIceberg syntax, e.g. ``"day >= '2026-11-01'"`` (templated), or a
            PyIceberg ``BooleanExpression``.
        columns: Source columns to move; default all.
        rename: ``{"source_column": "target_column"}``.
        mode: ``append`` (default), ``overwrite`` (replace the target rows matched by ``where`` at the
            end) or ``incremental`` (only what was appended to the source since this ``move_id`` last
            completed).
        verify: ``count``, ``checksum`` or ``sample``: compare source and target once the move is
            complete, and fail the task when they differ (in a fan-out: :class:`IcebergMoveVerifyOperator`).
        move_id: The move's identifier (templated). Default: one built from the task instance (see
            :func:`default_move_id`); with ``units``, theirs.
        units: Units of a plan to run, as :class:`IcebergMovePlanOperator` returns them (one unit's
            JSON or a list of them); set through ``.expand(units=plan.output)``. Default: every pending unit.
        create_target: Create a missing target from the source's schema, partition spec and sort order.
        commit_every_bytes: Source bytes per unit (per target commit).
        rewrite: Re-encode every row into new files. By default a source file whose rows need no
            change is copied byte for byte (see ``docs/data_mover.md``).
        branch: Write-audit-publish: commit the units to this branch of the target, cut from ``main``
            (templated); :class:`~iceberg_ops_provider.operators.wap.IcebergAuditOperator` checks it and
            :class:`~iceberg_ops_provider.operators.wap.IcebergPublishOperator` makes it ``main``'s.

    Returns (XCom): the ``MoveResult`` JSON; the move id is also pushed under the XCom key ``move_id``
    (``move.output["move_id"]`` for the audit and publish tasks). When verification fails, its report
    is pushed under the XCom key ``report`` before the task fails.
    """

    def __init__(
        self,
        *,
        source: str,
        target: str,
        verify: str | None = None,
        units: Mapping[str, Any] | Sequence[Mapping[str, Any]] | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(source=source, target=target, **kwargs)
        if verify is not None and verify not in VERIFY_METHODS:
            raise ValueError(f"verify={verify!r} is not a verification method; use one of {', '.join(VERIFY_METHODS)}.")
        self.verify = verify
        self.units = units

    def _execute(self, context: Context) -> dict[str, Any]:
        units = unit_list(self.units, "pass what IcebergMovePlanOperator returns, e.g. .expand(units=plan.output)")
        move_id = _text(self.move_id)
        snapshot_id = None
        if units:
            move_id, snapshot_id = _units_move(units, move_id)
        move_id = move_id or default_move_id(context)
        self.log.info(
            "Moving %s -> %s (move_id %s, mode %s%s)",
            self.source,
            self.target,
            move_id,
            self.mode,
            f", {len(units)} unit(s) of the plan" if units else "",
        )
        # With units, the move reads the snapshot they were planned on, even if the source moved on since.
        mover = self._mover(move_id, verify=self.verify, source_snapshot_id=snapshot_id)
        result = mover.run(units=units) if units else mover.run()
        self.collect_lineage(
            lambda: self._record_tables(
                mover, source_snapshot_id=result.source_snapshot_id, result=result, created=mover.created_target
            )
        )
        payload = result.to_json()
        if "ti" in context:  # for the audit and publish tasks: move.output["move_id"]
            context["ti"].xcom_push(key="move_id", value=result.move_id)
        self.log.info(
            "Moved %s rows (%s read, %s written) in %.1f s: %s unit(s) committed, %s already done, move %s",
            payload["rows"],
            size_text(result.bytes_read),
            size_text(result.bytes_written),
            payload["seconds"],
            payload["units_committed"],
            payload["units_skipped"],
            "complete" if payload["complete"] else "not complete yet (other units pending)",
        )
        last_written = result.target_snapshot_ids[-1] if result.target_snapshot_ids else None
        self.publish_asset_extras(
            context,
            {
                "source": self.source,
                "target": self.target,
                "move_id": result.move_id,
                "rows": result.rows,
                "snapshot_id": last_written,
                "complete": result.complete,
            },
            {"move_id": result.move_id, "source": self.source, "complete": result.complete},
        )
        return payload

    def _record_after_failure(self, started_ms: int) -> None:
        """Record the source, and the target at the last commit this try made (its snapshots since ``started_ms``)."""
        from pyiceberg.exceptions import NoSuchTableError
        from pyiceberg.table.refs import MAIN_BRANCH

        from iceberg_ops_provider.data_migration.state import move_snapshots, state_of
        from iceberg_ops_provider.lineage import table_lineage, written_statistics

        mover: DataMover | None = self._active_mover
        if mover is None:
            return
        try:
            target = mover.target_catalog.load_table(mover.target)
        except NoSuchTableError:
            target = None
        branch = _text(self.branch) or MAIN_BRANCH  # a move given a branch commits its units there
        mine = [
            snapshot
            for snapshot in (move_snapshots(target.metadata, mover.move_id, branch) if target else [])
            if snapshot.timestamp_ms >= started_ms
        ]
        state = state_of(mine[0], mover.move_id) if mine else None
        read = state.snapshot_id if state is not None else mover.source_snapshot_id
        source = mover.source_catalog.load_table(mover.source)
        inputs = [table_lineage(mover.source_catalog, source, snapshot_id=read)]
        outputs = []
        if target is not None and mine:
            rows, size, files = written_statistics(target, [snapshot.snapshot_id for snapshot in mine])
            outputs.append(
                table_lineage(
                    mover.target_catalog, target, snapshot_id=mine[0].snapshot_id, rows=rows, bytes=size, files=files
                )
            )
        self.record_lineage(inputs, outputs)


class IcebergMovePlanOperator(_MoveOperator):
    """Plan a move and return its pending units, for a mapped :class:`IcebergDataMoveOperator` to run.

    Changes nothing. The move tasks must get the same ``where``, ``columns``, ``rename`` and ``mode``;
    the ``move_id`` (by default built from this task's instance) travels with the units.

    Args:
        units_per_task: Units each mapped move task runs; raised as far as needed to keep the number of
            move tasks within Airflow's ``[core] max_map_length`` (1024 by default).
        source, target, source_conn_id, target_conn_id, where, columns, rename, mode, move_id,
            create_target, commit_every_bytes, rewrite: As for :class:`IcebergDataMoveOperator`.

    Returns (XCom): one list of units' JSON per move task to map (empty when nothing is pending). The
    move id is pushed under the XCom key ``move_id`` for the verify task.
    """

    def __init__(self, *, source: str, target: str, units_per_task: int = 1, **kwargs: Any) -> None:
        super().__init__(source=source, target=target, **kwargs)
        if int(units_per_task) < 1:
            raise ValueError(f"units_per_task={units_per_task!r} must be 1 or more.")
        self.units_per_task = units_per_task

    def _execute(self, context: Context) -> list[list[dict[str, Any]]]:
        mover = self._mover(_text(self.move_id) or default_move_id(context), reading=True)
        plan = mover.plan()
        self.collect_lineage(lambda: self._record_tables(mover, source_snapshot_id=plan.source_snapshot_id))
        self.publish_asset_extras(
            context,
            {"source": self.source, "target": self.target, "move_id": plan.move_id, "pending": len(plan.pending)},
        )
        pending = [unit.to_json() for unit in plan.pending]
        self.log.info(
            "Plan of %s -> %s (move_id %s): %s unit(s), %s pending, %s of source files, %s source records%s",
            self.source,
            self.target,
            plan.move_id,
            len(plan.units),
            len(pending),
            size_text(plan.bytes),
            plan.records,
            "".join(f"\n  {note}" for note in plan.notes),
        )
        if "ti" in context:
            context["ti"].xcom_push(key="move_id", value=plan.move_id)
        step = int(self.units_per_task)
        most = conf.getint("core", "max_map_length", fallback=1024)  # Airflow maps at most this many tasks
        if -(-len(pending) // step) > most:
            step = -(-len(pending) // most)
            self.log.warning(
                "%d pending units, %d a task, would map more move tasks than [core] max_map_length (%d) allows: "
                "%d units a task instead",
                len(pending),
                int(self.units_per_task),
                most,
                step,
            )
        return [pending[start : start + step] for start in range(0, len(pending), step)]


class IcebergMoveVerifyOperator(_MoveOperator):
    """Compare a move's source rows with the rows it wrote to the target; fail the task when they differ.

    Args:
        move_id: The move to verify (templated), e.g. ``plan.output["move_id"]``.
        method: ``checksum`` (default: an order-independent content hash of both sides), ``count``
            or ``sample`` (random rows compared value by value).
        source, target, source_conn_id, target_conn_id, where, columns, rename, mode: As the move was
            planned and run.

    Returns (XCom): the ``VerifyReport`` JSON (``ok``, ``method``, ``source_rows``, ``target_rows``,
    ``details``). When the rows differ the report is pushed under the XCom key ``report`` and the task
    fails without retrying.
    """

    def __init__(self, *, source: str, target: str, move_id: str, method: str = "checksum", **kwargs: Any) -> None:
        super().__init__(source=source, target=target, move_id=move_id, **kwargs)
        if method not in VERIFY_METHODS:
            raise ValueError(f"method={method!r} is not a verification method; use one of {', '.join(VERIFY_METHODS)}.")
        self.method = method

    def _execute(self, context: Context) -> dict[str, Any]:
        from iceberg_ops_provider.errors import VerificationFailedError

        move_id = _text(self.move_id)
        if move_id is None:
            raise ValueError(
                "move_id is empty: pass the move's id, e.g. move_id=plan.output['move_id'] from the plan task."
            )
        mover = self._mover(move_id, reading=True)
        report = mover.verify(self.method)
        self.collect_lineage(
            lambda: self._record_tables(mover, source_snapshot_id=_verified_source_snapshot(mover), target_read=True)
        )
        payload = report.to_json()  # the engine logged the verdict (iceberg_ops_provider.data_migration.verification)
        if not report.ok:
            raise VerificationFailedError(
                f"The target {self.target!r} does not hold the rows move {move_id!r} read from {self.source!r} "
                f"({report.method}: details {payload['details']}). Look for writes to the target outside the move, "
                "then run the move again under a new move_id into an emptied target.",
                report=report,
            )
        return payload


def _verified_source_snapshot(mover: DataMover) -> int | None:
    """The source snapshot a finished move read (what verification compares against), from the target's state."""
    from pyiceberg.table.refs import MAIN_BRANCH

    from iceberg_ops_provider.data_migration.state import find_state

    state, _ = find_state(mover.target_catalog.load_table(mover.target).metadata, mover.move_id, MAIN_BRANCH)
    return state.completed_snapshot_id if state is not None else None


def unit_list(units: Any, fix: str) -> list[dict[str, Any]]:
    """The units a task was given: one unit's JSON or a list of them, or that as JSON text (rendered by a template).

    ``fix`` says what to pass instead; it ends the message of a value that is none of these.
    """
    if isinstance(units, str):
        try:
            units = json.loads(units)
        except ValueError as exc:
            raise ValueError(f"units is text that is not JSON ({exc}), so it is not a unit's JSON: {fix}.") from exc
    if units is None:
        return []
    if isinstance(units, Mapping):
        return [dict(units)]
    if isinstance(units, str) or not isinstance(units, Sequence) or not all(isinstance(u, Mapping) for u in units):
        raise ValueError(f"units must be a list of units (each a unit's JSON), got {units!r}: {fix}.")
    return [dict(unit) for unit in units]


def _units_move(units: list[dict[str, Any]], given: str | None) -> tuple[str, int]:
    """The move id and source snapshot the units carry (one plan's units share them); ``given`` must agree."""
    if any(not unit.get("move_id") or unit.get("source_snapshot_id") is None for unit in units):
        raise ValueError(
            f"units holds a unit without a move_id or source snapshot: {units!r}; pass what "
            "IcebergMovePlanOperator returns."
        )
    ids = {str(unit["move_id"]) for unit in units}
    if len(ids) != 1:
        raise ValueError(f"The units belong to different moves ({', '.join(sorted(ids))}): map a move task per plan.")
    (carried,) = ids
    if given is not None and given != carried:
        raise ValueError(
            f"move_id={given!r} differs from the move id its units carry ({carried!r}): leave move_id unset when "
            "passing units; they carry the plan's."
        )
    snapshots = {int(unit["source_snapshot_id"]) for unit in units}
    if len(snapshots) != 1:
        raise ValueError(f"The units come from plans of different source snapshots ({sorted(snapshots)}): plan again.")
    return carried, snapshots.pop()
