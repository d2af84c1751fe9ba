"""Reconcile a source table's columns with a target table's by column NAME, and convert batches accordingly.

PyIceberg matches Arrow fields to a table's columns by field id, so rows read from one table and written
to another would land in the wrong columns when the two tables number their columns differently. The
rules of the pairing are in ``docs/data_mover.md``.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from decimal import Decimal

import pyarrow as pa
from pyiceberg.conversions import from_bytes
from pyiceberg.expressions import BooleanExpression
from pyiceberg.io.pyarrow import schema_to_pyarrow
from pyiceberg.manifest import DataFile
from pyiceberg.schema import Schema, make_compatible_name, sanitize_column_names
from pyiceberg.types import (
    DecimalType,
    DoubleType,
    FloatType,
    IcebergType,
    IntegerType,
    ListType,
    LongType,
    MapType,
    NestedField,
    PrimitiveType,
    StructType,
)

from iceberg_ops_provider.core.name_hints import closest, did_you_mean
from iceberg_ops_provider.data_migration.batch_convert import BatchPlan, FieldNode
from iceberg_ops_provider.data_migration.target_schema import (
    Path,
    Selection,
    rename_references,
    select_columns,
    target_schema_for,
    target_sort_order_for,
    target_spec_for,
)
from iceberg_ops_provider.errors import ReconciliationError
from iceberg_ops_provider.messages import Arg, Message, message

__all__ = ["ColumnMapping", "target_schema_for", "target_spec_for", "target_sort_order_for"]

_FLOAT32_MAX = 3.4028234663852886e38
_MAX_LISTED = 20


@dataclass(frozen=True)
class _FileCheck:
    """A check of each source file's statistics: values fit a narrower type, or no nulls for a required column."""

    source_id: int
    source_type: PrimitiveType
    target_type: PrimitiveType
    source_column: str
    column: str
    nulls: bool  # True: null counts must be 0; False: bounds must fit target_type
    within: str = ""  # "list": inside a list or map; "struct": inside an optional struct

    def problem(self, data_file: DataFile) -> str | Message | None:
        """What is wrong with ``data_file`` for this check, or ``None``."""
        path = data_file.file_path
        values = (data_file.value_counts or {}).get(self.source_id)
        nulls = (data_file.null_value_counts or {}).get(self.source_id)
        if self.nulls:
            if nulls is None:
                return (
                    f"file {path} has no null count for column `{self.source_column}`, so it cannot be shown to hold "
                    f"no nulls for the required target column `{self.column}`. Fix: make `{self.column}` optional "
                    "in the target's schema, or collect column metrics on the source (write.metadata.metrics.default)."
                )
            if nulls > 0:
                counted = ""
                if self.within == "struct":
                    counted = (
                        " (counting the rows where an enclosing struct is null, which statistics cannot tell apart)"
                    )
                fix = f"make `{self.column}` optional in the target's schema"
                if not self.within:
                    fix += ", or leave the null rows out with {where}"
                return message(
                    f"column `{self.source_column}` has {nulls} null(s){counted} in file {path}, but the target "
                    f"column `{self.column}` is required. Fix: {fix}.",
                    where=Arg("where", f"{self.source_column} IS NOT NULL"),
                )
            return None
        low = (data_file.lower_bounds or {}).get(self.source_id)
        high = (data_file.upper_bounds or {}).get(self.source_id)
        if low is None or high is None:
            if values is not None and nulls is not None and nulls >= values:
                return None  # only nulls: no bounds to have
            if self.within == "list":
                return (
                    f"file {path} has no bounds for `{self.source_column}` (Iceberg keeps none for values inside "
                    f"lists and maps), so its values cannot be checked against the target's {self.target_type}. "
                    f"Fix: widen the target column `{self.column}` to {self.source_type}."
                )
            return (
                f"file {path} has no lower/upper bounds for column `{self.source_column}` (its statistics are "
                f"missing), so its values cannot be checked against the target's {self.target_type}. Fix: widen "
                f"the target column `{self.column}` to {self.source_type}, or collect full metrics for the column "
                "on the source (write.metadata.metrics.column.<name>=full) and rewrite its files."
            )
        for bound in (from_bytes(self.source_type, low), from_bytes(self.source_type, high)):
            if not _fits(bound, self.target_type):
                return message(
                    f"value {bound} in column `{self.source_column}` does not fit the target's {self.target_type} "
                    f"(file {path}). Fix: widen the target column `{self.column}` to {self.source_type}, or leave "
                    "the rows that do not fit out with {where}.",
                    where=Arg("where", keyword=True),
                )
        return None


def _fits(value: object, target: PrimitiveType) -> bool:
    if isinstance(target, IntegerType):
        return -(2**31) <= int(value) < 2**31  # type: ignore[call-overload]
    if isinstance(target, FloatType):
        number = float(value)  # type: ignore[arg-type]
        return not math.isfinite(number) or abs(number) <= _FLOAT32_MAX
    if isinstance(target, DecimalType):
        unscaled = int(Decimal(value).scaleb(target.scale))  # type: ignore[arg-type]
        return abs(unscaled) < 10**target.precision
    return True


def _type_change(source: PrimitiveType, target: PrimitiveType) -> str | None:
    """``"same"``, ``"promote"`` (Iceberg allows it), ``"narrow"`` (allowed when the values fit) or ``None``."""
    if source == target:
        return "same"
    pair = (type(source), type(target))
    if pair in ((IntegerType, LongType), (FloatType, DoubleType)):
        return "promote"
    if pair in ((LongType, IntegerType), (DoubleType, FloatType)):
        return "narrow"
    if isinstance(source, DecimalType) and isinstance(target, DecimalType) and source.scale == target.scale:
        return "promote" if target.precision > source.precision else "narrow"
    return None


def _join(parent: str, name: str) -> str:
    return f"{parent}.{name}" if parent else name


class _Builder:
    """Pairs source and target fields by name and collects problems, notes and file checks."""

    def __init__(self, selection: Selection, target: Schema) -> None:
        self.selection = selection
        self.target = target
        self.file_schema = sanitize_column_names(target)
        self.errors: list[str | Message] = []
        self.notes: list[str] = []
        self.checks: list[_FileCheck] = []
        self.moved: dict[int, int] = {}  # source field id -> target field id

    def struct(
        self,
        sources: Sequence[NestedField],
        targets: Sequence[NestedField],
        source_parent: Path,
        target_parent: str,
        within: str = "",
    ) -> tuple[FieldNode, ...]:
        by_name = {f.name: f for f in targets}
        paired: dict[str, tuple[NestedField, Path]] = {}
        for sf in sources:
            path = (*source_parent, sf.name)
            name = self.selection.renames.get(path, sf.name)
            if name in by_name:
                paired[name] = (sf, path)
                if name != sf.name:
                    self.notes.append(f"`{'.'.join(path)}` is written to `{_join(target_parent, name)}` (renamed)")
            else:
                self.errors.append(self._no_target(".".join(path), _join(target_parent, name), targets, source_parent))
        nodes = []
        for tf in targets:
            column = _join(target_parent, tf.name)
            if tf.name in paired:
                sf, path = paired[tf.name]
                nodes.append(self.field(sf, tf, path, column, within))
            elif tf.required:
                self.errors.append(self._no_source(column, target_parent))
            else:
                self.notes.append(f"`{column}` has no source column: filled with nulls")
                nodes.append(self._node(tf, column))
        return tuple(nodes)

    def field(self, sf: NestedField, tf: NestedField, path: Path, column: str, within: str = "") -> FieldNode:
        """Pair one source field with its target field; ``within`` says what encloses them (see ``_FileCheck``)."""
        source_column = ".".join(path)
        self.moved[sf.field_id] = tf.field_id
        st, tt = sf.field_type, tf.field_type
        check_nulls = sf.optional and tf.required
        children: tuple[FieldNode, ...] = ()
        if isinstance(st, PrimitiveType) and isinstance(tt, PrimitiveType):
            change = _type_change(st, tt)
            if change == "promote":
                self.notes.append(f"`{source_column}` is promoted from {st} to {tt}")
            elif change == "narrow":
                self.notes.append(
                    f"`{source_column}` is narrowed from {st} to {tt}: every source file's bounds are checked "
                    "before writing, and every batch is cast with overflow checks"
                    + (" (values are rounded to float precision)" if isinstance(tt, FloatType) else "")
                )
                self.checks.append(_FileCheck(sf.field_id, st, tt, source_column, column, False, within))
            elif change is None:
                self.errors.append(self._incompatible(source_column, st, column, tt))
            if check_nulls:
                self.checks.append(_FileCheck(sf.field_id, st, tt, source_column, column, True, within))
        elif isinstance(st, StructType) and isinstance(tt, StructType):
            children = self.struct(st.fields, tt.fields, path, column, within or ("struct" if sf.optional else ""))
        elif isinstance(st, ListType) and isinstance(tt, ListType):
            element = (*path, "element")
            children = (self.field(st.element_field, tt.element_field, element, f"{column}.element", "list"),)
        elif isinstance(st, MapType) and isinstance(tt, MapType):
            children = (
                self.field(st.key_field, tt.key_field, (*path, "key"), f"{column}.key", "list"),
                self.field(st.value_field, tt.value_field, (*path, "value"), f"{column}.value", "list"),
            )
        else:
            self.errors.append(self._incompatible(source_column, st, column, tt))
        if check_nulls and not isinstance(st, PrimitiveType):
            self.errors.append(
                f"`{source_column}` is optional in the source but `{column}` is required in the target, and Iceberg "
                f"keeps no null counts for {tt} columns to show it holds no nulls. Fix: make `{column}` optional in "
                "the target's schema."
            )
        elif check_nulls:
            self.notes.append(
                f"`{source_column}` is optional in the source and `{column}` required in the target: every source "
                "file's null count is checked before writing, and every batch while copying"
            )
        return self._node(tf, column, sf, source_column, check_nulls, children)

    def _node(
        self,
        tf: NestedField,
        column: str,
        sf: NestedField | None = None,
        source_column: str = "",
        check_nulls: bool = False,
        children: tuple[FieldNode, ...] = (),
    ) -> FieldNode:
        file_field = self.file_schema.find_field(tf.field_id)
        names = tuple(dict.fromkeys((sf.name, make_compatible_name(sf.name)))) if sf is not None else ()
        return FieldNode(
            name=file_field.name,
            field_id=tf.field_id,
            required=tf.required,
            column=column,
            target_type=tf.field_type,
            arrow_type=schema_to_pyarrow(file_field.field_type, include_field_ids=True),
            source_names=names,
            source_column=source_column,
            check_nulls=check_nulls,
            children=children,
        )

    def _no_target(self, source: str, target: str, targets: Sequence[NestedField], parent: Path) -> Message:
        where = f"struct `{'.'.join(parent)}` of the target" if parent else "the target"
        fixes = "{rename}"
        if not parent:
            fixes += f", leave it out with {{columns}}, or add column `{target}` to the target's schema"
        else:
            fixes += f" or add field `{target}` to the target's schema"
        guess = closest(target.rpartition(".")[2], [f.name for f in targets])
        return message(
            f"Source column `{source}` has no column `{target}` in {where} (it has: "
            f"{', '.join(f'`{f.name}`' for f in targets) or 'none'}).{did_you_mean(guess)} Fix: map it to a target "
            f"column with {fixes}.",
            rename=Arg("rename", {source: guess or "<target column>"}),
            columns=Arg("columns", keyword=True),
        )

    def _no_source(self, column: str, parent: str) -> Message:
        hint = ""
        if not parent and column in {f.name for f in self.selection.source.fields}:
            hint = f" The source has `{column}`, but {{columns}} leaves it out: add it."
        return message(
            f"Target column `{column}` is required but no source column maps to it.{hint} Fix: {{rename}} a source "
            f"column to `{column}`, include it in {{columns}}, or make `{column}` optional in the target's schema.",
            rename=Arg("rename", keyword=True),
            columns=Arg("columns", keyword=True),
        )

    @staticmethod
    def _incompatible(source: str, st: IcebergType, target: str, tt: IcebergType) -> Message:
        reason = f"Iceberg cannot convert {st} to {tt}"
        if isinstance(st, DecimalType) and isinstance(tt, DecimalType):
            reason = "a decimal's scale cannot change (old values would read wrong)"
        return message(
            f"Column `{source}` is {st} in the source but `{target}` is {tt} in the target: {reason}. Fix: evolve "
            f"the target column to {st} (or a type {st} promotes to), or leave the column out with {{columns}}.",
            columns=Arg("columns", keyword=True),
        )


class ColumnMapping:
    """How the source's columns are written to the target: paired by name, checked, converted per batch.

    Build it with :meth:`build`. ``source_columns[i]`` (source order) is written to target column
    ``compared_columns[i]`` (the columns compared when verifying); ``file_names`` gives each target
    top-level column's name in converted batches (sanitized as ``pyiceberg.schema.sanitize_column_names`` does).
    """

    def __init__(
        self, source: Schema, target: Schema, selection: Selection, nodes: tuple[FieldNode, ...], builder: _Builder
    ) -> None:
        self.source_schema = source
        self.target_schema = target
        self.source_columns: list[str] = selection.names
        self.compared_columns: list[str] = [".".join(selection.target_path((name,))) for name in selection.names]
        self.file_names: dict[str, str] = {
            f.name: builder.file_schema.find_field(f.field_id).name for f in target.fields
        }
        self._nodes = nodes
        self._notes = list(builder.notes)
        self._checks = tuple(builder.checks)
        self._moved = dict(builder.moved)
        self._plans: list[tuple[pa.Schema, BatchPlan]] = []

    @classmethod
    def build(
        cls,
        source: Schema,
        target: Schema,
        *,
        columns: Sequence[str] | None = None,
        rename: Mapping[str, str] | None = None,
    ) -> ColumnMapping:
        """Pair the source's columns with the target's by name (after ``rename``) and check every pair.

        Raises:
            ReconciliationError: Every problem found, each naming the column and the fix.
        """
        selection = select_columns(source, columns, rename)
        builder = _Builder(selection, target)
        nodes = builder.struct(selection.fields, target.fields, (), "")
        if builder.errors:
            if len(builder.errors) == 1:
                raise ReconciliationError(builder.errors[0])
            raise ReconciliationError(
                "The source's columns cannot be written to the target:\n- " + Message.join("\n- ", builder.errors)
            )
        return cls(source, target, selection, nodes, builder)

    def notes(self) -> list[str]:
        """What the mapping does that a reader should know: renames, promotions, null-filled columns, checks."""
        return list(self._notes)

    def check_files(self, data_files: Iterable[DataFile]) -> None:
        """Check that the narrowed and newly required columns fit, by the source files' bounds and null counts.

        Raises:
            ReconciliationError: Names the column, the file and the offending value or missing statistics.
        """
        if not self._checks:
            return
        problems = []
        for data_file in data_files:
            if data_file.record_count == 0:
                continue
            problems.extend(p for check in self._checks if (p := check.problem(data_file)) is not None)
        if problems:
            more = f"\n- ... and {len(problems) - _MAX_LISTED} more" if len(problems) > _MAX_LISTED else ""
            if len(problems) == 1:
                first = problems[0]
                raise ReconciliationError(
                    first.upper_first() if isinstance(first, Message) else first[0].upper() + first[1:]
                )
            raise ReconciliationError(
                "The source's values do not fit the target:\n- " + Message.join("\n- ", problems[:_MAX_LISTED]) + more
            )

    def convert(self, batch: pa.RecordBatch) -> pa.RecordBatch:
        """Turn a batch read from the source into one written as is into a data file of the target.

        Raises:
            ReconciliationError: The batch lacks a column, a value does not fit a narrowed column, or a
                column that is required in the target holds a null.
        """
        schema = batch.schema
        # A short list compared with equals(): hashing an Arrow schema costs more than the rest of a batch.
        for known, plan in self._plans:
            if known.equals(schema):
                return plan.apply(batch)
        plan = BatchPlan.compile(self._nodes, schema)
        self._plans = [(schema, plan), *self._plans[:15]]
        return plan.apply(batch)

    def target_expression(self, expr: BooleanExpression) -> BooleanExpression:
        """Rewrite a filter on source column names (a move's ``where``) into one on the target's names.

        Raises:
            ReconciliationError: The expression refers to a column the move does not write to the target.
        """
        return rename_references(expr, self.source_schema, self._target_column)

    def _target_column(self, field_id: int, name: str) -> str:
        target_id = self._moved.get(field_id)
        if target_id is None:
            raise ReconciliationError(
                message(
                    f"The filter uses column `{name}`, which the move does not write to the target (moved columns: "
                    f"{', '.join(f'`{c}`' for c in self.source_columns)}): add it to {{columns}}, or filter on moved "
                    "columns.",
                    columns=Arg("columns", keyword=True),
                )
            )
        found = self.target_schema.find_column_name(target_id)
        assert found is not None  # every moved field id is one of the target schema's
        return found
