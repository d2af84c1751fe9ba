"""Partition expressions and sort fields as text."""

from __future__ import annotations

import pytest
from pyiceberg.table.sorting import NullOrder, SortDirection
from pyiceberg.transforms import (
    BucketTransform,
    DayTransform,
    HourTransform,
    IdentityTransform,
    MonthTransform,
    TruncateTransform,
    YearTransform,
)

from iceberg_ops_provider.errors import InvalidOperationError
from iceberg_ops_provider.migration.transforms import parse_partition_expr, parse_sort_field


@pytest.mark.parametrize(
    ("text", "column", "transform"),
    [
        ("col", "col", IdentityTransform()),
        ("identity(col)", "col", IdentityTransform()),
        ("bucket(16, id)", "id", BucketTransform(16)),
        ("truncate( 4 ,name)", "name", TruncateTransform(4)),
        ("year(ts)", "ts", YearTransform()),
        ("months(ts)", "ts", MonthTransform()),
        ("day(ts)", "ts", DayTransform()),
        ("hour(ts)", "ts", HourTransform()),
        ("day(a.b)", "a.b", DayTransform()),
    ],
)
def test_partition_expressions_round_trip(text, column, transform):
    parsed = parse_partition_expr(text)
    assert (parsed.column, parsed.transform) == (column, transform)
    assert parse_partition_expr(str(parsed)) == parsed


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ("", "it is empty"),
        ("bucket(id)", "takes a positive whole number"),
        ("bucket(0, id)", "above zero"),
        ("day(a, b)", "exactly one column"),
        ("weekly(ts)", "unknown transform 'weekly'"),
        ("a b", "neither a column name"),
    ],
)
def test_bad_partition_expressions(text, problem):
    with pytest.raises(InvalidOperationError, match="Cannot read partition expression") as info:
        parse_partition_expr(text)
    assert problem in str(info.value) and "bucket(16, col)" in str(info.value)


@pytest.mark.parametrize(
    ("text", "direction", "nulls"),
    [
        ("ts", SortDirection.ASC, NullOrder.NULLS_FIRST),
        ("ts DESC", SortDirection.DESC, NullOrder.NULLS_LAST),
        ("day(ts) asc nulls last", SortDirection.ASC, NullOrder.NULLS_LAST),
        ("ts desc nulls first", SortDirection.DESC, NullOrder.NULLS_FIRST),
    ],
)
def test_sort_fields(text, direction, nulls):
    parsed = parse_sort_field(text)
    assert (parsed.direction, parsed.null_order) == (direction, nulls)
    assert parse_sort_field(str(parsed)) == parsed
