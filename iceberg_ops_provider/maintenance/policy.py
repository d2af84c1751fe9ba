"""A table's maintenance policy, read from its properties so every engine and catalog copy sees the same one.

Iceberg's own keys where Iceberg defines one (target sizes, snapshot retention); keys under
:data:`PREFIX` for the rest. :data:`KEYS` defines each key once: its property name, default (what
maintenance does without a policy), and what it accepts. :func:`table_policy` reads the effective
policy of a table, each value with where it came from; a bad value raises
:class:`~iceberg_ops_provider.errors.MaintenancePolicyError` naming the key and what it accepts. The
policy produces the :class:`HealthThresholds` a health report judges the table by and the arguments
of the maintenance calls (``docs/maintenance/policy.md``).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

from pydantic import TypeAdapter, ValidationError
from pyiceberg.table import TableProperties

from iceberg_ops_provider.core.name_hints import closest
from iceberg_ops_provider.core.retrying import lost_races
from iceberg_ops_provider.errors import MaintenancePolicyError
from iceberg_ops_provider.maintenance.expire import (
    DEFAULT_MAX_SNAPSHOT_AGE_MS,
    MAX_SNAPSHOT_AGE_MS,
    MIN_SNAPSHOTS_TO_KEEP,
)
from iceberg_ops_provider.maintenance.health_thresholds import HealthThresholds, threshold_type
from iceberg_ops_provider.maintenance.manifests import DEFAULT_TARGET_SIZE, TARGET_SIZE_PROPERTY
from iceberg_ops_provider.maintenance.orphans import DEFAULT_OLDER_THAN
from iceberg_ops_provider.maintenance.times import parse_age_ms

if TYPE_CHECKING:
    from pyiceberg.table import Table

__all__ = [
    "ENABLED_KEY",
    "KEYS",
    "PREFIX",
    "MaintenancePolicy",
    "PolicyChange",
    "PolicyKey",
    "PolicyValue",
    "check_policy_properties",
    "policy_key",
    "set_table_policy",
    "table_policy",
]

PREFIX = "iceberg-ops.maintenance."
"""The prefix of the policy keys Iceberg defines no property for."""

ENABLED_KEY = f"{PREFIX}enabled"
"""The key that turns a table's maintenance off (``false``)."""

_DEFAULTS = HealthThresholds()

SET_ATTEMPTS = 8
"""Commits :func:`set_table_policy` tries, each on a fresh read, when other writers keep committing first."""

LONG_MAX = 2**63 - 1
"""The largest value of an Iceberg key other engines read as a long (Java's ``Long.parseLong``)."""

INT_MAX = 2**31 - 1
"""The largest value of an Iceberg key other engines read as an int (``history.expire.min-snapshots-to-keep``)."""

_WHOLE = re.compile(r"-?[0-9]+")


def _whole(text: str) -> int:
    """``text`` as an integer in ASCII digits: ``int`` also takes ``1_000`` and other scripts' digits, Java does not."""
    stripped = text.strip()
    if not _WHOLE.fullmatch(stripped):
        raise ValueError(text)
    return int(stripped)


@dataclass(frozen=True)
class PolicyKey:
    """One key of the policy: its table property, the policy field it sets, its default and what it accepts.

    ``parse`` turns the property's text into the field's value, raising ``ValueError`` for text it does
    not accept; ``text`` writes a value back as property text.
    """

    property: str
    name: str
    default: Any
    accepted: str
    parse: Callable[[str], Any]
    text: Callable[[Any], str] = str
    description: str = ""

    @property
    def iceberg(self) -> bool:
        """Whether Iceberg defines the key (other engines read it too), rather than iceberg-ops."""
        return not self.property.startswith(PREFIX)


def _checked(kind: Any) -> Callable[[str], Any]:
    """A parser of property text into ``kind`` (a :mod:`.health_thresholds` type), its bounds enforced by pydantic."""
    adapter: TypeAdapter[Any] = TypeAdapter(kind)
    number = float if "number" in kind.__metadata__[-1].description else _whole

    def parse(text: str) -> Any:
        try:
            return adapter.validate_python(number(text.strip()))
        except (ValueError, ValidationError):
            raise ValueError(text) from None

    return parse


def _boolean(text: str) -> bool:
    lowered = text.strip().lower()
    if lowered not in ("true", "false"):
        raise ValueError(text)
    return lowered == "true"


def _optional(parse: Callable[[str], Any]) -> Callable[[str], Any]:
    def maybe(text: str) -> Any:
        return None if text.strip().lower() == "none" else parse(text)

    return maybe


def _age(text: str) -> timedelta:
    return timedelta(milliseconds=parse_age_ms(text.strip()))


def _age_text(age: timedelta) -> str:
    seconds = int(age.total_seconds())
    for unit, length in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds and seconds % length == 0:
            return f"{seconds // length}{unit}"
    return f"{int(age.total_seconds() * 1000)}"


def _quiet_hours(text: str) -> tuple[tuple[int, int], ...]:
    """``01-05,22-23`` as ``((1, 5), (22, 23))``; empty or ``none``: no quiet hours."""
    if text.strip().lower() in ("", "none"):
        return ()
    ranges = []
    for part in text.split(","):
        start, dash, end = part.strip().partition("-")
        if not dash or not all(_WHOLE.fullmatch(hour.strip()) for hour in (start, end)):
            raise ValueError(text)
        first, last = int(start), int(end)
        if not (0 <= first <= 23 and 0 <= last <= 24) or first == last:
            raise ValueError(text)
        ranges.append((first, last))
    return tuple(ranges)


def _hours_text(ranges: tuple[tuple[int, int], ...]) -> str:
    return ",".join(f"{start:02d}-{end:02d}" for start, end in ranges) or "none"


def _integer(minimum: int, maximum: int | None = None) -> Callable[[str], int]:
    """A parser of an integer from ``minimum`` to ``maximum`` (a size or an age no health threshold shares)."""

    def parse(text: str) -> int:
        value = _whole(text)
        if value < minimum or (maximum is not None and value > maximum):
            raise ValueError(text)
        return value

    return parse


def _at_most(parse: Callable[[str], int], maximum: int) -> Callable[[str], int]:
    def bounded(text: str) -> int:
        value = parse(text)
        if value > maximum:
            raise ValueError(text)
        return value

    return bounded


_positive_bytes = _integer(1)
_iceberg_bytes = _integer(1, LONG_MAX)


KEYS: tuple[PolicyKey, ...] = (
    PolicyKey(
        ENABLED_KEY,
        "enabled",
        True,
        "true or false",
        _boolean,
        lambda value: str(value).lower(),
        "false: no maintenance runs on the table and the health report recommends none",
    ),
    PolicyKey(
        TableProperties.WRITE_TARGET_FILE_SIZE_BYTES,
        "target_file_size_bytes",
        TableProperties.WRITE_TARGET_FILE_SIZE_BYTES_DEFAULT,
        "an integer >= 1 (bytes) and < 2^63",
        _iceberg_bytes,
        description="the size compaction writes; data files under 75% of it are small",
    ),
    PolicyKey(
        TARGET_SIZE_PROPERTY,
        "target_manifest_size_bytes",
        DEFAULT_TARGET_SIZE,
        "an integer >= 1 (bytes) and < 2^63",
        _iceberg_bytes,
        description="the size a manifest rewrite writes; smaller manifests count towards one",
    ),
    PolicyKey(
        MAX_SNAPSHOT_AGE_MS,
        "max_snapshot_age_ms",
        DEFAULT_MAX_SNAPSHOT_AGE_MS,
        "an integer >= 0 (milliseconds) and < 2^63",
        _integer(0, LONG_MAX),
        description="snapshots older than this are expired (unless kept by min-snapshots-to-keep or a ref)",
    ),
    PolicyKey(
        MIN_SNAPSHOTS_TO_KEEP,
        "min_snapshots_to_keep",
        _DEFAULTS.retain_last,
        "an integer >= 1 and < 2^31",
        _at_most(_checked(threshold_type("retain_last")), INT_MAX),
        description="the latest snapshots of each branch an expiry keeps whatever their age",
    ),
    PolicyKey(
        f"{PREFIX}min-input-files",
        "min_input_files",
        _DEFAULTS.min_input_files,
        threshold_type("min_input_files").__metadata__[-1].description,
        _checked(threshold_type("min_input_files")),
        description="a partition with fewer small files is not compacted",
    ),
    PolicyKey(
        f"{PREFIX}small-file-share",
        "small_file_share",
        _DEFAULTS.max_small_file_ratio,
        threshold_type("max_small_file_ratio").__metadata__[-1].description,
        _checked(threshold_type("max_small_file_ratio")),
        description="a partition calls for compaction once more than this share of its files is small",
    ),
    PolicyKey(
        f"{PREFIX}orphan-age",
        "orphan_age",
        DEFAULT_OLDER_THAN,
        "a positive age such as 3d, 12h or 30m, or milliseconds",
        _age,
        _age_text,
        "orphan removal deletes only unreferenced files older than this",
    ),
    PolicyKey(
        f"{PREFIX}quiet-hours",
        "quiet_hours",
        (),
        "UTC hour ranges START-END (0-23, END up to 24, END before START wraps midnight), comma-separated, "
        "e.g. 01-05,22-02; or none",
        _quiet_hours,
        _hours_text,
        "no maintenance starts on the table during these hours (UTC)",
    ),
    PolicyKey(
        f"{PREFIX}max-rewrite-bytes",
        "max_rewrite_bytes",
        None,
        "an integer >= 1 (bytes), or none for no limit",
        _optional(_positive_bytes),
        lambda value: "none" if value is None else str(value),
        "a compaction run rewrites at most this many bytes; the rest waits for the next run",
    ),
)
"""Every key of the policy, in the order ``policy show`` lists them."""

_THRESHOLDS = {
    "min_input_files": "min_input_files",
    "small_file_share": "max_small_file_ratio",
    "min_snapshots_to_keep": "retain_last",
}
"""Each policy field a :class:`HealthThresholds` field takes over (the target sizes are read from the table)."""

_BY_PROPERTY = {key.property: key for key in KEYS}
_SHORT = {key.property.removeprefix(PREFIX): key for key in KEYS if not key.iceberg}


def policy_key(name: str) -> PolicyKey:
    """The key ``name`` names: a property of :data:`KEYS`, or one of ours without :data:`PREFIX` (``quiet-hours``).

    Raises:
        MaintenancePolicyError: No key of that name (``closest`` names the nearest one).
    """
    key = _BY_PROPERTY.get(name) or _SHORT.get(name)
    if key is None:
        raise _unknown([name])
    return key


def _unknown(names: list[str], table: str = "") -> MaintenancePolicyError:
    known = [*_BY_PROPERTY, *_SHORT]
    problems = []
    for name in names:
        guess = closest(name, known)
        if guess is not None:
            guess = (_BY_PROPERTY.get(guess) or _SHORT[guess]).property
        problems.append((name, None, "", guess))
    words = "; ".join(
        f"{name!r} is not a maintenance policy key" + (f" (did you mean {guess!r}?)" if guess else "")
        for name, _, _, guess in problems
    )
    return MaintenancePolicyError(
        f"{table + ': ' if table else ''}{words}. The keys are {', '.join(_BY_PROPERTY)}.",
        table=table,
        problems=problems,
    )


@dataclass(frozen=True)
class PolicyValue:
    """One effective value of a table's policy: the key, the value, and ``source``: ``default`` or the property."""

    key: PolicyKey
    value: Any
    source: str

    def to_json(self) -> dict[str, Any]:
        """JSON-able form: property key, value as property text and as JSON, source, what it accepts."""
        value = self.value
        if isinstance(value, timedelta):
            value = value.total_seconds()
        elif isinstance(value, tuple):
            value = [list(hours) for hours in value]
        return {
            "key": self.key.property,
            "value": value,
            "text": self.key.text(self.value),
            "source": self.source,
            "default": self.key.text(self.key.default),
            "accepted": self.key.accepted,
            "iceberg": self.key.iceberg,
            "description": self.key.description,
        }


@dataclass(frozen=True)
class MaintenancePolicy:
    """The effective maintenance policy of a table: each :data:`KEYS` value, and where it came from.

    ``sources`` maps each field to ``default`` or the property key it was read from.
    """

    table: str = ""
    enabled: bool = True
    target_file_size_bytes: int = TableProperties.WRITE_TARGET_FILE_SIZE_BYTES_DEFAULT
    target_manifest_size_bytes: int = DEFAULT_TARGET_SIZE
    max_snapshot_age_ms: int = DEFAULT_MAX_SNAPSHOT_AGE_MS
    min_snapshots_to_keep: int = _DEFAULTS.retain_last
    min_input_files: int = _DEFAULTS.min_input_files
    small_file_share: float = _DEFAULTS.max_small_file_ratio
    orphan_age: timedelta = DEFAULT_OLDER_THAN
    quiet_hours: tuple[tuple[int, int], ...] = ()
    max_rewrite_bytes: int | None = None
    sources: Mapping[str, str] = field(default_factory=dict, compare=False)

    def values(self) -> list[PolicyValue]:
        """Every key's effective value with its source, in the order of :data:`KEYS`."""
        return [PolicyValue(key, getattr(self, key.name), self.sources.get(key.name, "default")) for key in KEYS]

    def quiet_at(self, moment: datetime | None = None) -> bool:
        """Whether ``moment`` (default now; naive is UTC) falls in the quiet hours."""
        moment = datetime.now(UTC) if moment is None else moment
        moment = moment.replace(tzinfo=UTC) if moment.tzinfo is None else moment.astimezone(UTC)
        hour = moment.hour
        return any(
            start <= hour < end if start < end else hour >= start or hour < end for start, end in self.quiet_hours
        )

    def skip_reason(self, moment: datetime | None = None) -> str | None:
        """Why no maintenance should run on the table at ``moment``: ``disabled``, ``quiet_hours``, or ``None``."""
        if not self.enabled:
            return "disabled"
        if self.quiet_at(moment):
            return "quiet_hours"
        return None

    def thresholds(self, base: HealthThresholds | None = None) -> HealthThresholds:
        """The :class:`HealthThresholds` this policy judges the table by, over ``base`` (default: the defaults).

        The policy's keys replace the base's matching fields only when a property set them, so thresholds a
        caller passed win over the policy's defaults.
        """
        base = HealthThresholds() if base is None else base
        changes = {
            threshold: getattr(self, name)
            for name, threshold in _THRESHOLDS.items()
            if self.sources.get(name, "default") != "default"
        }
        return replace(base, **changes) if changes else base

    def to_json(self) -> dict[str, Any]:
        """JSON-able form: the table, whether maintenance would run now, and each key's value and source."""
        return {
            "table": self.table,
            "enabled": self.enabled,
            "quiet_now": self.quiet_at(),
            "values": [value.to_json() for value in self.values()],
        }


def table_policy(table: Table | Mapping[str, str], name: str = "") -> MaintenancePolicy:
    """The effective maintenance policy of ``table`` (a PyIceberg table, or its properties with ``name``).

    Raises:
        MaintenancePolicyError: A policy property holds a value its key does not accept, or a property under
            :data:`PREFIX` is no key (a misspelt key would otherwise be ignored); every problem is listed.
    """
    if isinstance(table, Mapping):
        properties = table
    else:
        properties = table.metadata.properties
        name = name or ".".join(table.name())
    unknown = [key for key in properties if key.startswith(PREFIX) and key not in _BY_PROPERTY]
    if unknown:
        raise _unknown(sorted(unknown), name)
    values: dict[str, Any] = {}
    sources: dict[str, str] = {}
    problems = []
    for key in KEYS:
        raw = properties.get(key.property)
        if raw is None:
            continue
        try:
            values[key.name] = key.parse(str(raw))
        except ValueError:
            problems.append((key.property, raw, key.accepted, None))
            continue
        sources[key.name] = key.property
    if problems:
        raise _bad(problems, name)
    return MaintenancePolicy(table=name, sources=sources, **values)


def _bad(problems: list[tuple[str, Any, str, str | None]], table: str) -> MaintenancePolicyError:
    words = "; ".join(f"{key}={value!r} is not accepted: it takes {accepted}" for key, value, accepted, _ in problems)
    return MaintenancePolicyError(
        f"{table + ': ' if table else ''}maintenance policy: {words}.", table=table, problems=problems
    )


def check_policy_properties(
    updates: Mapping[str, Any], *, table: str = "", short_names: bool = False
) -> dict[str, str | None]:
    """Check property updates that touch the policy: each value as its key accepts it; nothing else is changed.

    Args:
        updates: Property keys and values (``None`` or ``""``: remove the property, so the default applies).
            Keys that are no policy key and not under :data:`PREFIX` pass through unchecked.
        table: The table, for the error.
        short_names: Also take our keys without :data:`PREFIX` (``quiet-hours``), and refuse any key that
            is no policy key (for a command that sets only the policy).

    Returns:
        The updates with full property keys, values as property text (``None``: remove).

    Raises:
        MaintenancePolicyError: An unknown key under :data:`PREFIX` (or any, with ``short_names``), or a value
            its key does not accept; every problem is listed.
    """
    checked: dict[str, str | None] = {}
    unknown: list[str] = []
    problems = []
    named: dict[str, str] = {}
    for given, value in updates.items():
        key = _BY_PROPERTY.get(given) or (_SHORT.get(given) if short_names else None)
        if key is None:
            if short_names or given.startswith(PREFIX):
                unknown.append(given)
            else:
                checked[given] = None if value is None else str(value)
            continue
        if key.property in named:  # its full and its short name: which value was meant is not known
            twice = f"one value, not two: it was given twice, as {named[key.property]!r} and {given!r}"
            problems.append((key.property, value, twice, None))
            continue
        named[key.property] = given
        if value is None or str(value) == "":
            checked[key.property] = None
            continue
        text = str(value).lower() if isinstance(value, bool) else str(value)
        try:
            key.parse(text)
        except ValueError:
            problems.append((key.property, value, key.accepted, None))
            continue
        checked[key.property] = text.strip()  # as other engines parse it (Java's parseLong takes no blank)
    if unknown:
        raise _unknown(unknown, table)
    if problems:
        raise _bad(problems, table)
    return checked


@dataclass(frozen=True)
class PolicyChange:
    """What :func:`set_table_policy` changed: properties set (key: text) and removed, in one commit (or none)."""

    table: str
    set: Mapping[str, str]
    removed: tuple[str, ...]
    unchanged: tuple[str, ...]

    @property
    def committed(self) -> bool:
        """Whether a commit was made (``False``: every property already held what was asked)."""
        return bool(self.set or self.removed)

    def to_json(self) -> dict[str, Any]:
        """JSON-able form."""
        return {
            "table": self.table,
            "set": dict(self.set),
            "removed": list(self.removed),
            "unchanged": list(self.unchanged),
            "committed": self.committed,
        }


def set_table_policy(table: Table, updates: Mapping[str, Any]) -> PolicyChange:
    """Set (or, with ``None`` or ``""``, remove) policy keys of ``table`` in one commit, after checking them all.

    Keys are full property keys, or ours without :data:`PREFIX`; any other key is refused. A removed key's
    default applies again. Nothing is committed when every property already holds what was asked. A commit
    that loses to another writer's (another ``policy set``, an append) is tried again on a fresh read of the
    table, up to :data:`SET_ATTEMPTS` times.

    Raises:
        MaintenancePolicyError: An unknown key (with the closest one) or a value its key does not accept;
            nothing was changed.
        CommitFailedException: Every attempt lost (or whatever else the catalog raised); nothing was changed.
    """
    name = ".".join(table.name())
    checked = check_policy_properties(updates, table=name, short_names=True)
    for attempt in lost_races(SET_ATTEMPTS, what=f"setting the maintenance policy of {name}"):
        with attempt:
            if attempt.retry_state.attempt_number > 1:
                table.refresh()
            properties = table.metadata.properties
            sets = {key: value for key, value in checked.items() if value is not None and properties.get(key) != value}
            removed = tuple(key for key, value in checked.items() if value is None and key in properties)
            unchanged = tuple(key for key in checked if key not in sets and key not in removed)
            if sets or removed:
                with table.transaction() as transaction:
                    if sets:
                        transaction.set_properties(sets)
                    if removed:
                        transaction.remove_properties(*removed)
            return PolicyChange(name, sets, removed, unchanged)
    raise AssertionError("unreachable")  # pragma: no cover
