"""Partition values given as text or Python values, converted as a table's partition transforms store them.

Each key is checked against the current spec and each value converted to what manifests hold (the forms
accepted: docs/sensors.md, ``IcebergPartitionSensor``).
"""

from __future__ import annotations

import datetime as dt
import re
import struct
import uuid
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation
from typing import TYPE_CHECKING, Any

from pyiceberg.expressions import AlwaysTrue, And, BooleanExpression, EqualTo, GreaterThanOrEqual, IsNull, LessThan
from pyiceberg.transforms import (
    BucketTransform,
    DayTransform,
    HourTransform,
    IdentityTransform,
    MonthTransform,
    Transform,
    TruncateTransform,
    YearTransform,
)
from pyiceberg.types import (
    BinaryType,
    DateType,
    DecimalType,
    DoubleType,
    FixedType,
    FloatType,
    IcebergType,
    StringType,
    TimestampNanoType,
    TimestampType,
    TimestamptzNanoType,
    TimestamptzType,
    UUIDType,
)
from pyiceberg.utils.datetime import date_to_days, datetime_to_micros

if TYPE_CHECKING:
    from pyiceberg.manifest import DataFile
    from pyiceberg.partitioning import PartitionField
    from pyiceberg.table import Table

__all__ = ["WantedValue", "file_matches", "pruning_filter", "table_name", "wanted_values"]

_EPOCH = dt.datetime(1970, 1, 1)
_TIMESTAMPS = (TimestampType, TimestamptzType, TimestampNanoType, TimestamptzNanoType)
_NANOS = (TimestampNanoType, TimestamptzNanoType)
_WITH_ZONE = (TimestamptzType, TimestamptzNanoType)
_FLOATS = (FloatType, DoubleType)
_PRECISIONS = ("year", "month", "day", "hour", "instant")
_TIME_TRANSFORMS = {YearTransform: "year", MonthTransform: "month", DayTransform: "day", HourTransform: "hour"}
_TIME_EXAMPLES = {"year": "'2026'", "month": "'2026-01'", "day": "'2026-01-02'", "hour": "'2026-01-02-05'"}
_TIME_FORM = re.compile(r"(\d{4})(?:-(\d{2})(?:-(\d{2})(?:[-T ](\d{2}))?)?)?")  # a year, month, day or hour


@dataclass(frozen=True)
class WantedValue:
    """A wanted partition value as partition records hold it (``accepted``: also rounded to 32 bits for floats)."""

    field: PartitionField
    value: Any
    accepted: tuple[Any, ...] = ()

    def matches(self, held: Any) -> bool:
        """Whether a partition record holding ``held`` is in the wanted partition."""
        if isinstance(self.value, uuid.UUID) and isinstance(held, bytes):
            held = uuid.UUID(bytes=held)
        return held in (self.accepted or (self.value,))


def table_name(table: Table) -> str:
    """``namespace.table`` of a loaded table."""
    return ".".join(table.name())


def wanted_values(table: Table, partition: dict[str, Any]) -> list[WantedValue]:
    """The partition values asked for, checked against the table's current spec and converted."""
    if not isinstance(partition, dict):
        raise ValueError(f"partition must be a mapping of partition field names to values, got {partition!r}.")
    by_name = {field.name: field for field in table.spec().fields}
    schema = table.schema()
    unknown = [key for key in partition if key not in by_name]
    if unknown:
        names = ", ".join(repr(key) for key in unknown)
        verb = "is not a partition field" if len(unknown) == 1 else "are not partition fields"
        shown = [f"{f.name} ({f.transform}({schema.find_column_name(f.source_id)}))" for f in by_name.values()]
        unpartitioned = "it is not partitioned (use where= to filter on columns)"
        listing = "its partition fields are " + ", ".join(shown) if shown else unpartitioned
        raise ValueError(f"{names} {verb} of {table_name(table)}: {listing}.")
    wanted = []
    for key, given in partition.items():
        field = by_name[key]
        source_type = schema.find_field(field.source_id).field_type
        value = _partition_value(field, source_type, given)
        accepted: tuple[Any, ...] = (value,)
        if isinstance(field.transform, IdentityTransform) and isinstance(source_type, _FLOATS) and value is not None:
            accepted = (value, _float32(value))
        wanted.append(WantedValue(field, value, accepted))
    return wanted


def _float32(value: float) -> float:
    """``value`` rounded to the nearest 32-bit float (what a ``float`` column holds)."""
    try:
        return float(struct.unpack("<f", struct.pack("<f", value))[0])
    except (OverflowError, struct.error):
        return value


def _partition_value(field: PartitionField, source_type: IcebergType, given: Any) -> Any:
    """``given`` as the field's transform stores it in partition records."""
    if given is None:
        return None
    transform = field.transform
    precision = _TIME_TRANSFORMS.get(type(transform))
    try:
        if precision is not None:
            return _time_ordinal(transform, precision, given, source_type)
        if isinstance(transform, IdentityTransform):
            return _source_value(source_type, given)
        if isinstance(transform, BucketTransform | TruncateTransform):
            return transform.transform(source_type)(_source_value(source_type, given))
    except (ValueError, TypeError, ArithmeticError, InvalidOperation) as exc:
        raise ValueError(
            f"partition field {field.name!r} ({transform} of a {source_type} column) cannot take {given!r}: {exc}"
        ) from exc
    raise ValueError(
        f"partition field {field.name!r} has the transform {transform}, which partition= cannot match; "
        "use where= on its source column instead."
    )


def _source_value(source_type: IcebergType, given: Any) -> Any:
    """``given`` (text or a Python value) as a value of ``source_type``, in PyIceberg's internal form."""
    from pyiceberg.expressions.literals import literal

    if isinstance(source_type, _TIMESTAMPS):
        instant, precision = _instant(given, source_type)
        if precision in ("year", "month"):
            raise ValueError("expected a timestamp such as '2026-01-02T05:30:00+00:00' (or a date for midnight)")
        return datetime_to_micros(instant) * (1000 if isinstance(source_type, _NANOS) else 1)
    if isinstance(source_type, FloatType):
        return _float32(float(literal(given).to(source_type).value))
    if isinstance(source_type, DateType):
        day = dt.date.fromisoformat(given) if isinstance(given, str) else given
        if isinstance(day, dt.datetime):
            day = day.date()
        if not isinstance(day, dt.date):
            raise ValueError("expected a date such as '2026-01-02'")
        return date_to_days(day)
    if isinstance(source_type, DecimalType):
        number = Decimal(str(given).strip())
        exact = number.quantize(Decimal(1).scaleb(-source_type.scale))
        if exact != number:
            raise ValueError(f"it has more than {source_type.scale} decimal places")
        return exact
    if isinstance(source_type, StringType):
        return str(given)
    if isinstance(source_type, BinaryType | FixedType):
        return given.encode() if isinstance(given, str) else bytes(given)
    if isinstance(source_type, UUIDType):
        return given if isinstance(given, uuid.UUID) else uuid.UUID(str(given))
    return literal(given).to(source_type).value


def _instant(given: Any, source_type: IcebergType) -> tuple[dt.datetime, str]:
    """A naive datetime (UTC; a zero offset only for wall-clock columns) from text, date or datetime; its precision."""
    if isinstance(given, dt.datetime):
        moment, precision = given, "instant"
    elif isinstance(given, dt.date):
        moment, precision = dt.datetime(given.year, given.month, given.day), "day"
    elif isinstance(given, str):
        text = given.strip()
        match = _TIME_FORM.fullmatch(text)
        if match:
            parts = [int(part) for part in match.groups() if part is not None]
            year, month, day, hour = (parts + [1, 1, 0][len(parts) - 1 :])[:4]
            return dt.datetime(year, month, day, hour), _PRECISIONS[len(parts) - 1]
        moment, precision = dt.datetime.fromisoformat(text.replace("Z", "+00:00")), "instant"
    else:
        raise ValueError("expected a date or timestamp such as '2026-01-02' or '2026-01-02T05:30:00+00:00'")
    if moment.tzinfo is not None:
        offset = moment.utcoffset()
        if not isinstance(source_type, _WITH_ZONE) and offset:
            utc_offset = dt.timezone(offset).tzname(None).removeprefix("UTC")  # "UTC+02:00"
            raise ValueError(
                f"a {source_type} column holds wall-clock values without a time zone, so a value with the UTC "
                f"offset {utc_offset} cannot be placed; give the wall-clock value without an offset "
                f"(such as {moment.replace(tzinfo=None).isoformat()!r})"
            )
        moment = moment.astimezone(dt.UTC).replace(tzinfo=None)
    return moment, precision


def _time_ordinal(transform: Transform[Any, int], precision: str, given: Any, source_type: IcebergType) -> int:
    """Years, months, days or hours since the epoch, as the time transforms store them."""
    if precision == "year" and isinstance(given, int) and not isinstance(given, bool):
        given = str(given)
    moment, given_precision = _instant(given, source_type)
    if _PRECISIONS.index(given_precision) < _PRECISIONS.index(precision):
        article = "an" if precision == "hour" else "a"
        raise ValueError(
            f"{article} {precision} partition needs at least {article} {precision}, such as {_TIME_EXAMPLES[precision]}"
        )
    return transform.transform(TimestampType())(datetime_to_micros(moment))


def _time_start(precision: str, ordinal: int) -> dt.datetime:
    """The first instant of a time partition."""
    if precision in ("year", "month"):
        months = ordinal * 12 if precision == "year" else ordinal
        return dt.datetime(1970 + months // 12, months % 12 + 1, 1)
    return _EPOCH + dt.timedelta(**{f"{precision}s": ordinal})


def pruning_filter(table: Table, wanted: list[WantedValue]) -> BooleanExpression:
    """A row filter on the source columns that lets the scan skip manifests and files of other partitions.

    Only an optimisation: the partition records decide. What it cannot express (bucket, truncate,
    nanosecond timestamps, values the column's type does not bind) adds nothing; nor do ``float`` and
    ``double`` identity values, whose partition summaries may hold them rounded to 32 bits.
    """
    from pyiceberg.expressions.visitors import bind

    schema = table.schema()
    expression: BooleanExpression = AlwaysTrue()
    for item in wanted:
        column = schema.find_column_name(item.field.source_id)
        source_type = schema.find_field(item.field.source_id).field_type
        precision = _TIME_TRANSFORMS.get(type(item.field.transform))
        identity = isinstance(item.field.transform, IdentityTransform)
        floats = identity and isinstance(source_type, _FLOATS)
        if column is None or isinstance(source_type, _NANOS) or not (identity or precision) or floats:
            continue
        predicate: BooleanExpression
        if item.value is None:
            predicate = IsNull(column)
        elif identity:
            predicate = EqualTo(column, item.value)
        else:
            low, high = _time_start(precision, item.value), _time_start(precision, item.value + 1)  # type: ignore[arg-type]
            dated = isinstance(source_type, DateType)
            bounds = [date_to_days(moment.date()) if dated else datetime_to_micros(moment) for moment in (low, high)]
            predicate = And(GreaterThanOrEqual(column, bounds[0]), LessThan(column, bounds[1]))
        try:
            bind(schema, predicate, case_sensitive=True)
        except Exception:  # a value this column's type does not bind as a literal: no pruning on it
            continue
        expression = And(expression, predicate)
    return expression


def file_matches(data_file: DataFile, table: Table, wanted: list[WantedValue]) -> bool:
    """Whether ``data_file`` sits in the wanted partition (files of specs without a field do not)."""
    if not wanted:
        return True
    spec = table.specs().get(data_file.spec_id)
    if spec is None:
        return False
    for item in wanted:
        position = next(
            (
                index
                for index, field in enumerate(spec.fields)
                if field.field_id == item.field.field_id
                or (field.source_id == item.field.source_id and field.transform == item.field.transform)
            ),
            None,
        )
        if position is None or not item.matches(data_file.partition[position]):
            return False
    return True
