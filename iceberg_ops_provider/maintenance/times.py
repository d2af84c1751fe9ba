"""The cut-off times maintenance calls take: a datetime, an age, or an ISO timestamp."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

__all__ = ["parse_age_ms", "parse_older_than"]

_UNITS = {"d": "days", "h": "hours", "m": "minutes", "s": "seconds"}

MAX_AGE_MS = 2**63 - 1
"""The largest age a ref's ``max-ref-age-ms`` holds: a long in the table spec (Java's ``Long.MAX_VALUE``)."""


def parse_older_than(value: datetime | timedelta | str | None, field: str = "older_than") -> datetime | None:
    """A UTC cut-off from a datetime, an age or an ISO timestamp; ``None`` stays ``None``.

    Naive datetimes are UTC; an age (``timedelta``, ``"7d"``, ``"12h"``, ``"30m"``, ``"0s"``) means that
    long before now.

    Raises:
        ValueError: Anything else, naming the forms accepted.
    """
    if value is None:
        return None
    if isinstance(value, datetime):
        return value if value.tzinfo is not None else value.replace(tzinfo=UTC)
    if isinstance(value, timedelta):
        return datetime.now(UTC) - value
    text = str(value).strip()
    if text[-1:] in _UNITS and text[:-1].replace(".", "", 1).isdigit():
        try:
            return datetime.now(UTC) - timedelta(**{_UNITS[text[-1]]: float(text[:-1])})
        except OverflowError:
            raise ValueError(f"{field}={value!r} reaches back before the year 1: pass a shorter age.") from None
    try:
        parsed = datetime.fromisoformat(text)
    except ValueError:
        raise ValueError(
            f"{field}={value!r} is not a time: pass a datetime, a timedelta, an age such as '7d', '12h' or "
            "'30m', or an ISO timestamp such as '2026-11-01T00:00:00+00:00'."
        ) from None
    return parsed if parsed.tzinfo is not None else parsed.replace(tzinfo=UTC)


def parse_age_ms(value: timedelta | int | str, field: str = "max_age") -> int:
    """A positive age in milliseconds from a ``timedelta``, milliseconds, or text: ``"7d"``, ``"12h"``, ``"30m"``.

    Raises:
        ValueError: Anything else, an age that is not positive, or one longer than :data:`MAX_AGE_MS`
            (which the table's metadata cannot hold), naming the forms accepted.
    """
    if isinstance(value, timedelta):
        milliseconds = int(value.total_seconds() * 1000)
    elif isinstance(value, int) and not isinstance(value, bool):
        milliseconds = value
    else:
        text = str(value).strip().lower()
        if text.isdigit():
            milliseconds = int(text)
        elif text[-1:] in _UNITS and text[:-1].replace(".", "", 1).isdigit():
            try:
                milliseconds = int(timedelta(**{_UNITS[text[-1]]: float(text[:-1])}).total_seconds() * 1000)
            except OverflowError:
                milliseconds = MAX_AGE_MS + 1
        else:
            milliseconds = -1
    if milliseconds <= 0:
        raise ValueError(
            f"{field}={value!r} is not an age: pass a positive age such as '7d', '12h' or '30m', or milliseconds."
        )
    if milliseconds > MAX_AGE_MS:
        raise ValueError(
            f"{field}={value!r} is longer than a table's metadata can hold ({MAX_AGE_MS} milliseconds, about "
            "292 million years): pass a shorter age, or none to keep it until dropped."
        )
    return milliseconds
