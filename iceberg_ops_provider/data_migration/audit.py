"""The audit of a move's branch (write-audit-publish): checks over its rows, read streaming, and its record.

The rows are read one file at a time, batch by batch (deletes applied), so memory holds one batch
plus what the checks keep: ``unique`` keeps a 16-byte BLAKE2b digest of each distinct key in a Python
set (about 100 bytes per distinct key: 10 million distinct keys take about 1 GB), the samples at
most ``sample_size`` rows per check. A passing audit records the branch head it read in the branch's
record; publishing requires that head to be the branch's head still.
"""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import date, datetime, time
from decimal import Decimal
from typing import TYPE_CHECKING, Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.dataset as ds
from pyiceberg.exceptions import CommitFailedException
from pyiceberg.expressions import AlwaysTrue, BooleanExpression
from pyiceberg.expressions.parser import parse
from pyiceberg.expressions.visitors import bind
from pyiceberg.io.pyarrow import expression_to_pyarrow
from pyiceberg.manifest import ManifestEntryStatus
from pyiceberg.table.snapshots import Operation, ancestors_of

from iceberg_ops_provider.core.filters import FILTER_FORM, bind_filter, syntax_problem
from iceberg_ops_provider.core.name_hints import closest, did_you_mean
from iceberg_ops_provider.core.refs import commit_refs, record_of
from iceberg_ops_provider.data_migration.audit_branch import on_main_since
from iceberg_ops_provider.data_migration.move_files import stream_tasks
from iceberg_ops_provider.data_migration.state import state_of
from iceberg_ops_provider.errors import InvalidMoveError, MoveConflictError, MoveStateError
from iceberg_ops_provider.messages import Arg, message

if TYPE_CHECKING:
    from pyiceberg.manifest import DataFile
    from pyiceberg.schema import Schema
    from pyiceberg.table import FileScanTask, Table
    from pyiceberg.table.snapshots import Snapshot

    from iceberg_ops_provider.data_migration.audit_branch import BranchRecord

__all__ = ["AUDIT_SCOPES", "AuditCheck", "AuditReport", "Check", "audit_branch", "added_since_fork"]

log = logging.getLogger(__name__)

AUDIT_SCOPES = ("move", "branch")
"""``move``: the rows added on the branch, by any commit, since the fork (or since the branch snapshot ``main`` was
fast-forwarded to by another engine: :func:`~.audit_branch.on_main_since`); ``branch``: every row of the branch."""

Check = Callable[[pa.RecordBatch], int]
"""A check of its own: the number of offending rows in a batch."""


@dataclass(frozen=True)
class AuditCheck:
    """One check of an audit: ``failed_rows`` rows broke it (for ``min_rows``/``max_rows``, rows missing or too many).

    ``sample``: up to the audit's ``sample_size`` offending rows, as ``{column: value}`` (none for checks of
    one's own and for row counts).
    """

    name: str
    failed_rows: int
    sample: tuple[dict[str, Any], ...] = ()

    @property
    def ok(self) -> bool:
        """Whether no row broke the check."""
        return self.failed_rows == 0

    def to_json(self) -> dict[str, Any]:
        """JSON-able form (values that JSON has no type for, as text)."""
        sample = [{key: _plain(value) for key, value in row.items()} for row in self.sample]
        return {"name": self.name, "ok": self.ok, "failed_rows": self.failed_rows, "sample": sample}


@dataclass(frozen=True)
class AuditReport:
    """What :func:`audit_branch` found on the branch head ``snapshot_id`` (cut from ``fork_snapshot_id``).

    ``ok`` when every check passed; a passing audit is recorded, and :meth:`DataMover.publish` publishes
    exactly ``snapshot_id``. ``rows``: the rows read (``scope``: ``move`` or ``branch``).
    """

    move_id: str
    table: str
    branch: str
    snapshot_id: int
    fork_snapshot_id: int
    scope: str
    rows: int
    checks: tuple[AuditCheck, ...] = field(default_factory=tuple)

    @property
    def ok(self) -> bool:
        """Whether every check passed."""
        return all(check.ok for check in self.checks)

    @property
    def failed(self) -> tuple[AuditCheck, ...]:
        """The checks that failed."""
        return tuple(check for check in self.checks if not check.ok)

    def to_json(self) -> dict[str, Any]:
        """JSON-able form, for XCom and the command line."""
        return {
            "kind": "audit",
            "ok": self.ok,
            "move_id": self.move_id,
            "table": self.table,
            "branch": self.branch,
            "snapshot_id": self.snapshot_id,
            "fork_snapshot_id": self.fork_snapshot_id,
            "scope": self.scope,
            "rows": self.rows,
            "checks": [check.to_json() for check in self.checks],
        }


def _plain(value: Any) -> Any:
    if isinstance(value, datetime | date | time | Decimal):
        return value.isoformat() if not isinstance(value, Decimal) else str(value)
    if isinstance(value, bytes):
        return value.hex()
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    return value


def _bad(about: str, value: object, text: str) -> InvalidMoveError:
    return InvalidMoveError(message(text, about=about, **{about: Arg(about, value)}))


def _names(about: str, value: object) -> list[str]:
    if isinstance(value, str) or not isinstance(value, Iterable):
        raise _bad(about, value, f"{{{about}}} must be a list of column names.")
    names = list(value)
    if not all(isinstance(name, str) and name for name in names):
        raise _bad(about, value, f"{{{about}}} must be a list of column names.")
    return names


def _keys(unique: object) -> list[tuple[str, ...]]:
    """``unique`` as keys: each a column name, or a list of names that together must be unique."""
    if isinstance(unique, str) or not isinstance(unique, Iterable):
        raise _bad("unique", unique, "{unique} must be a list of column names or of lists of column names.")
    keys = []
    for item in unique:
        key = (item,) if isinstance(item, str) else tuple(_names("unique", item))
        if not key or not all(key):
            raise _bad("unique", unique, "{unique} must be a list of column names or of lists of column names.")
        keys.append(key)
    return keys


def _named_checks(checks: object) -> list[tuple[str, Check]]:
    items = list(checks.items()) if isinstance(checks, Mapping) else None
    if items is None:
        if isinstance(checks, str) or not isinstance(checks, Iterable):
            raise _bad("checks", checks, "{checks} must be a list of functions (or a mapping of names to functions).")
        items = [(getattr(check, "__name__", repr(check)), check) for check in checks]
    for name, check in items:
        if not callable(check):
            raise _bad("checks", checks, f"{{checks}} holds {check!r} ({name}), which is not a function.")
    return [(str(name), check) for name, check in items]


def _count(about: str, value: object) -> int | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise _bad(about, value, f"{{{about}}} must be a number of rows (0 or more), or None.")
    return value


def _check_columns(about: str, names: Iterable[str], schema: Schema, given: object) -> None:
    known = [f.name for f in schema.fields]
    for name in names:
        if name not in known:
            raise _bad(
                about,
                given,
                f"{{{about}}} names column {name!r}, which the table does not have."
                + did_you_mean(closest(name, known)),
            )


def _where(text: object, schema: Schema) -> tuple[str, pc.Expression] | None:
    if text is None:
        return None
    if isinstance(text, str) and not text.strip():
        raise _bad("no_rows_where", text, "{no_rows_where} is empty: give a filter, or None to check nothing.")
    if not isinstance(text, str | BooleanExpression):
        raise _bad("no_rows_where", text, "{no_rows_where} must be a PyIceberg filter string or expression.")
    try:
        expression = parse(text) if isinstance(text, str) else text
    except Exception as exc:
        problem = f"{{no_rows_where}} does not parse as a filter{syntax_problem(exc)}. {FILTER_FORM}"
        raise _bad("no_rows_where", text, problem) from exc
    try:
        adjusted = bind_filter(expression, schema)
    except ValueError as exc:
        raise _bad("no_rows_where", text, f"{{no_rows_where}} does not fit the table: {exc}") from exc
    label = text if isinstance(text, str) else repr(text)
    return label, expression_to_pyarrow(bind(schema, adjusted, case_sensitive=True), schema)


def added_since_fork(
    table: Table, head: Snapshot, fork_snapshot_id: int, move_id: str, *, by_anyone: bool = False
) -> tuple[dict[str, DataFile], list[Snapshot]]:
    """The data files the move's commits added between the fork and ``head`` (by location), and the other commits.

    With ``by_anyone``, the files the other commits added too (another writer's append to the branch, the
    files a delete or overwrite on it rewrote): every file the branch gained since the fork. Only the
    manifests those commits wrote are read, so the cost follows the commits since the fork, not the table.

    Raises:
        MoveStateError: The branch's history no longer reaches back to the fork (its snapshots were expired),
            so which files the move added cannot be told.
    """
    added: dict[str, DataFile] = {}
    foreign: list[Snapshot] = []
    for snapshot in ancestors_of(head, table.metadata):
        if snapshot.snapshot_id == fork_snapshot_id:
            return added, foreign
        mine = state_of(snapshot, move_id) is not None
        if not mine:
            foreign.append(snapshot)
        if by_anyone or (mine and (snapshot.summary is None or snapshot.summary.operation == Operation.APPEND)):
            for manifest in snapshot.manifests(table.io):
                if manifest.added_snapshot_id != snapshot.snapshot_id:
                    continue
                for entry in manifest.fetch_manifest_entry(table.io, discard_deleted=True):
                    if entry.status == ManifestEntryStatus.ADDED and entry.snapshot_id == snapshot.snapshot_id:
                        added[entry.data_file.file_path] = entry.data_file
    raise MoveStateError(
        message(
            f"The history of the branch of move {move_id!r} in {'.'.join(table.name())} no longer reaches back to "
            f"snapshot {fork_snapshot_id}, where it was cut (its snapshots were expired): the rows the move added "
            "cannot be told from the others. Audit the whole branch ({scope}); it can then be published only while "
            "main is still at the fork.",
            scope=Arg("scope", "branch"),
        )
    )


class _Sampler:
    """Counts offending rows and keeps the first ``size`` of them."""

    def __init__(self, name: str, size: int) -> None:
        self.name, self.size, self.failed, self.rows = name, size, 0, []

    def add(self, batch: pa.RecordBatch, mask: pa.Array | None = None, count: int | None = None) -> None:
        if mask is not None:
            count = pc.sum(pc.cast(mask, pa.int64())).as_py() or 0
            if count and len(self.rows) < self.size:
                self.rows += batch.filter(mask).slice(0, self.size - len(self.rows)).to_pylist()
        self.failed += count or 0

    def result(self) -> AuditCheck:
        return AuditCheck(self.name, self.failed, tuple(self.rows))


def _duplicates(batch: pa.RecordBatch, key: tuple[str, ...], seen: set[bytes]) -> pa.Array:
    """A mask of the rows of ``batch`` whose ``key`` an earlier row had (rows with a null in the key never)."""
    columns = [batch.column(name).to_pylist() for name in key]
    marks = []
    for values in zip(*columns, strict=True):
        if any(value is None for value in values):
            marks.append(False)
            continue
        digest = hashlib.blake2b(repr(values).encode(), digest_size=16).digest()
        marks.append(digest in seen)
        seen.add(digest)
    return pa.array(marks, type=pa.bool_())


def audit_branch(
    table: Table,
    record: BranchRecord,
    *,
    not_null: Sequence[str] = (),
    unique: Sequence[str | Sequence[str]] = (),
    no_rows_where: str | BooleanExpression | None = None,
    min_rows: int | None = None,
    max_rows: int | None = None,
    checks: Sequence[Check] | Mapping[str, Check] = (),
    scope: str = "move",
    sample_size: int = 5,
) -> AuditReport:
    """Run the checks over the branch of ``record`` at its head, and record the head when all pass.

    The caller checked that the branch is the move's and its units are all committed. A failing audit
    clears an earlier passing one, so only a head the latest audit passed is published.

    Raises:
        InvalidMoveError: A bad argument (an unknown column, a filter that does not parse); nothing was read.
        MoveConflictError: The branch moved while it was read (transient: audit again).
    """
    if scope not in AUDIT_SCOPES:
        raise _bad("scope", scope, f"{{scope}} is not one of {', '.join(AUDIT_SCOPES)}.")
    if isinstance(sample_size, bool) or not isinstance(sample_size, int) or sample_size < 0:
        raise _bad("sample_size", sample_size, "{sample_size} must be a number of rows (0 or more).")
    not_null_columns = _names("not_null", not_null)
    keys = _keys(unique)
    own = _named_checks(checks)
    low, high = _count("min_rows", min_rows), _count("max_rows", max_rows)
    if low is not None and high is not None and low > high:
        raise _bad("min_rows", min_rows, f"{{min_rows}} is more than max_rows ({high}): no row count can pass.")
    metadata = table.metadata
    schema = metadata.schema()
    _check_columns("not_null", not_null_columns, schema, not_null)
    _check_columns("unique", [name for key in keys for name in key], schema, unique)
    where = _where(no_rows_where, schema)
    head = metadata.snapshot_by_name(record.branch)
    assert head is not None
    tasks: list[FileScanTask] = list(table.scan(snapshot_id=head.snapshot_id).plan_files())
    if scope == "move":
        # Every file the branch gained since main last held it: what a fast-forward publishes, others' fixes included.
        added, _ = added_since_fork(table, head, on_main_since(metadata, record, head), record.move_id, by_anyone=True)
        tasks = [task for task in tasks if task.file.file_path in added]
    nulls = [_Sampler(f"not_null({name})", sample_size) for name in not_null_columns]
    dupes = [(_Sampler(f"unique({', '.join(key)})", sample_size), key, set[bytes]()) for key in keys]
    matched = _Sampler(f"no_rows_where({where[0]})", sample_size) if where else None
    mine = [(_Sampler(name, 0), name, check) for name, check in own]
    rows = 0
    columns = [f.name for f in schema.fields]
    for batch in stream_tasks(metadata, table.io, tasks, columns, AlwaysTrue()):
        rows += batch.num_rows
        for sampler, name in zip(nulls, not_null_columns, strict=True):
            sampler.add(batch, pc.is_null(batch.column(name)))
        for sampler, key, seen in dupes:
            sampler.add(batch, _duplicates(batch, key, seen))
        if matched is not None and where is not None:
            matched.add(batch, _mask(batch, where[1]))
        for sampler, name, check in mine:
            try:
                found = check(batch)
            except Exception as exc:
                raise _bad(
                    "checks",
                    name,
                    f"The check {name!r} raised {type(exc).__name__}: {exc}. Nothing was recorded; fix the check "
                    "(a function of a pyarrow.RecordBatch returning its number of offending rows) and audit again.",
                ) from exc
            if isinstance(found, bool) or not isinstance(found, int) or found < 0:
                raise _bad("checks", name, f"The check {name!r} returned {found!r}, not a number of offending rows.")
            sampler.add(batch, count=found)
    results = [s.result() for s in nulls] + [s.result() for s, _, _ in dupes]
    results += [matched.result()] if matched is not None else []
    results += [s.result() for s, _, _ in mine]
    if low is not None:
        results.append(AuditCheck(f"min_rows({low})", max(0, low - rows)))
    if high is not None:
        results.append(AuditCheck(f"max_rows({high})", max(0, rows - high)))
    report = AuditReport(
        move_id=record.move_id,
        table=".".join(table.name()),
        branch=record.branch,
        snapshot_id=head.snapshot_id,
        fork_snapshot_id=record.fork_snapshot_id,
        scope=scope,
        rows=rows,
        checks=tuple(results),
    )
    _record(table, record, report)
    log.info(
        "audit of branch %s of %s at snapshot %s: %s (%d rows; failed: %s)",
        record.branch,
        report.table,
        head.snapshot_id,
        "ok" if report.ok else "FAILED",
        rows,
        ", ".join(c.name for c in report.failed) or "none",
    )
    return report


def _mask(batch: pa.RecordBatch, expression: pc.Expression) -> pa.Array:
    """Which rows of ``batch`` ``expression`` holds for (a null result counts as not holding)."""
    hits = ds.dataset(pa.Table.from_batches([batch])).to_table(columns={"hit": expression}).column("hit")
    return pc.fill_null(hits.combine_chunks(), False)


def _record(table: Table, record: BranchRecord, report: AuditReport) -> None:
    """Record a passing audit's head in the branch's record (or clear a passing one after a failure)."""
    audited = (report.snapshot_id, report.scope) if report.ok else (None, None)
    moved = MoveConflictError(
        f"Branch {record.branch!r} of {report.table} moved while it was audited (it was at snapshot "
        f"{report.snapshot_id}); nothing was recorded. Audit it again."
    )
    table.refresh()  # as it is now: another audit may have recorded its verdict meanwhile
    ref = table.metadata.refs.get(record.branch)
    current = record_of(table.metadata, record.branch)
    if ref is None or ref.snapshot_id != report.snapshot_id or current is None or current.move_id != record.move_id:
        raise moved
    if (current.audited_snapshot_id, current.audited_scope) == audited:
        return
    try:
        commit_refs(
            table,
            expected={record.branch: report.snapshot_id},
            properties=current.audited(*audited).to_properties(),
        )
    except CommitFailedException as exc:
        raise moved from exc
    table.refresh()
