"""A step's input checked against its table before anything is committed.

Names are looked up in the table's current schema (with the closest name when one is unknown), literals
converted to their column's type, and each function probed on a few real rows of the table.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

import pyarrow as pa
from pyiceberg.expressions import AlwaysTrue, And, BooleanExpression, Not, Or, UnboundPredicate
from pyiceberg.io.pyarrow import ArrowScan

from iceberg_ops_provider.core.filters import FILTER_FORM, bind_filter, syntax_problem
from iceberg_ops_provider.core.name_hints import closest, did_you_mean
from iceberg_ops_provider.data_migration.source_pieces import projected_row_groups
from iceberg_ops_provider.data_steps.definition import KINDS
from iceberg_ops_provider.data_steps.transform import arrow_type_of, computed_values, family
from iceberg_ops_provider.errors import InvalidDataStepError
from iceberg_ops_provider.maintenance.candidates import plan_candidates

if TYPE_CHECKING:
    from pyiceberg.schema import Schema
    from pyiceberg.table import Table

    from iceberg_ops_provider.data_steps.definition import DataStep

__all__ = ["PROBE_ROWS", "probe_batch", "validate_step"]

PROBE_ROWS = 16
"""Rows a function is tried on before the step starts."""


def _names(expression: BooleanExpression) -> Iterator[str]:
    """The column names an unbound expression reads."""
    if isinstance(expression, And | Or):
        yield from _names(expression.left)
        yield from _names(expression.right)
    elif isinstance(expression, Not):
        yield from _names(expression.child)
    elif isinstance(expression, UnboundPredicate):
        yield expression.term.name


def _column_names(schema: Schema) -> list[str]:
    return [name for name in schema._name_to_id if name]  # every column, nested ones dotted


def _unknown(step: DataStep, schema: Schema, column: str, role: str) -> InvalidDataStepError:
    guess = closest(column, _column_names(schema))
    return InvalidDataStepError(
        f"{step.kind} on {step.table_name}: {role} names column {column!r}, which the table does not have."
        f"{did_you_mean(guess)} Columns: {', '.join(field.name for field in schema.fields)}.",
        table=step.table_name,
        column=column,
        closest=guess,
        expected="a column of the table",
        got=column,
    )


def _check_where(step: DataStep, schema: Schema) -> None:
    if isinstance(step.where, str) and not step.where.strip():
        raise InvalidDataStepError(
            f"{step.kind} on {step.table_name}: where is {step.where!r}, which names no rows. Write the filter, or "
            "give no where (None) to mean every row.",
            table=step.table_name,
            expected="a filter, or None for every row",
            got=repr(step.where),
        )
    try:
        expression = step.expression()
    except Exception as exc:
        raise InvalidDataStepError(
            f"{step.kind} on {step.table_name}: where {step.where_text!r} does not parse as a filter"
            f"{syntax_problem(exc)}. {FILTER_FORM}",
            table=step.table_name,
            expected="a PyIceberg filter string or expression",
            got=str(step.where_text),
        ) from exc
    for name in _names(expression):
        if not _has(schema, name):
            raise _unknown(step, schema, name, "where")
    try:
        bind_filter(expression, schema)
    except Exception as exc:
        raise InvalidDataStepError(
            f"{step.kind} on {step.table_name}: where {step.where_text!r} does not fit the table's columns: {exc}",
            table=step.table_name,
            expected="a filter on the table's columns",
            got=str(step.where_text),
        ) from exc


def _has(schema: Schema, name: str) -> bool:
    try:
        schema.find_field(name, case_sensitive=True)
    except ValueError:
        return False
    return True


def _check_assignments(step: DataStep, schema: Schema) -> None:
    expected = {"update_rows": "at least one", "backfill": "exactly one"}.get(step.kind, "no")
    count = len(step.assignments)
    if (expected == "no" and count) or (expected == "exactly one" and count != 1) or (expected != "no" and not count):
        raise InvalidDataStepError(
            f"{step.kind} on {step.table_name} takes {expected} column to set, not {count}.",
            table=step.table_name,
            expected=f"{expected} column",
            got=f"{count} columns",
        )
    for column, value in step.assignments.items():
        if not isinstance(column, str):
            raise InvalidDataStepError(
                f"{step.kind} on {step.table_name}: the change names column {column!r} "
                f"({type(column).__name__}); columns are named by strings.",
                table=step.table_name,
                expected="a column name (str)",
                got=type(column).__name__,
            )
        if not _has(schema, column):
            raise _unknown(step, schema, column, "the change")
        field = schema.find_field(column)
        if column not in {top.name for top in schema.fields}:
            raise InvalidDataStepError(
                f"{step.kind} on {step.table_name}: column {column} is nested; only top-level columns can be set.",
                table=step.table_name,
                column=column,
                expected="a top-level column",
                got="a nested field",
            )
        if not field.field_type.is_primitive:
            raise InvalidDataStepError(
                f"{step.kind} on {step.table_name}: column {column} is {field.field_type}; only columns of a "
                "primitive type can be set.",
                table=step.table_name,
                column=column,
                expected="a primitive column",
                got=str(field.field_type),
            )
        if step.kind == "backfill" and field.required:
            raise InvalidDataStepError(
                f"backfill on {step.table_name}: column {column} is required, so it holds no null to fill.",
                table=step.table_name,
                column=column,
                expected="an optional column",
                got="a required column",
            )
        if not callable(value):
            _check_literal(step, schema, column, value, field.required)


_TAKES = {"float": ("float", "integer"), "decimal": ("decimal", "integer"), "timestamp": ("timestamp", "date")}
"""Literal kinds a column takes besides its own (an int into a double column, ...)."""


def _check_literal(step: DataStep, schema: Schema, column: str, value: Any, required: bool) -> None:
    arrow_type = arrow_type_of(schema, column)
    if value is None and (required or step.kind == "backfill"):
        raise InvalidDataStepError(
            f"{step.kind} on {step.table_name}: column {column} cannot be set to null here"
            f"{' (it is required)' if required else ' (a backfill fills nulls)'}.",
            table=step.table_name,
            column=column,
            expected=str(schema.find_field(column).field_type),
            got="None",
        )
    problem: Exception | None = None
    try:
        takes = _TAKES.get(family(arrow_type), (family(arrow_type),))
        if value is not None and family(pa.scalar(value).type) not in takes:
            problem = TypeError(f"it takes {' or '.join(takes)} values, not {family(pa.scalar(value).type)}")
        else:
            pa.array([value], arrow_type)
    except (pa.ArrowInvalid, pa.ArrowTypeError, TypeError, ValueError, OverflowError) as exc:
        problem = exc  # pa.scalar refuses an int beyond 64 bits, or an object Arrow has no type for
    if problem is not None:
        raise InvalidDataStepError(
            f"{step.kind} on {step.table_name}: {value!r} ({type(value).__name__}) is not a value of column "
            f"{column} ({schema.find_field(column).field_type}): {problem}",
            table=step.table_name,
            column=column,
            expected=str(schema.find_field(column).field_type),
            got=type(value).__name__,
        ) from problem


def probe_batch(table: Table, rows: int = PROBE_ROWS) -> pa.RecordBatch | None:
    """A few rows of the table's current snapshot as a step's batches carry them, ``None`` when it holds none."""
    snapshot = table.metadata.current_snapshot()
    if snapshot is None:
        return None
    tasks = plan_candidates(table.metadata, table.io, snapshot, AlwaysTrue(), lambda data_file: True)
    scan = ArrowScan(table.metadata, table.io, table.metadata.schema(), AlwaysTrue(), True)
    for task in sorted(tasks, key=lambda each: each.file.file_size_in_bytes)[:3]:
        with table.io.new_input(task.file.file_path).open() as stream:
            for batch in projected_row_groups(scan, task, stream, None, batch_rows=rows):
                return batch.slice(0, rows)
    return None


def validate_step(table: Table, step: DataStep) -> None:
    """Check ``step`` against ``table`` (its current schema and a few of its rows); nothing is written.

    Raises:
        InvalidDataStepError: An unknown kind, a column the table lacks (with the closest name), a
            ``where`` that is blank or does not parse or bind, a nested column or a name that is not a
            string to set, a literal of the wrong type, a function that raises or returns the wrong length
            or type, a backfill of a required column.
    """
    if step.kind not in KINDS:
        raise InvalidDataStepError(
            f"Data step {step.step_id!r} has kind {step.kind!r}; the kinds are {', '.join(KINDS)}.",
            table=step.table_name,
            expected=", ".join(KINDS),
            got=str(step.kind),
        )
    schema = table.metadata.schema()
    _check_where(step, schema)
    _check_assignments(step, schema)
    functions = {column: value for column, value in step.assignments.items() if callable(value)}
    if not functions:
        return
    batch = probe_batch(table)
    if batch is None:
        return
    for column, function in functions.items():
        try:
            values = computed_values(function, batch, column, arrow_type_of(schema, column), step.table_name)
        except InvalidDataStepError:
            raise
        except Exception as exc:
            raise InvalidDataStepError(
                f"The function for {step.table_name}.{column} raised {type(exc).__name__} on {batch.num_rows} rows "
                f"of the table: {exc}",
                table=step.table_name,
                column=column,
                expected="a function of a pyarrow.RecordBatch returning a pyarrow.Array",
                got=type(exc).__name__,
            ) from exc
        if values.null_count and schema.find_field(column).required:
            raise InvalidDataStepError(
                f"The function for {step.table_name}.{column} returned nulls; column {column} is required.",
                table=step.table_name,
                column=column,
                expected="no null",
                got=f"{values.null_count} nulls in {len(values)} values",
            )
