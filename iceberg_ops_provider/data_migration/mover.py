"""The data mover: copy the rows of one Iceberg table into another, exactly once, resumable, streaming.

:meth:`DataMover.plan` groups the pinned source snapshot's files into units; :meth:`DataMover.run` copies
them and commits each with the move's progress in one atomic commit (modes: ``docs/data_mover.md``).
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from pyiceberg.exceptions import NoSuchTableError
from pyiceberg.expressions import AlwaysTrue, BooleanExpression
from pyiceberg.expressions.parser import parse
from pyiceberg.table.refs import MAIN_BRANCH

from iceberg_ops_provider.core.filters import FILTER_FORM, syntax_problem
from iceberg_ops_provider.data_migration.audit import AuditReport, Check, audit_branch
from iceberg_ops_provider.data_migration.audit_branch import (
    check_branch_name,
    cut_branch,
    is_audit_branch,
    owned_record,
    unfinished,
)
from iceberg_ops_provider.data_migration.copy import FileCopier
from iceberg_ops_provider.data_migration.planning import fingerprint
from iceberg_ops_provider.data_migration.publish import Discarded, Published, discard_branch, publish_branch
from iceberg_ops_provider.data_migration.resolution import Resolved, create_target, current_state, resolve
from iceberg_ops_provider.data_migration.results import VERIFY_METHODS, MovePlan, MoveResult, MoveUnit, VerifyReport
from iceberg_ops_provider.data_migration.state import (
    STAGING_BRANCH_PREFIX,
    file_prefix,
    find_state,
    move_snapshots,
    state_of,
)
from iceberg_ops_provider.data_migration.unit_runner import publish, published, record_empty, run_units
from iceberg_ops_provider.data_migration.verbatim import schema_blocker
from iceberg_ops_provider.data_migration.verification import verify_move
from iceberg_ops_provider.errors import InvalidMoveError, MoveStateError, VerificationFailedError
from iceberg_ops_provider.messages import Arg, Hint, message
from iceberg_ops_provider.progress import ProgressCallback, ProgressTracker

if TYPE_CHECKING:
    from pyiceberg.catalog import Catalog
    from pyiceberg.table import Table

__all__ = ["DEFAULT_COMMIT_EVERY_BYTES", "MODES", "DataMover"]

log = logging.getLogger(__name__)

MODES = ("append", "overwrite", "incremental")
DEFAULT_COMMIT_EVERY_BYTES = 256 * 2**20


def _identifier(table: str | Table) -> str:
    if isinstance(table, str):
        if "." not in table.strip("."):
            raise InvalidMoveError(f"Table {table!r} has no namespace: name it as namespace.table.")
        return table
    return ".".join(table.name())


def _bad(about: str, value: object, text: str) -> InvalidMoveError:
    """The error for a bad argument ``about`` whose ``text`` names it as ``{about}``."""
    return InvalidMoveError(message(text, about=about, **{about: Arg(about, value)}))


def _check_positive(about: str, value: object, unit: str) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise _bad(about, value, f"{{{about}}} must be a positive {unit}.")


class DataMover:
    """Copies the rows of ``source`` into ``target``, exactly once, resumable, in units that may run on many workers.

    Args:
        source_catalog: The catalog holding the source table.
        source: The source table (``namespace.table``, or a loaded ``Table``).
        target: The target table (``namespace.table``).
        target_catalog: The target's catalog; default ``source_catalog``.
        where: Rows to move, a PyIceberg filter (``"day >= '2026-11-01'"``) or expression on source columns.
            With ``mode="overwrite"`` also the target rows replaced (columns renamed as ``rename`` says).
        columns: Source columns to move; default all.
        rename: ``{source_column: target_column}`` for columns whose names differ.
        create_target: Create the target from the source's schema, partition spec and sort order when missing.
        mode: ``append``, ``overwrite`` or ``incremental`` (see the module documentation).
        move_id: Names the move: the same id runs again resume it. Default: derived from the source,
            target, filter, columns, renames and mode, so the same call resumes.
        commit_every_bytes: Source bytes per unit (one commit each).
        verify: ``count``, ``checksum`` or ``sample``: verify after the move completes and fail when not ok.
        parallelism: Files read and written at once; default the number of CPUs.
        on_progress: Receives :class:`~iceberg_ops_provider.progress.Progress` as the move advances, at most
            twice a second and after each unit, always on the thread that called :meth:`run`: an error it
            raises stops the run there (the units not committed are discarded, their files deleted).
        sample_size: Rows compared by the ``sample`` verification.
        source_snapshot_id: The source snapshot to move when the move starts; default the current one.
        rewrite: Re-encode every row into new files. By default a source file that needs no change
            (same field ids, names and types in the target, read in full, compatible partitioning;
            see :mod:`.verbatim`) is copied byte for byte, keeping its size, row groups and compression.
        branch: Write-audit-publish: commit the units to this branch of the target, cut from ``main``'s
            head when the move starts, instead of to ``main``; readers of ``main`` see nothing until
            :meth:`publish` (after :meth:`audit`). ``append`` and ``incremental`` modes only.
    """

    def __init__(
        self,
        source_catalog: Catalog,
        source: str | Table,
        target: str,
        target_catalog: Catalog | None = None,
        *,
        where: str | BooleanExpression | None = None,
        columns: Sequence[str] | None = None,
        rename: Mapping[str, str] | None = None,
        create_target: bool = False,
        mode: str = "append",
        move_id: str | None = None,
        commit_every_bytes: int = DEFAULT_COMMIT_EVERY_BYTES,
        verify: str | None = None,
        parallelism: int | None = None,
        on_progress: ProgressCallback | None = None,
        sample_size: int = 100,
        source_snapshot_id: int | None = None,
        rewrite: bool = False,
        branch: str | None = None,
    ) -> None:
        if mode not in MODES:
            raise _bad("mode", mode, f"{{mode}} is not one of {', '.join(MODES)}.")
        if verify is not None and verify not in VERIFY_METHODS:
            raise _bad("verify", verify, f"{{verify}} is not one of {', '.join(VERIFY_METHODS)} (or None).")
        _check_positive("commit_every_bytes", commit_every_bytes, "number of bytes")
        _check_positive("sample_size", sample_size, "number of rows")
        if parallelism is not None:
            _check_positive("parallelism", parallelism, "integer")
        if columns is not None and (isinstance(columns, str) or not all(isinstance(c, str) for c in columns)):
            raise _bad("columns", columns, "{columns} must be a list of column names.")
        if rename is not None and not all(
            isinstance(k, str) and isinstance(v, str) and v for k, v in dict(rename).items()
        ):
            raise _bad("rename", rename, "{rename} must map source column names to non-empty target column names.")
        self.source_catalog = source_catalog
        self.target_catalog = target_catalog if target_catalog is not None else source_catalog
        self.source_table = None if isinstance(source, str) else source
        self.source = _identifier(source)
        self.target = _identifier(target)
        if self.source == self.target and self.target_catalog is self.source_catalog:
            raise InvalidMoveError(
                message(
                    f"Source and target are the same table ({self.source}): a move copies rows into another "
                    "table. To rewrite a table's files, use {compaction}.",
                    compaction=Hint("compaction", "compaction (compact_small_files_streaming)", {"table": self.source}),
                )
            )
        if isinstance(where, str) and not where.strip():
            where = None  # an empty templated filter: every row
        if where is not None and not isinstance(where, str | BooleanExpression):
            raise _bad("where", where, "{where} must be a PyIceberg filter string or expression.")
        self.where_text = where if isinstance(where, str) else (repr(where) if where is not None else None)
        try:
            self.where: BooleanExpression = parse(where) if isinstance(where, str) else where or AlwaysTrue()
        except Exception as exc:
            problem = f"{{where}} does not parse as a filter{syntax_problem(exc)}. {FILTER_FORM}"
            raise _bad("where", where, problem) from exc
        self.columns = list(columns) if columns is not None else None
        self.rename = dict(rename or {})
        self.create_target = create_target
        self.mode = mode
        self.commit_every_bytes = commit_every_bytes
        self.verify_method = verify
        self.parallelism = parallelism or os.cpu_count() or 1
        self.on_progress = on_progress
        self.sample_size = sample_size
        self.source_snapshot_id = source_snapshot_id
        if not isinstance(rewrite, bool):
            raise _bad("rewrite", rewrite, "{rewrite} must be True or False.")
        self.rewrite = rewrite
        # append and incremental copy the same rows the same way (incremental continues later): one
        # definition, so a finished append move can go on incrementally under the same move_id.
        mode_copied = "overwrite" if mode == "overwrite" else "append"
        self.definition = fingerprint(
            {
                "target": self.target,
                "where": self.where_text,
                "columns": self.columns,
                "rename": self.rename,
                "mode": mode_copied,
            }
        )
        self.move_id = move_id or f"{self.source}-to-{self.target}-{self.definition}"
        if branch is not None:
            check_branch_name(branch)
            if mode == "overwrite":
                raise InvalidMoveError(
                    message(
                        "{branch} works with {append} and {incremental}: an overwrite already stages its units on a "
                        "branch of its own and replaces the rows on main in one commit at its end.",
                        about="branch",
                        branch=Arg("branch", branch),
                        append=Arg("mode", "append"),
                        incremental=Arg("mode", "incremental"),
                    )
                )
            self.branch = branch
        else:
            self.branch = MAIN_BRANCH if mode != "overwrite" else STAGING_BRANCH_PREFIX + self.move_id
        self._stop_requested = threading.Event()
        self.created_target = False
        """Whether this object's run created the target (``create_target=True`` and it was missing)."""

    def plan(self) -> MovePlan:
        """What the move will do: its source snapshot, its units and which are done. Changes nothing.

        Raises:
            InvalidMoveError: A missing table or a filter that does not fit the source.
            ReconciliationError: The source's columns cannot be written to the target.
            MoveStateError: The ``move_id`` belongs to another move, or the source changed in a way
                the mode cannot carry.
        """
        return resolve(self).plan

    def _units(self, plan: MovePlan, units: Sequence[MoveUnit | Mapping[str, Any] | int] | None) -> list[MoveUnit]:
        if units is None:
            return list(plan.pending)
        chosen: list[MoveUnit] = []
        for item in units:
            unit = self._unit_of(item)
            if isinstance(item, int) and not isinstance(item, bool):
                if not 0 <= item < len(plan.units):
                    raise InvalidMoveError(f"Unit {item} does not exist: the plan has {len(plan.units)} units.")
                unit = plan.units[item]
            elif unit is None:
                raise InvalidMoveError(f"{item!r} is not a unit: pass MoveUnit objects, their JSON, or unit indexes.")
            elif unit.move_id != self.move_id:
                raise InvalidMoveError(
                    message(
                        f"Unit {unit.index} belongs to move {unit.move_id!r}, not {self.move_id!r}: pass {{move_id}}.",
                        move_id=Arg("move_id", unit.move_id),
                    )
                )
            chosen.append(unit)
        return chosen

    @staticmethod
    def _unit_of(item: MoveUnit | Mapping[str, Any] | int) -> MoveUnit | None:
        """The unit ``item`` gives as ``MoveUnit`` or its JSON; ``None`` for an index or anything else."""
        if not isinstance(item, Mapping):
            return item if isinstance(item, MoveUnit) else None
        try:
            return MoveUnit.from_json(dict(item))
        except (KeyError, TypeError, ValueError) as exc:
            raise InvalidMoveError(f"{item!r} is not a unit of a move plan ({exc!r}).") from exc

    def _settled_elsewhere(self, target: Table, unit: MoveUnit) -> bool:
        """Whether ``unit``, from an older plan than the current one, was committed by that plan's run."""
        for snapshot in move_snapshots(target.metadata, self.move_id, self.branch):
            recorded = state_of(snapshot, self.move_id)
            if recorded is not None and recorded.plan_id == unit.plan_id:
                return unit.index in recorded.done
        return False

    def run(self, units: Sequence[MoveUnit | Mapping[str, Any] | int] | None = None) -> MoveResult:
        """Copy the pending units (or only ``units``), committing each with the move's progress.

        Args:
            units: Units to run (from :meth:`plan`, as ``MoveUnit``, their JSON, or their indexes);
                default every unit not yet committed. Units already committed are skipped.

        Returns:
            What the call did; ``complete=False`` when :meth:`stop` ended it between units.

        Raises:
            InvalidMoveError, ReconciliationError, MoveStateError: Bad input; nothing was written.
            MoveConflictError: A unit kept losing its commit to concurrent commits (transient; run again).
            VerificationFailedError: ``verify`` was set and the target does not hold the source's rows.
        """
        try:
            return self._run(units)
        finally:
            self._stop_requested.clear()

    def stop(self) -> None:
        """Make a running :meth:`run` stop between units; safe from a signal handler or another thread.

        The unit being committed finishes; a unit copied ahead is discarded (its files deleted) and
        no other starts. :meth:`run` then returns with ``complete=False``, and running the move again
        (the same arguments, or its ``move_id``) resumes with the units not committed. A stop asked
        for before :meth:`run` reaches its first unit stops it there; every :meth:`run` forgets it when it returns.
        """
        self._stop_requested.set()

    def _run(self, units: Sequence[MoveUnit | Mapping[str, Any] | int] | None) -> MoveResult:
        started = time.monotonic()
        planned = {unit.source_snapshot_id for item in units or () if (unit := self._unit_of(item)) is not None}
        resolved = resolve(self, pinned=planned.pop() if len(planned) == 1 else None)
        plan = resolved.plan
        selected = self._units(plan, units)
        if resolved.target is None:
            self.created_target |= create_target(self, resolved.source, resolved.source_metadata.schema())[1]
            # The catalog numbered the new table's columns afresh: map the columns to those ids.
            resolved = resolve(self, pinned=plan.source_snapshot_id)
            plan = resolved.plan
        target = resolved.target
        assert target is not None
        own_branch = is_audit_branch(self.branch)
        # An incremental run of a published move that finds nothing new under its filter: no branch to cut,
        # audit and publish for it; the next run looks again from where the published run finished.
        nothing_new = (
            own_branch
            and not plan.units
            and self.branch not in target.metadata.refs
            and resolved.state is not None
            and resolved.state.complete
        )
        work = (bool(plan.pending) or resolved.initial_state is not None) and not nothing_new
        if (self.mode == "overwrite" or (own_branch and work)) and target.metadata.current_snapshot_id is None:
            # A catalog accepts a branch only on a table with a snapshot: give the empty table one.
            with target.transaction() as transaction:
                transaction.update_snapshot().fast_append().commit()
        if own_branch and work and self.branch not in target.metadata.refs:
            cut_branch(target, self.branch, self.move_id)
            # Its state (and the fork it records) is now read from the branch.
            resolved = resolve(self, pinned=plan.source_snapshot_id)
            plan = resolved.plan
            selected = self._units(plan, units)
            target = resolved.target
            assert target is not None
        tracker = ProgressTracker(
            f"move {self.source} -> {self.target}",
            total_bytes=sum(unit.bytes for unit in selected if unit.index not in plan.done),
            units_total=len(plan.units) if units is None else len(selected),
            units_done=len(plan.done) if units is None else 0,
            on_progress=self.on_progress,
            report_on_add=False,  # the lanes count; the thread that commits the units reports
        )
        copier = FileCopier(
            source_metadata=resolved.source_metadata,
            source_io=resolved.source.io,
            target_metadata=target.metadata,
            target_io=target.io,
            convert=resolved.mapping.convert,
            source_columns=resolved.mapping.source_columns,
            row_filter=resolved.row_filter,
            parallelism=self.parallelism,
            file_name_prefix=f"{file_prefix(self.move_id)}{plan.plan_id}-",
            on_progress=tracker.add,
            verbatim=self._verbatim(resolved, target),
        )
        totals = dict.fromkeys(
            ("units_committed", "units_skipped", "rows", "bytes_read", "bytes_written", "files_written"), 0
        )
        pending: list[MoveUnit] = []
        for unit in selected:
            if unit.plan_id == plan.plan_id and unit.index not in plan.done:
                pending.append(unit)
            elif unit.plan_id == plan.plan_id or self._settled_elsewhere(target, unit):
                totals["units_skipped"] += 1
            else:
                raise MoveStateError(
                    f"Unit {unit.index} comes from plan {unit.plan_id}, but move {self.move_id!r} now runs plan "
                    f"{plan.plan_id} (another run of it started since the units were planned). Plan again."
                )
        snapshots = run_units(self, resolved, copier, pending, totals, tracker, self._stop_requested)
        if not plan.units and resolved.initial_state is not None and not nothing_new:
            recorded = record_empty(self, resolved)
            snapshots.extend([recorded] if recorded is not None else [])
        target.refresh()
        state = current_state(self, target)
        if self.mode == "overwrite" and state is not None and state.complete:
            snapshots.extend(publish(self, resolved, state))
            state = current_state(self, target)
        complete = state is not None and state.complete and published(self, target)
        tracker.finish()
        report = self.verify(self.verify_method) if self.verify_method is not None and complete else None
        result = MoveResult(
            move_id=self.move_id,
            source=self.source,
            target=self.target,
            mode=self.mode,
            source_snapshot_id=plan.source_snapshot_id,
            units_total=len(plan.units),
            **totals,
            seconds=round(time.monotonic() - started, 3),
            complete=complete,
            target_snapshot_ids=tuple(snapshots),
            verify=report,
        )
        if report is not None and not report.ok:
            raise VerificationFailedError(
                f"Verification ({report.method}) of move {self.move_id!r} failed: the target's moved rows differ "
                f"from the source's ({report.source_rows} source rows, {report.target_rows} target rows; "
                f"details: {report.details}).",
                report,
            )
        return result

    def _verbatim(self, resolved: Resolved, target: Table) -> bool:
        """Whether source files that need no change may be copied byte for byte (logged either way)."""
        if self.rewrite:
            log.info("Move %s: every file is re-encoded (rewrite=True)", self.move_id)
            return False
        source_schema = resolved.source_metadata.schema()
        columns = resolved.mapping.source_columns
        blocker = schema_blocker(
            source_schema,
            target.metadata.schema(),
            rename=self.rename,
            all_columns=set(columns) == {field.name for field in source_schema.fields},
        )
        if blocker is not None:
            log.info("Move %s: files are re-encoded, none copied as they are, because %s", self.move_id, blocker)
        return blocker is None

    def verify(self, method: str | None = None, *, seed: int | None = None) -> VerifyReport:
        """Compare the source rows the move was defined over with the rows its commits hold in the target.

        ``method`` is ``count``, ``checksum`` or ``sample`` (default the ``verify`` given to the mover, else
        ``count``); ``seed`` seeds the ``sample`` choice of rows (recorded in the report). A move that has
        not finished (or never ran) raises ``MoveStateError``.
        """
        return verify_move(self, method, seed=seed)

    def _own_branch_target(self, verb: str) -> Table:
        """The target, for a verb of a move given a branch of its own; refused for any other move."""
        if not is_audit_branch(self.branch):
            raise InvalidMoveError(
                message(
                    f"{verb} works on a move given a branch of its own ({{branch}}); move {self.move_id!r} commits "
                    f"to {self.branch}.",
                    about="branch",
                    branch=Arg("branch", "NAME"),
                )
            )
        try:
            return self.target_catalog.load_table(self.target)
        except NoSuchTableError as exc:
            raise MoveStateError(
                f"Move {self.move_id!r} has not started: its target {self.target} does not exist; run it first."
            ) from exc

    def audit(
        self,
        not_null: Sequence[str] = (),
        unique: Sequence[str | Sequence[str]] = (),
        no_rows_where: str | BooleanExpression | None = None,
        min_rows: int | None = None,
        max_rows: int | None = None,
        checks: Sequence[Check] | Mapping[str, Check] = (),
        *,
        scope: str = "move",
        sample_size: int = 5,
    ) -> AuditReport:
        """Check the rows on the move's branch; a passing audit is recorded, and :meth:`publish` needs one.

        Args:
            not_null: Columns that must hold no null.
            unique: Columns, or lists of columns taken together, whose values no two rows may share
                (rows with a null in the key are not compared, as in SQL).
            no_rows_where: A filter no row may match (``"amount < 0"``).
            min_rows: The fewest rows the audit may read.
            max_rows: The most rows the audit may read.
            checks: Functions of a ``pyarrow.RecordBatch`` returning its number of offending rows
                (named by their ``__name__``, or given as ``{name: function}``).
            scope: ``move`` (default): the rows added on the branch since it was cut, by the move or others
                (since the branch snapshot another engine fast-forwarded ``main`` to, if one did);
                ``branch``: every row the branch holds (``main``'s rows at the fork included).
            sample_size: Offending rows kept per check, for the report.

        Returns:
            The report: ``ok``, and per check its failed rows and a sample. A failed audit changes
            nothing but the record of an earlier passing one, which it clears: ``main`` is untouched
            and the branch kept.

        Raises:
            InvalidMoveError: A bad argument, or a move without ``branch``.
            MoveStateError: The move has not finished on its branch, or was published already.
            MoveConflictError: The branch moved while it was read (transient: audit again).
        """
        target = self._own_branch_target("audit")
        record = owned_record(target.metadata, self.branch, self.move_id, self.target)
        if record is None:
            finished, _ = find_state(target.metadata, self.move_id, MAIN_BRANCH)
            done = finished is not None and finished.complete and finished.fork_snapshot_id is not None
            raise MoveStateError(
                f"Move {self.move_id!r} has no branch {self.branch!r} to audit: "
                + ("it was published to main already." if done else "it has not started (or was discarded); run it."),
                reason="published" if done else "",
            )
        state, _ = find_state(target.metadata, self.move_id, self.branch)
        done_units = unfinished(state, record)
        if done_units is not None:
            raise MoveStateError(
                f"Move {self.move_id!r} has not finished: {done_units} units are committed to branch "
                f"{self.branch!r}. Run it to the end, then audit."
            )
        return audit_branch(
            target,
            record,
            not_null=not_null,
            unique=unique,
            no_rows_where=no_rows_where,
            min_rows=min_rows,
            max_rows=max_rows,
            checks=checks,
            scope=scope,
            sample_size=sample_size,
        )

    def publish(self) -> Published:
        """Make the audited branch ``main``'s, in one metadata commit, exactly once; then remove the branch.

        With ``main`` where the branch was cut, ``main`` moves to the audited snapshot; after appends by
        others, the move's files are appended to ``main`` with a receipt. Publishing again after a crash
        or a retry commits nothing (``how="already_published"``). See ``docs/data_mover.md``.

        Raises:
            PublishRefusedError: Not finished, not audited, the branch moved after the audit, or ``main``
                changed in a way the move's rows cannot be combined with; nothing changed.
            MoveConflictError: Other writers kept winning the commit (transient: publish again).
        """
        return publish_branch(self._own_branch_target("publish"), self.move_id, self.branch)

    def discard(self) -> Discarded:
        """Remove the move's branch and its records, leaving ``main`` untouched.

        The data files only the branch referenced are removed by snapshot expiry and orphan-file removal.
        Running the move again afterwards starts it anew on a new branch.
        """
        return discard_branch(self._own_branch_target("discard"), self.move_id, self.branch)
