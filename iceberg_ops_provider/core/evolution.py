"""Schema evolution that allows only what the Iceberg specification allows.

PyIceberg 0.12 accepts a decimal scale change and ``string`` <-> ``binary``; both are refused here
(:class:`~iceberg_ops_provider.errors.ForbiddenPromotionError`), and relaxing required is a choice (docs/core.md).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import pyarrow as pa
from pyiceberg.schema import Schema
from pyiceberg.table import Transaction
from pyiceberg.types import DecimalType, DoubleType, FloatType, IcebergType, IntegerType, LongType, PrimitiveType

from iceberg_ops_provider.core.schema_diff import SchemaChange, SchemaDiff, diff_schemas, field_paths
from iceberg_ops_provider.core.types import as_iceberg_schema
from iceberg_ops_provider.errors import ForbiddenPromotionError, SchemaEvolutionError

if TYPE_CHECKING:
    from pyiceberg.table import Table

__all__ = [
    "EvolutionPlan",
    "check_promotion",
    "evolve_schema",
    "is_allowed_promotion",
    "plan_evolution",
    "promotion_problem",
]


def promotion_problem(old: IcebergType, new: IcebergType) -> str | None:
    """Why changing a column from ``old`` to ``new`` is not allowed, or ``None`` when it is.

    Identical types are allowed (there is nothing to change).
    """
    widened = (isinstance(old, IntegerType) and isinstance(new, LongType)) or (
        isinstance(old, FloatType) and isinstance(new, DoubleType)
    )
    if old == new or widened:
        return None
    if isinstance(old, DecimalType) and isinstance(new, DecimalType):
        if new.scale != old.scale:
            return "a decimal's scale cannot change, because existing values would be read with the wrong scale."
        if new.precision < old.precision:
            return "a decimal's precision can only grow, because existing values may not fit."
        return None
    if not isinstance(old, PrimitiveType) or not isinstance(new, PrimitiveType):
        return "nested types cannot change kind; evolve their fields one by one instead."
    if {str(old), str(new)} == {"string", "binary"}:
        return "string and binary are different types in Iceberg, even though both are stored as bytes."
    if (isinstance(old, LongType) and isinstance(new, IntegerType)) or (
        isinstance(old, DoubleType) and isinstance(new, FloatType)
    ):
        return "types can only be widened, never narrowed, because existing values may not fit."
    return "that is not one of the promotions the Iceberg specification allows."


def is_allowed_promotion(old: IcebergType, new: IcebergType) -> bool:
    """Whether the Iceberg specification allows changing a column from ``old`` to ``new``."""
    return promotion_problem(old, new) is None


def check_promotion(column: str, old: IcebergType, new: IcebergType) -> None:
    """Raise when changing ``column`` from ``old`` to ``new`` is not allowed.

    Raises:
        ForbiddenPromotionError: Names the column, both types and why.
    """
    problem = promotion_problem(old, new)
    if problem is not None:
        raise ForbiddenPromotionError(column, old, new, problem)


@dataclass(frozen=True)
class EvolutionPlan:
    """What :func:`evolve_schema` would ``apply`` (in order), and the differences ``ignored`` on purpose."""

    apply: tuple[SchemaChange, ...]
    ignored: tuple[SchemaChange, ...]

    def __bool__(self) -> bool:
        """True when there is something to apply."""
        return bool(self.apply)


def plan_evolution(
    current: Schema,
    target: Schema | pa.Schema,
    *,
    allow_drop_columns: bool = False,
    relax_required: bool = False,
) -> EvolutionPlan:
    """Work out how to evolve ``current`` towards ``target`` (Arrow or Iceberg), matching columns by name.

    Renames look like a drop plus an add: rename explicitly first. Columns the target lacks are
    dropped only with ``allow_drop_columns`` (else listed in ``ignored``); required columns made
    optional only with ``relax_required``, as Arrow fields are nullable unless said otherwise.

    Raises:
        ForbiddenPromotionError: A column's type would change in a way Iceberg forbids.
        SchemaEvolutionError: The target adds a required column, or makes an optional one required.
    """
    diff: SchemaDiff = diff_schemas(current, target, by="name")
    target_fields = field_paths(as_iceberg_schema(target))
    apply: list[SchemaChange] = []
    ignored: list[SchemaChange] = []
    for change in diff.changes:
        if change.kind == "added":
            if target_fields[change.path].required:
                raise SchemaEvolutionError(
                    f"Cannot add required column {change.column!r}: existing rows have no value for it. "
                    "Add it as optional (nullable), backfill it, then make the data non-null."
                )
            apply.append(change)
        elif change.kind == "removed":
            (apply if allow_drop_columns else ignored).append(change)
        elif change.kind == "type_changed":
            check_promotion(change.column, change.old, change.new)  # type: ignore[arg-type]
            apply.append(change)
        elif change.kind == "required_changed":
            if change.new:
                raise SchemaEvolutionError(
                    f"Cannot make column {change.column!r} required: existing rows may hold nulls and "
                    "the Iceberg specification does not allow optional -> required."
                )
            (apply if relax_required else ignored).append(change)
        elif change.kind == "doc_changed":
            # A target without a doc (an Arrow field without doc metadata) has no opinion about it.
            (apply if change.new else ignored).append(change)
        else:
            ignored.append(change)
    # A parent added or removed takes its children with it: keep only the outermost path.
    outer = {(c.kind, c.path) for c in apply if c.kind in ("added", "removed")}
    apply = [c for c in apply if not any((c.kind, c.path[:n]) in outer for n in range(1, len(c.path)))]
    return EvolutionPlan(tuple(apply), tuple(ignored))


def evolve_schema(
    table: Table | Transaction,
    target: Schema | pa.Schema,
    *,
    allow_drop_columns: bool = False,
    relax_required: bool = False,
) -> EvolutionPlan:
    """Evolve a table's schema towards ``target`` in one schema commit, refusing forbidden changes.

    Applies :func:`plan_evolution`'s plan (returned; empty when the table already matched) to
    ``table``, or to a transaction that commits it later. Nothing is committed when a change is refused.

    Raises:
        ForbiddenPromotionError: A type change Iceberg forbids (decimal scale, string <-> binary, ...).
        SchemaEvolutionError: A required column added, or an optional column made required.
    """
    current = table.table_metadata.schema() if isinstance(table, Transaction) else table.schema()
    plan = plan_evolution(current, target, allow_drop_columns=allow_drop_columns, relax_required=relax_required)
    if not plan:
        return plan
    target_fields = field_paths(as_iceberg_schema(target))
    with table.update_schema() as update:
        for change in plan.apply:
            path = change.path if len(change.path) > 1 else change.path[0]
            if change.kind == "added":
                field = target_fields[change.path]
                update.add_column(path, field.field_type, doc=field.doc)
            elif change.kind == "removed":
                update.delete_column(path)
            elif change.kind == "type_changed":
                update.update_column(path, field_type=change.new)  # type: ignore[arg-type]
            elif change.kind == "required_changed":
                update.make_column_optional(path)
            elif change.kind == "doc_changed":
                update.update_column(path, doc=change.new)  # type: ignore[arg-type]
    return plan
