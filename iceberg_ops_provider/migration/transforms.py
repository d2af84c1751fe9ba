"""Partition expressions and sort fields written as text.

``"bucket(16, col)"``, ``"day(ts)"`` (or Spark's plural ``days(ts)``), ``"col desc"``, ``"day(ts) asc nulls last"``;
defaults follow Iceberg and Spark (docs/migrations.md, "What ``ctx`` offers").
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from pyiceberg.table.sorting import NullOrder, SortDirection
from pyiceberg.transforms import (
    BucketTransform,
    DayTransform,
    HourTransform,
    IdentityTransform,
    MonthTransform,
    Transform,
    TruncateTransform,
    VoidTransform,
    YearTransform,
)

from iceberg_ops_provider.errors import InvalidOperationError

__all__ = ["PartitionExpr", "SortExpr", "format_partition_expr", "parse_partition_expr", "parse_sort_field"]

_CALL = re.compile(r"^\s*(?P<name>[A-Za-z_]+)\s*\(\s*(?P<args>[^()]*)\)\s*$")
_COLUMN = re.compile(r"^\s*(?P<column>[A-Za-z_][\w.]*)\s*$")
_UNITS = {"year": YearTransform, "month": MonthTransform, "day": DayTransform, "hour": HourTransform}
_SIMPLE = {"identity": IdentityTransform, "date": DayTransform, "void": VoidTransform}
_SIMPLE |= _UNITS | {f"{unit}s": transform for unit, transform in _UNITS.items()}
_SORT = re.compile(
    r"^\s*(?P<expr>.+?)(?:\s+(?P<direction>asc|desc))?(?:\s+nulls\s+(?P<nulls>first|last))?\s*$", re.IGNORECASE
)

EXAMPLES = (
    "'col', 'identity(col)', 'bucket(16, col)', 'truncate(4, col)', 'year(col)', 'month(col)', 'day(col)', 'hour(col)'"
)


@dataclass(frozen=True)
class PartitionExpr:
    """A parsed partition expression: a source column and the transform applied to it."""

    column: str
    transform: Transform[Any, Any]

    def __str__(self) -> str:
        """The canonical text form, which :func:`parse_partition_expr` reads back."""
        return format_partition_expr(self.column, self.transform)


@dataclass(frozen=True)
class SortExpr:
    """A parsed sort field."""

    column: str
    transform: Transform[Any, Any]
    direction: SortDirection
    null_order: NullOrder

    def __str__(self) -> str:
        """The canonical text form, which :func:`parse_sort_field` reads back."""
        direction = "asc" if self.direction == SortDirection.ASC else "desc"
        nulls = "first" if self.null_order == NullOrder.NULLS_FIRST else "last"
        return f"{format_partition_expr(self.column, self.transform)} {direction} nulls {nulls}"


def _bad(text: str, what: str, problem: str) -> InvalidOperationError:
    return InvalidOperationError(f"Cannot read {what} {text!r}: {problem}. Use one of: {EXAMPLES}.")


def parse_partition_expr(text: str, what: str = "partition expression") -> PartitionExpr:
    """Parse a partition expression such as ``"bucket(16, id)"`` or ``"day(ts)"`` (``what``: how errors name it).

    Raises:
        InvalidOperationError: Not a known transform, or wrong arguments; the message lists the forms.
    """
    if not isinstance(text, str) or not text.strip():
        raise _bad(str(text), what, "it is empty")
    plain = _COLUMN.match(text)
    if plain:
        return PartitionExpr(plain.group("column"), IdentityTransform())
    call = _CALL.match(text)
    if not call:
        raise _bad(text, what, "it is neither a column name nor transform(column)")
    name = call.group("name").lower()
    args = [arg.strip() for arg in call.group("args").split(",")]
    if name in _SIMPLE:
        if len(args) != 1 or not _COLUMN.match(args[0]):
            raise _bad(text, what, f"{name}() takes exactly one column")
        return PartitionExpr(args[0], _SIMPLE[name]())
    if name in ("bucket", "truncate"):
        if len(args) != 2 or not args[0].isdigit() or not _COLUMN.match(args[1]):
            raise _bad(text, what, f"{name}() takes a positive whole number and a column, as in {name}(16, id)")
        number = int(args[0])
        if number <= 0:
            raise _bad(text, what, f"{name}() needs a number above zero")
        transform = BucketTransform(num_buckets=number) if name == "bucket" else TruncateTransform(width=number)
        return PartitionExpr(args[1], transform)
    raise _bad(text, what, f"unknown transform {name!r}")


def format_partition_expr(column: str, transform: Transform[Any, Any]) -> str:
    """Write a source column and a transform as text: ``id``, ``bucket(16, id)``, ``day(ts)``."""
    if isinstance(transform, IdentityTransform):
        return column
    if isinstance(transform, BucketTransform):
        return f"bucket({transform.num_buckets}, {column})"
    if isinstance(transform, TruncateTransform):
        return f"truncate({transform.width}, {column})"
    return f"{transform}({column})"


def parse_sort_field(text: str) -> SortExpr:
    """Parse a sort field such as ``"ts desc"`` or ``"day(ts) asc nulls last"``.

    Raises:
        InvalidOperationError: The expression part is not a column or transform.
    """
    if not isinstance(text, str):
        raise _bad(str(text), "sort field", "it is not text")
    match = _SORT.match(text)
    if not match:
        raise _bad(text, "sort field", "it is empty")
    expr = parse_partition_expr(match.group("expr"), "sort field")
    descending = (match.group("direction") or "asc").lower() == "desc"
    nulls = (match.group("nulls") or ("last" if descending else "first")).lower()
    null_order = NullOrder.NULLS_FIRST if nulls == "first" else NullOrder.NULLS_LAST
    return SortExpr(expr.column, expr.transform, SortDirection.DESC if descending else SortDirection.ASC, null_order)
