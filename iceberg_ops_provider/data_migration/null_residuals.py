"""When a scan task's "always true" residual can be trusted for a file's null values.

PyIceberg 0.12 gives a null partition value an always-true residual for a negated predicate (``!=``,
``not in``...), although the filter keeps no null row (``docs/data_mover.md``, files copied as they are).
"""

from __future__ import annotations

from pyiceberg.expressions import (
    And,
    BooleanExpression,
    BoundNotEqualTo,
    BoundNotIn,
    BoundNotNaN,
    BoundNotStartsWith,
    Or,
)
from pyiceberg.expressions.visitors import rewrite_not
from pyiceberg.manifest import DataFile

__all__ = ["negated_field_ids", "residual_holds"]

_NEGATED = (BoundNotEqualTo, BoundNotIn, BoundNotStartsWith, BoundNotNaN)


def negated_field_ids(bound_filter: BooleanExpression) -> frozenset[int]:
    """The field ids read by the negated predicates of ``bound_filter`` (a filter bound to the source schema).

    ``not`` is pushed down first, as PyIceberg does before it computes residuals: ``not (x = 1)``
    counts as ``x != 1``, and ``not (x != 1)`` as ``x = 1``.
    """
    ids: set[int] = set()

    def walk(expression: BooleanExpression) -> None:
        if isinstance(expression, And | Or):
            walk(expression.left)
            walk(expression.right)
        elif isinstance(expression, _NEGATED):
            ids.add(expression.term.ref().field.field_id)

    walk(rewrite_not(bound_filter))
    return frozenset(ids)


def residual_holds(data_file: DataFile, negated_ids: frozenset[int]) -> bool:
    """Whether an always-true residual of ``data_file`` really keeps all its rows.

    True when no negated predicate reads a column, or the file's null counts say each column they
    read holds no null (a count that is missing means it may).
    """
    if not negated_ids:
        return True
    counts = data_file.null_value_counts or {}
    return all(counts.get(field_id) == 0 for field_id in negated_ids)
