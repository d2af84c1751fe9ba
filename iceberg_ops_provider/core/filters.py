"""Row filters as the product reads them: a date may stand for a timestamp, as in Spark.

:func:`with_timestamp_dates` reads a date on a ``timestamp(tz)`` column as that day's midnight (UTC
for ``timestamptz``); every ``where`` the engine parses goes through it, so all fronts read filters alike.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from pyiceberg.expressions import (
    AlwaysFalse,
    AlwaysTrue,
    And,
    BooleanExpression,
    LiteralPredicate,
    Not,
    Or,
    Reference,
    SetPredicate,
    UnboundPredicate,
)
from pyiceberg.expressions.literals import StringLiteral
from pyiceberg.expressions.visitors import BooleanExpressionVisitor, bind, visit
from pyiceberg.types import TimestampType, TimestamptzType

from iceberg_ops_provider.core.name_hints import closest

if TYPE_CHECKING:
    from pyiceberg.expressions import BoundPredicate
    from pyiceberg.expressions.literals import Literal
    from pyiceberg.schema import Schema
    from pyiceberg.types import IcebergType

__all__ = ["FILTER_FORM", "ExpressionRewriter", "bind_filter", "syntax_problem", "with_timestamp_dates"]

_DATE = re.compile(r"\d{4}-\d{2}-\d{2}")
_AT_CHAR = re.compile(r"\(at char (\d+)\)")

FILTER_FORM = (
    "Write comparisons of a column with a literal (strings in single quotes), joined with and/or: "
    "\"day >= '2026-11-01' and region in ('eu', 'us')\"."
)
"""What a filter string looks like, for the errors about one that does not parse."""


def syntax_problem(error: Exception) -> str:
    """Where PyIceberg's parser stopped, as `` at character N`` (1-based; empty when it does not say).

    The parser's own message lists its whole grammar, which tells a reader nothing; the position does.
    """
    found = _AT_CHAR.search(str(error))
    return f" at character {int(found.group(1)) + 1}" if found else ""


def with_timestamp_dates(
    expression: BooleanExpression, schema: Schema, *, case_sensitive: bool = True
) -> BooleanExpression:
    """``expression`` with each date compared to a timestamp column written as that day's midnight (UTC for tz).

    Raises:
        ValueError: Such a string, naming the column, the value and the forms accepted.
    """
    return visit(expression, _TimestampDates(schema, case_sensitive))


def bind_filter(expression: BooleanExpression, schema: Schema, *, case_sensitive: bool = True) -> BooleanExpression:
    """``expression`` as :func:`with_timestamp_dates` writes it (unbound), checked by binding it to ``schema``.

    Raises:
        ValueError: A column ``schema`` does not have (with the closest name), or a value its column's type
            cannot take.
    """
    adjusted = with_timestamp_dates(expression, schema, case_sensitive=case_sensitive)
    try:
        bind(schema, adjusted, case_sensitive=case_sensitive)
    except TypeError as exc:  # PyIceberg's literal conversions: "Cannot convert LongLiteral into string"
        raise ValueError(
            f"a value is compared with a column of another type ({exc}): compare each column with a value of "
            "its type, strings in single quotes (customer = '42', not customer = 42)"
        ) from None
    return adjusted


def _timestamp_literal(column: str, field_type: IcebergType, literal: Literal[object]) -> Literal[object]:
    if not isinstance(literal, StringLiteral):
        return literal
    text = literal.value
    zoned = isinstance(field_type, TimestamptzType)
    if _DATE.fullmatch(text):
        return StringLiteral(f"{text}T00:00:00{'+00:00' if zoned else ''}")
    try:
        literal.to(field_type)
    except (ValueError, TypeError) as exc:
        example = "'2026-11-03T10:30:00+00:00'" if zoned else "'2026-11-03T10:30:00'"
        kind = "timestamptz (with a zone)" if zoned else "timestamp (without a zone)"
        raise ValueError(
            f"{text!r} is not a value of column {column!r}, a {kind}: write a date, '2026-11-03' (midnight"
            f"{' UTC' if zoned else ''}), or an ISO 8601 timestamp such as {example} ({exc})"
        ) from None
    return literal


class ExpressionRewriter(BooleanExpressionVisitor[BooleanExpression]):
    """A visitor that rebuilds an expression as it is; subclasses rewrite its predicates."""

    def visit_true(self) -> BooleanExpression:
        """Always true, as it is."""
        return AlwaysTrue()

    def visit_false(self) -> BooleanExpression:
        """Always false, as it is."""
        return AlwaysFalse()

    def visit_not(self, child_result: BooleanExpression) -> BooleanExpression:
        """The negation of the rewritten child."""
        return Not(child_result)

    def visit_and(self, left_result: BooleanExpression, right_result: BooleanExpression) -> BooleanExpression:
        """Both rewritten sides, joined with and."""
        return And(left_result, right_result)

    def visit_or(self, left_result: BooleanExpression, right_result: BooleanExpression) -> BooleanExpression:
        """Both rewritten sides, joined with or."""
        return Or(left_result, right_result)


class _TimestampDates(ExpressionRewriter):
    def __init__(self, schema: Schema, case_sensitive: bool) -> None:
        self.schema = schema
        self.case_sensitive = case_sensitive

    def visit_unbound_predicate(self, predicate: UnboundPredicate) -> BooleanExpression:
        term = predicate.term
        if not isinstance(term, Reference):
            return predicate
        try:
            field = self.schema.find_field(term.name, case_sensitive=self.case_sensitive)
        except ValueError:
            guess = closest(term.name, self.schema.column_names)
            hint = f" (the closest: {guess!r})" if guess else ""
            raise ValueError(f"there is no column {term.name!r}{hint}") from None
        if not isinstance(predicate, LiteralPredicate | SetPredicate):
            return predicate
        if not isinstance(field.field_type, TimestampType | TimestamptzType):
            return predicate
        if isinstance(predicate, LiteralPredicate):
            return type(predicate)(term, _timestamp_literal(term.name, field.field_type, predicate.literal))
        return type(predicate)(term, {_timestamp_literal(term.name, field.field_type, v) for v in predicate.literals})

    def visit_bound_predicate(self, predicate: BoundPredicate) -> BooleanExpression:
        return predicate
