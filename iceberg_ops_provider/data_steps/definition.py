"""What a data step is, and what running or estimating one reports.

A step is data: its kind, its table, its ``where`` and its assignments. Its id names it in every commit it
makes; its fingerprint tells a resumed step from another one recorded under the same id.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass, field
from functools import lru_cache
from typing import TYPE_CHECKING, Any, Literal

from pyiceberg.expressions import AlwaysTrue, BooleanExpression
from pyiceberg.expressions.parser import parse

from iceberg_ops_provider.core.filters import bind_filter
from iceberg_ops_provider.data_migration.planning import fingerprint

if TYPE_CHECKING:
    from pyiceberg.schema import Schema

__all__ = ["KINDS", "DataStep", "Estimate", "StepKind", "StepProgress", "StepResult", "UNIT_BYTES"]

StepKind = Literal["delete_rows", "update_rows", "backfill", "rewrite_partitions"]

KINDS: tuple[str, ...] = ("delete_rows", "update_rows", "backfill", "rewrite_partitions")
"""Every kind of data step."""

UNIT_BYTES = 256 * 1024 * 1024
"""Bytes of data files one unit reads (and one commit replaces) unless a run asks for another size."""


@dataclass(frozen=True)
class DataStep:
    """One tracked data change on one table.

    ``where``: a PyIceberg filter string or expression (what the data mover takes); ``None``: every row.
    ``assignments``: for ``update_rows``, column -> literal or ``fn(pa.RecordBatch) -> pa.Array`` (the
    function gets every row of a batch; its values are used where ``where`` is true); for
    ``backfill``, exactly one column, filled where it is null (and ``where`` holds).
    """

    step_id: str
    kind: StepKind
    identifier: tuple[str, ...]
    where: str | BooleanExpression | None = None
    assignments: Mapping[str, Any] = field(default_factory=dict)

    @property
    def table_name(self) -> str:
        """The table, dotted."""
        return ".".join(self.identifier)

    @property
    def where_text(self) -> str | None:
        """``where`` as text (for messages and the fingerprint), ``None`` for every row."""
        if self.where is None or (isinstance(self.where, str) and not self.where.strip()):
            return None
        return self.where if isinstance(self.where, str) else repr(self.where)

    def expression(self) -> BooleanExpression:
        """``where`` as an unbound PyIceberg expression (``AlwaysTrue`` for every row).

        Raises:
            ValueError: ``where`` is a string PyIceberg's parser does not read.
        """
        if self.where_text is None:
            return AlwaysTrue()
        return _parsed(self.where) if isinstance(self.where, str) else self.where  # type: ignore[return-value]

    def row_filter(self, schema: Schema) -> BooleanExpression:
        """``where`` as ``schema`` reads it, unbound: a date compared with a timestamp column is that day's midnight.

        Raises:
            ValueError: ``where`` does not parse, or names a column or value ``schema`` does not take.
        """
        return bind_filter(self.expression(), schema)

    def fingerprint(self) -> str:
        """A hash of the kind, table, ``where`` text, assignment keys and literal values (not functions' identity)."""
        assigned = {
            column: ("<function>" if callable(value) else repr(value)) for column, value in self.assignments.items()
        }
        return fingerprint(
            {"kind": self.kind, "table": list(self.identifier), "where": self.where_text, "set": assigned}
        )


@lru_cache(maxsize=32)
def _parsed(where: str) -> BooleanExpression:
    # A step reads its where several times (validation, planning, each copy pipeline) and PyIceberg's
    # parser takes time quadratic in a list's length: 10,000 values take about a second, 100,000 a minute.
    return parse(where)


@dataclass(frozen=True)
class StepProgress:
    """How far a run of a step got, emitted after each unit it commits (or skips as done).

    Counts are of this run, except ``units_done`` (every unit committed so far, by any run): ``rows``
    written to new files, ``rows_changed`` deleted, updated, filled or rewritten, ``bytes_read`` of input
    files, ``bytes_written`` of new ones, ``seconds`` since the run started.
    """

    step_id: str
    table: str
    units_done: int
    units_total: int
    rows: int
    rows_changed: int
    bytes_read: int
    bytes_written: int
    seconds: float


@dataclass(frozen=True)
class StepResult:
    """What one call of :func:`~iceberg_ops_provider.data_steps.run_step` did.

    ``units_skipped``: units found done, before this call or by another run of the step meanwhile.
    ``files_rewritten``: input files read and replaced; ``files_removed``: input files dropped whole
    without being read (``delete_rows``); ``rows_changed``: rows deleted, updated, filled or rewritten
    by this call. ``appended_meanwhile``: snapshots other writers committed on ``main`` after the plan
    snapshot that only added rows (``rows_appended_meanwhile`` rows, left as they are).
    ``plan_snapshot_id`` is ``None`` for a table without a snapshot; ``snapshot_ids`` are the commits
    of this call, in order.
    """

    step_id: str
    kind: str
    table: str
    plan_snapshot_id: int | None
    units: int
    units_skipped: int
    files_rewritten: int = 0
    files_removed: int = 0
    files_added: int = 0
    rows_changed: int = 0
    bytes_read: int = 0
    bytes_written: int = 0
    appended_meanwhile: int = 0
    rows_appended_meanwhile: int = 0
    delete_files_removed: int = 0
    snapshot_ids: tuple[int, ...] = ()

    def to_json(self) -> dict[str, Any]:
        """The result as JSON-able values."""
        payload = asdict(self)
        payload["snapshot_ids"] = list(self.snapshot_ids)
        return payload


@dataclass(frozen=True)
class Estimate:
    """What a step would read and change, from manifest metadata alone (no data file read).

    ``files``/``bytes``/``rows``: the data files that may be rewritten (read and written again);
    ``files_dropped``/``rows_dropped``: files a ``delete_rows`` removes whole (every row matches);
    ``delete_files``: position delete files applied while reading; ``units``: commits it would make.
    Rows changed lie between ``rows_dropped`` and ``rows_dropped + rows``.
    """

    step_id: str
    kind: str
    table: str
    snapshot_id: int | None
    files: int = 0
    bytes: int = 0
    rows: int = 0
    files_dropped: int = 0
    bytes_dropped: int = 0
    rows_dropped: int = 0
    delete_files: int = 0
    units: int = 0

    def to_json(self) -> dict[str, Any]:
        """The estimate as JSON-able values."""
        return asdict(self)


ProgressCallback = Callable[[StepProgress], None]
