"""How each maintenance policy type becomes a maintenance call (:data:`MAPPINGS`; the table is in docs/polaris.md).

Per type: the function, and per argument its policy key, table property, default and how a value is read
(:class:`InvalidValue` when it cannot be). Known keys that are not applied are reported with the reason.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from types import MappingProxyType
from typing import Any

from pyiceberg.table import TableProperties

from iceberg_ops_provider.maintenance.expire import MAX_SNAPSHOT_AGE_MS, MIN_SNAPSHOTS_TO_KEEP
from iceberg_ops_provider.maintenance.manifests import DEFAULT_TARGET_SIZE, TARGET_SIZE_PROPERTY
from iceberg_ops_provider.maintenance.orphans import DEFAULT_OLDER_THAN
from iceberg_ops_provider.maintenance.times import parse_older_than
from iceberg_ops_provider.polaris.policies import PolicyType

__all__ = [
    "MAPPINGS",
    "MIN_ORPHAN_AGE_DAYS",
    "InvalidValue",
    "ParameterSpec",
    "PolicyMapping",
    "config_key",
]

MIN_ORPHAN_AGE_DAYS = 1.0
"""The youngest orphan file age a policy may ask for (explicit arguments may go lower)."""
_DEFAULT_SNAPSHOT_AGE = timedelta(days=5)  # Iceberg's history.expire.max-snapshot-age-ms default
_DEFAULT_MIN_INPUT_FILES = 5  # compact_small_files_streaming's own default
_STRATEGIES = {"binpack": "binpack", "bin-pack": "binpack", "bin_pack": "binpack", "sort": "sort"}


class InvalidValue(Exception):
    """A value that does not fit a parameter; the message says what the parameter takes."""


def _number(value: Any, minimum: float, expected: str, *, whole: bool = False) -> float:
    """A number (or its text) of at least ``minimum``, else :class:`InvalidValue` saying ``expected``."""
    if isinstance(value, bool) or not isinstance(value, int | float | str):
        raise InvalidValue(expected)
    try:
        number = float(value.strip()) if isinstance(value, str) else value
        finite = math.isfinite(number)
    except (ValueError, OverflowError):
        raise InvalidValue(expected) from None
    if not finite or number < minimum or (whole and number != int(number)):
        raise InvalidValue(expected)
    return number


def _whole(minimum: int) -> Callable[[Any, datetime], int]:
    return lambda value, now: int(_number(value, minimum, f"a whole number of at least {minimum}", whole=True))


def _before(now: datetime, age: timedelta | float, unit: str = "days") -> datetime:
    """``now`` minus ``age``; an age reaching before year 1 is no limit at all (the earliest time)."""
    try:
        return now - (age if isinstance(age, timedelta) else timedelta(**{unit: age}))
    except OverflowError:
        return datetime.min.replace(tzinfo=UTC)


def _days(value: Any, minimum: float) -> float:
    return float(_number(value, minimum, f"a number of days of at least {minimum:g} (such as 3 or 2.5)"))


def _days_before(value: Any, now: datetime) -> datetime:
    """A number of days (at least 0, from a number or its text) as the cut-off that long before ``now``."""
    return _before(now, _days(value, 0))


def _orphan_days_before(value: Any, now: datetime) -> datetime:
    """An orphan file age from a policy: at least one day.

    A younger cut-off deletes the files of writes still in flight (staged, not yet committed), and
    the table breaks when they commit; Spark's procedure refuses less than a day for the same
    reason. A shorter age can only be asked for as an explicit argument.
    """
    return _before(now, _days(value, MIN_ORPHAN_AGE_DAYS))


def _flag(value: Any, now: datetime) -> bool:
    if isinstance(value, bool):
        return value
    text = value.strip().lower() if isinstance(value, str) else None
    if text not in ("true", "false"):
        raise InvalidValue("true or false")
    return text == "true"


def _strategy(value: Any, now: datetime) -> str:
    text = value.strip().lower() if isinstance(value, str) else None
    if text not in _STRATEGIES:
        raise InvalidValue("one of 'bin-pack' (or 'binpack') and 'sort'")
    return _STRATEGIES[text]


def _filter(value: Any, now: datetime) -> str:
    if not isinstance(value, str) or not value.strip():
        raise InvalidValue("a PyIceberg filter such as \"day >= '2026-11-01'\"")
    return value.strip()


def _locations(value: Any, now: datetime) -> tuple[str, ...]:
    items = [value] if isinstance(value, str) else value
    if (
        not isinstance(items, list | tuple)
        or not items
        or not all(isinstance(item, str) and item.strip() for item in items)
    ):
        raise InvalidValue("a non-empty list of locations under the table's location")
    return tuple(item.strip() for item in items)


def _cutoff(value: Any, now: datetime) -> datetime:
    """An explicit ``older_than``: a timedelta counts back from the run's ``now``."""
    if isinstance(value, timedelta):
        if value < timedelta(0):
            raise InvalidValue("an age of at least 0 (a negative timedelta is a cut-off in the future)")
        return _before(now, value)
    expected = "a datetime, a timedelta, an age such as '7d' or an ISO timestamp such as '2026-11-01T00:00:00+00:00'"
    if not isinstance(value, datetime | str) or (isinstance(value, str) and not value.strip()):
        raise InvalidValue(expected)
    try:
        parsed = parse_older_than(value)
    except ValueError:
        raise InvalidValue(expected) from None
    assert parsed is not None  # only None gives None
    return parsed


@dataclass(frozen=True)
class ParameterSpec:
    """One argument of a maintenance function and where its value may come from.

    ``coerce`` reads an argument or policy value (``policy_coerce`` when the policy's differs: days into a
    cut-off); ``top_level``: ``policy_key`` is a field of the content, not of ``config``.
    """

    name: str
    coerce: Callable[[Any, datetime], Any]
    default: Callable[[datetime, str], Any]
    policy_key: str | None = None
    top_level: bool = False
    policy_coerce: Callable[[Any, datetime], Any] | None = None
    table_property: str | None = None
    property_coerce: Callable[[Any, datetime], Any] | None = None


@dataclass(frozen=True)
class PolicyMapping:
    """How one policy type becomes a maintenance call; ``not_applied``: known config keys, with why they are not."""

    policy_type: PolicyType
    function: str
    parameters: tuple[ParameterSpec, ...]
    not_applied: Mapping[str, str] = field(default_factory=dict)

    def spec(self, name: str) -> ParameterSpec | None:
        """The parameter called ``name``, if the function takes it."""
        return next((spec for spec in self.parameters if spec.name == name), None)


def _constant(value: Any) -> Callable[[datetime, str], Any]:
    return lambda now, location: value


_TOP_LEVEL = "it is a top-level field of the content, next to config; move it there"

_EXPIRY = PolicyMapping(
    PolicyType.SNAPSHOT_EXPIRY,
    "expire_snapshots",
    (
        ParameterSpec(
            "retain_last", _whole(1), _constant(1), "min_snapshot_to_keep", table_property=MIN_SNAPSHOTS_TO_KEEP
        ),
        ParameterSpec(
            "older_than",
            _cutoff,
            lambda now, location: now - _DEFAULT_SNAPSHOT_AGE,
            "max_snapshot_age_days",
            policy_coerce=_days_before,
            table_property=MAX_SNAPSHOT_AGE_MS,
            property_coerce=lambda value, now: _before(now, _whole(0)(value, now), "milliseconds"),
        ),
        ParameterSpec("delete_files", _flag, _constant(True)),
    ),
    {
        "max_ref_age_days": "expire_snapshots takes no ref age: it removes branches and tags past the table property "
        "history.expire.max-ref-age-ms or their own max-ref-age-ms; set that instead"
    },
)
_COMPACTION = PolicyMapping(
    PolicyType.DATA_COMPACTION,
    "compact_small_files_streaming",
    (
        ParameterSpec(
            "target_file_size_bytes",
            _whole(1),
            _constant(TableProperties.WRITE_TARGET_FILE_SIZE_BYTES_DEFAULT),
            "target_file_size_bytes",
            table_property=TableProperties.WRITE_TARGET_FILE_SIZE_BYTES,
        ),
        ParameterSpec("strategy", _strategy, _constant("binpack"), "compaction_strategy"),
        ParameterSpec("min_input_files", _whole(1), _constant(_DEFAULT_MIN_INPUT_FILES), "min_input_files"),
        ParameterSpec("where", _filter, _constant(None), "where"),
        ParameterSpec("max_concurrent_groups", _whole(1), _constant(None), "max_concurrent_file_group_rewrites"),
    ),
)
_MANIFESTS = PolicyMapping(
    PolicyType.METADATA_COMPACTION,
    "rewrite_manifests",
    (
        ParameterSpec(
            "target_manifest_size_bytes",
            _whole(1),
            _constant(DEFAULT_TARGET_SIZE),
            "target_manifest_size_bytes",
            table_property=TARGET_SIZE_PROPERTY,
        ),
    ),
    {"spec_id": "rewrite_manifests rewrites the small manifests of every partition spec"},
)
_ORPHANS = PolicyMapping(
    PolicyType.ORPHAN_FILE_REMOVAL,
    "remove_orphan_files",
    (
        ParameterSpec(
            "older_than",
            _cutoff,
            lambda now, location: now - DEFAULT_OLDER_THAN,
            "max_orphan_file_age_in_days",
            top_level=True,
            policy_coerce=_orphan_days_before,
        ),
        ParameterSpec("locations", _locations, lambda now, location: (location,), "locations", top_level=True),
    ),
    {
        "prefix_mismatch_mode": "locations are compared with equivalent schemes (s3, s3a, s3n; file) as one, and "
        "files outside the table's location are never listed",
        "max_orphan_file_age_in_days": _TOP_LEVEL,
        "locations": _TOP_LEVEL,
    },
)

MAPPINGS: Mapping[PolicyType, PolicyMapping] = MappingProxyType(
    {mapping.policy_type: mapping for mapping in (_COMPACTION, _MANIFESTS, _EXPIRY, _ORPHANS)}
)
"""Every maintenance policy type and how it maps to a function (the table in this module's docstring)."""


def config_key(text: str) -> str:
    """A config key as it is matched: ``-`` read as ``_`` (``min-input-files`` is ``min_input_files``)."""
    return text.replace("-", "_")
