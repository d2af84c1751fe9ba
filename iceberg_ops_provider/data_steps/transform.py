"""What a step does to one batch of rows: the rows it keeps and the values it writes, in SQL semantics.

A row changes only where ``where`` is true: a null verdict (a comparison with a null) leaves it as it is.
Batches arrive with the table's column names; the result goes through the table's own
:class:`~iceberg_ops_provider.data_migration.reconcile.ColumnMapping` (file names, field ids, required
columns checked) to the writer.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

import pyarrow as pa
import pyarrow.acero as acero
import pyarrow.compute as pc
from pyiceberg.expressions import AlwaysTrue
from pyiceberg.expressions.visitors import bind
from pyiceberg.io.pyarrow import expression_to_pyarrow, schema_to_pyarrow

from iceberg_ops_provider.data_migration.reconcile import ColumnMapping
from iceberg_ops_provider.errors import InvalidDataStepError, ReconciliationError

if TYPE_CHECKING:
    from pyiceberg.schema import Schema
    from pyiceberg.table.sorting import SortOrder

    from iceberg_ops_provider.data_steps.definition import DataStep

__all__ = ["BatchTransform", "arrow_type_of", "computed_values", "family", "matches"]


def arrow_type_of(schema: Schema, column: str) -> pa.DataType:
    """The Arrow type of ``column``'s values as the table's batches carry them."""
    return schema_to_pyarrow(schema.find_field(column).field_type, include_field_ids=False)


def matches(batch: pa.RecordBatch, predicate: pc.Expression | None) -> pa.Array:
    """Where ``predicate`` is true on ``batch`` (false where it is false or null); all true without one."""
    if predicate is None:
        return pa.repeat(pa.scalar(True), batch.num_rows)
    source = acero.Declaration("table_source", acero.TableSourceNodeOptions(pa.Table.from_batches([batch])))
    project = acero.Declaration("project", acero.ProjectNodeOptions([predicate], ["m"]))
    verdict = acero.Declaration.from_sequence([source, project]).to_table(use_threads=False).column("m")
    return pc.fill_null(verdict.combine_chunks(), False)


_FAMILIES: tuple[tuple[str, Callable[[pa.DataType], bool]], ...] = (
    ("boolean", pa.types.is_boolean),
    ("integer", pa.types.is_integer),
    ("float", pa.types.is_floating),
    ("decimal", pa.types.is_decimal),
    ("string", lambda t: pa.types.is_string(t) or pa.types.is_large_string(t) or pa.types.is_string_view(t)),
    ("binary", lambda t: pa.types.is_binary(t) or pa.types.is_large_binary(t) or pa.types.is_fixed_size_binary(t)),
    ("date", pa.types.is_date),
    ("time", pa.types.is_time),
    ("timestamp", pa.types.is_timestamp),
)


def family(arrow_type: pa.DataType) -> str:
    """The kind of values an Arrow type holds (``integer`` for every width), its own name for the others."""
    return next((name for name, test in _FAMILIES if test(arrow_type)), str(arrow_type))


def computed_values(value: Any, batch: pa.RecordBatch, column: str, arrow_type: pa.DataType, table: str) -> pa.Array:
    """The new values of ``column`` for ``batch``: a literal repeated, or what a function returns, as ``arrow_type``.

    Raises:
        InvalidDataStepError: The function returned something else than an Arrow array of the batch's
            length whose values fit the column.
    """
    if not callable(value):
        return pa.repeat(pa.scalar(value, arrow_type), batch.num_rows)
    result = value(batch)
    if isinstance(result, pa.ChunkedArray):
        result = result.combine_chunks()
    if not isinstance(result, pa.Array):
        raise InvalidDataStepError(
            f"The function for {table}.{column} returned {type(result).__name__}, not a pyarrow.Array: return "
            "pyarrow.array(values), or a pyarrow.compute result on the batch's columns.",
            table=table,
            column=column,
            expected="pyarrow.Array",
            got=type(result).__name__,
        )
    if len(result) != batch.num_rows:
        raise InvalidDataStepError(
            f"The function for {table}.{column} returned {len(result)} values for a batch of {batch.num_rows} rows: "
            "it must return one value for each row of the batch it is given, in the batch's order.",
            table=table,
            column=column,
            expected=f"{batch.num_rows} values",
            got=f"{len(result)} values",
        )
    if result.type.equals(arrow_type):
        return result
    if family(result.type) != family(arrow_type) and not (
        family(arrow_type) == "float" and family(result.type) == "integer"
    ):
        raise InvalidDataStepError(
            f"The function for {table}.{column} returned {result.type} values; column {column} holds {arrow_type}.",
            table=table,
            column=column,
            expected=str(arrow_type),
            got=str(result.type),
        )
    try:
        return result.cast(arrow_type, safe=True)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError) as exc:
        raise InvalidDataStepError(
            f"The function for {table}.{column} returned {result.type} values, which column {column} "
            f"({arrow_type}) cannot hold: {exc}",
            table=table,
            column=column,
            expected=str(arrow_type),
            got=str(result.type),
        ) from exc


class BatchTransform:
    """The per-batch work of one step: keep, compute, then convert for the writer; counts the rows it changed.

    Runs on the copy's lanes (several threads): :meth:`changed_rows`, called on a lane right after a
    call, says how many rows that call changed (the copier sums them per unit).
    """

    def __init__(self, step: DataStep, schema: Schema, sort_order: SortOrder | None = None) -> None:
        self.step = step
        self.schema = schema
        self.table = step.table_name
        where = step.row_filter(schema)
        self.predicate = (
            None if where == AlwaysTrue() else expression_to_pyarrow(bind(schema, where, case_sensitive=True), schema)
        )
        self.types = {column: arrow_type_of(schema, column) for column in step.assignments}
        self.required = frozenset(column for column in step.assignments if schema.find_field(column).required)
        self.mapping = ColumnMapping.build(schema, schema)
        self.sort_keys = _sort_keys(schema, sort_order)
        self._last = threading.local()

    def changed_rows(self) -> int:
        """The rows this thread's last call changed (deleted, updated, filled or rewritten)."""
        return getattr(self._last, "changed", 0)

    def __call__(self, batch: pa.RecordBatch) -> pa.RecordBatch:
        """The batch to write for ``batch`` read from an input file."""
        changed, batch = self.apply(batch)
        self._last.changed = changed
        if self.sort_keys and batch.num_rows > 1:
            batch = batch.take(pc.sort_indices(batch, sort_keys=self.sort_keys))
        try:
            return self.mapping.convert(batch)
        except ReconciliationError as exc:  # a function's values that the table cannot hold (a null, a range)
            raise InvalidDataStepError(
                f"{self.step.kind} on {self.table}: the new values do not fit the table: {exc}",
                table=self.table,
                expected="values the table's columns hold",
                got=str(exc),
            ) from exc

    def apply(self, batch: pa.RecordBatch) -> tuple[int, pa.RecordBatch]:
        """The rows ``batch`` changes into and how many rows changed (deleted, updated, filled, rewritten)."""
        kind = self.step.kind
        if kind == "rewrite_partitions":
            return batch.num_rows, batch
        selected = matches(batch, self.predicate)
        if kind == "delete_rows":
            kept = batch.filter(pc.invert(selected))
            return batch.num_rows - kept.num_rows, kept
        if kind == "backfill":
            column = next(iter(self.step.assignments))
            selected = pc.and_(selected, pc.is_null(batch.column(column)))
        count = pc.sum(selected).as_py() or 0
        if count == 0:
            return 0, batch
        return count, _assigned(batch, selected, self.step.assignments, self.types, self.table, self.required)


def _assigned(
    batch: pa.RecordBatch,
    selected: pa.Array,
    assignments: Mapping[str, Any],
    types: Mapping[str, pa.DataType],
    table: str,
    required: frozenset[str],
) -> pa.RecordBatch:
    """``batch`` with each assigned column's value replaced where ``selected`` is true.

    Raises:
        InvalidDataStepError: A function's values do not fit (:func:`computed_values`), or a column in
            ``required`` would hold a null.
    """
    columns = list(batch.columns)
    names = batch.schema.names
    for column, value in assignments.items():
        position = names.index(column)
        old = columns[position]
        new: pa.Array | pa.Scalar  # a literal stays a scalar: if_else needs no array of it
        new = (
            computed_values(value, batch, column, types[column], table)
            if callable(value)
            else pa.scalar(value, types[column])
        )
        if not old.type.equals(new.type):
            new = new.cast(old.type)
        columns[position] = pc.if_else(selected, new, old)
        if columns[position].null_count and column in required:
            raise InvalidDataStepError(
                f"The new values of {table}.{column} hold {columns[position].null_count} nulls; "
                f"column {column} is required.",
                table=table,
                column=column,
                expected="no null",
                got=f"{columns[position].null_count} nulls",
            )
    return pa.RecordBatch.from_arrays(columns, schema=batch.schema)


def _sort_keys(schema: Schema, sort_order: SortOrder | None) -> list[tuple[str, str]] | None:
    """Arrow sort keys for the identity fields of ``sort_order`` (its other transforms are not applied)."""
    if sort_order is None or sort_order.is_unsorted:
        return None
    keys: list[tuple[str, str]] = []
    for sort_field in sort_order.fields:
        if str(sort_field.transform) != "identity":
            break
        name = schema.find_column_name(sort_field.source_id)
        if name is None or "." in name:
            break
        keys.append((name, "ascending" if sort_field.direction.value == "asc" else "descending"))
    return keys or None


Transform = Callable[[pa.RecordBatch], pa.RecordBatch]
