"""The arguments of a maintenance call, resolved from a Polaris policy, with where each one came from.

For every parameter the first of these that gives a value wins, and the winner is recorded and logged:

1. an explicit argument (``overrides[policy type][parameter]``), source ``argument``;
2. the policy's content, source ``policy <name>``;
3. the table property, source ``table property <key>``;
4. the default (Iceberg's, or the function's), source ``default``.

Polaris keeps ``config`` values as strings (``Map<String,String>`` on the server), so ``"1"``, ``"2.5"`` and
``"true"`` are read as numbers and booleans where the parameter is one; a value that cannot be read is a
:class:`~iceberg_ops_provider.errors.PolicyContentError` naming the policy, the key and the value. Config keys
are matched with ``-`` and ``_`` as the same character (``min-input-files`` is ``min_input_files``).
Keys that map to nothing here are reported as *not applied* (known, with the reason) or *unknown*
(logged as a warning); neither is dropped silently.

Types: ``expiry`` is ``system.snapshot-expiry`` -> ``expire_snapshots``; ``compaction`` is
``system.data-compaction`` -> ``compact_small_files_streaming``; ``manifests`` is ``system.metadata-compaction``
-> ``rewrite_manifests``; ``orphans`` is ``system.orphan-file-removal`` -> ``remove_orphan_files``.

==========  ==========================  ===========================  ====================================  ============
Type        Argument                    Policy key                   Table property                        Default
==========  ==========================  ===========================  ====================================  ============
expiry      retain_last                 min_snapshot_to_keep         history.expire.min-snapshots-to-keep  1
            older_than                  max_snapshot_age_days        history.expire.max-snapshot-age-ms    now - 5 d
            delete_files                -                            -                                     true
compaction  target_file_size_bytes      target_file_size_bytes       write.target-file-size-bytes          512 MiB
            strategy                    compaction_strategy          -                                     binpack
            min_input_files             min_input_files              -                                     5
            where                       where                        -                                     every file
manifests   target_manifest_size_bytes  target_manifest_size_bytes   commit.manifest.target-size-bytes     8 MiB
orphans     older_than                  max_orphan_file_age_in_days  -                                     now - 3 d
            locations                   locations                    -                                     whole table
==========  ==========================  ===========================  ====================================  ============

Policy keys are in ``config``, except orphan removal's, which are top-level fields of the content. Days
become a cut-off of ``now`` minus that many days, and ``history.expire.max-snapshot-age-ms`` one of ``now``
minus that many milliseconds. ``compaction_strategy`` takes ``bin-pack`` or ``binpack`` (-> ``binpack``) and
``sort``; ``where`` is a PyIceberg filter. Orphan removal runs once per location, each of which must lie
under the table's location (a policy naming any other is refused before anything is listed).

Known but not applied (reported with the reason): ``config.max_ref_age_days`` of snapshot expiry
(``expire_snapshots`` takes no ref age: it applies ``history.expire.max-ref-age-ms`` and each ref's own
``max-ref-age-ms``), ``config.max-concurrent-file-group-rewrites`` of data compaction (groups commit one
by one), ``config.spec_id`` of metadata compaction (every spec's manifests are rewritten) and
``config.prefix_mismatch_mode`` of orphan-file removal (equivalent schemes are always compared as one).

An explicit ``older_than`` is a datetime (naive is UTC), a ``timedelta`` before the run's ``now``, or what
:func:`~iceberg_ops_provider.maintenance.times.parse_older_than` reads (ages such as ``"7d"`` count from the clock).
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from types import MappingProxyType
from typing import Any

from pyiceberg.table import TableProperties

from iceberg_ops_provider.errors import MaintenanceError, PolarisRequestError, PolicyContentError
from iceberg_ops_provider.maintenance.expire import MAX_SNAPSHOT_AGE_MS, MIN_SNAPSHOTS_TO_KEEP
from iceberg_ops_provider.maintenance.manifests import DEFAULT_TARGET_SIZE, TARGET_SIZE_PROPERTY
from iceberg_ops_provider.maintenance.orphans import DEFAULT_OLDER_THAN
from iceberg_ops_provider.maintenance.times import parse_older_than
from iceberg_ops_provider.polaris.policies import Policy, PolicyType

__all__ = [
    "ARGUMENT",
    "DEFAULT",
    "MAPPINGS",
    "ParameterSpec",
    "PolicyMapping",
    "ResolvedParameter",
    "ResolvedParameters",
    "check_overrides",
    "json_ready",
    "resolve_parameters",
]

log = logging.getLogger(__name__)

ARGUMENT = "argument"
"""The source of a value passed explicitly (``overrides``)."""

DEFAULT = "default"
"""The source of a value nothing else gave."""

MIN_ORPHAN_AGE_DAYS = 1.0
"""The youngest orphan file age a policy may ask for (explicit arguments may go lower)."""
_DEFAULT_SNAPSHOT_AGE = timedelta(days=5)  # Iceberg's history.expire.max-snapshot-age-ms default
_DEFAULT_MIN_INPUT_FILES = 5  # compact_small_files_streaming's own default
_STRATEGIES = {"binpack": "binpack", "bin-pack": "binpack", "bin_pack": "binpack", "sort": "sort"}


class _Invalid(Exception):
    """A value that does not fit a parameter; the message says what the parameter takes."""


def json_ready(value: Any) -> Any:
    """``value`` as JSON can hold it: datetimes as ISO text, tuples as lists."""
    if isinstance(value, datetime):
        return value.isoformat()
    return [json_ready(item) for item in value] if isinstance(value, tuple | list) else value


def _whole(minimum: int) -> Callable[[Any, datetime], int]:
    """A whole number of at least ``minimum``, from an int, an integral float or their text."""
    expected = f"a whole number of at least {minimum}"

    def coerce(value: Any, now: datetime) -> int:
        number: float | int
        if isinstance(value, bool):
            raise _Invalid(expected)
        if isinstance(value, int | float):
            number = value
        elif isinstance(value, str):
            try:
                number = float(value.strip())
            except ValueError:
                raise _Invalid(expected) from None
        else:
            raise _Invalid(expected)
        if not math.isfinite(number) or number != int(number) or number < minimum:
            raise _Invalid(expected)
        return int(number)

    return coerce


def _before(now: datetime, age: timedelta | float, unit: str = "days") -> datetime:
    """``now`` minus ``age``; an age reaching before year 1 is no limit at all (the earliest time)."""
    try:
        return now - (age if isinstance(age, timedelta) else timedelta(**{unit: age}))
    except OverflowError:
        return datetime.min.replace(tzinfo=UTC)


def _days(value: Any, minimum: float) -> float:
    expected = f"a number of days of at least {minimum:g} (such as 3 or 2.5)"
    if isinstance(value, bool) or not isinstance(value, int | float | str):
        raise _Invalid(expected)
    try:
        days = float(value.strip()) if isinstance(value, str) else float(value)
    except (ValueError, OverflowError):
        raise _Invalid(expected) from None
    if not math.isfinite(days) or days < minimum:
        raise _Invalid(expected)
    return days


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
        raise _Invalid("true or false")
    return text == "true"


def _strategy(value: Any, now: datetime) -> str:
    text = value.strip().lower() if isinstance(value, str) else None
    if text not in _STRATEGIES:
        raise _Invalid("one of 'bin-pack' (or 'binpack') and 'sort'")
    return _STRATEGIES[text]


def _filter(value: Any, now: datetime) -> str:
    if not isinstance(value, str) or not value.strip():
        raise _Invalid("a PyIceberg filter such as \"day >= '2026-11-01'\"")
    return value.strip()


def _locations(value: Any, now: datetime) -> tuple[str, ...]:
    items = [value] if isinstance(value, str) else value
    if (
        not isinstance(items, list | tuple)
        or not items
        or not all(isinstance(item, str) and item.strip() for item in items)
    ):
        raise _Invalid("a non-empty list of locations under the table's location")
    return tuple(item.strip() for item in items)


def _cutoff(value: Any, now: datetime) -> datetime:
    """An explicit ``older_than``: a timedelta counts back from the run's ``now``."""
    if isinstance(value, timedelta):
        if value < timedelta(0):
            raise _Invalid("an age of at least 0 (a negative timedelta is a cut-off in the future)")
        return _before(now, value)
    expected = "a datetime, a timedelta, an age such as '7d' or an ISO timestamp such as '2026-11-01T00:00:00+00:00'"
    if not isinstance(value, datetime | str) or (isinstance(value, str) and not value.strip()):
        raise _Invalid(expected)
    try:
        parsed = parse_older_than(value)
    except ValueError:
        raise _Invalid(expected) from None
    assert parsed is not None  # only None gives None
    return parsed


@dataclass(frozen=True)
class ParameterSpec:
    """One argument of a maintenance function and where its value may come from.

    Attributes:
        name: The function's argument (also the key of ``overrides``).
        coerce: Reads a value given as an argument or in the policy (raises on a bad one).
        default: The value when nothing else gives one, from the run's ``now`` and the table's location.
        policy_key: The policy's key (in ``config``, or at the top level when ``top_level``).
        top_level: Whether ``policy_key`` is a top-level field of the content (orphan-file removal).
        policy_coerce: Reads the policy's value when it differs from ``coerce`` (days into a cut-off).
        table_property: The table property consulted after the policy.
        property_coerce: Reads the table property's text.
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
    """How one policy type becomes a maintenance call.

    Attributes:
        policy_type: The Polaris policy type.
        function: The maintenance function's name.
        parameters: The arguments it takes from the policy.
        not_applied: Config keys known for the type but not applied here, with the reason.
    """

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
    ),
    {
        "max_concurrent_file_group_rewrites": "groups are written on two threads and committed one by one; there is "
        "no concurrency setting"
    },
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


def _key(text: str) -> str:
    return text.replace("-", "_")


@dataclass(frozen=True)
class ResolvedParameter:
    """One argument's value and where it came from.

    Attributes:
        name: The function's argument.
        value: The value passed.
        source: ``argument``, ``policy <name>``, ``table property <key>`` or ``default``.
        key: The policy content key or table property read (``None`` for an argument or a default).
        given: The value as it was written there, before it was read (``"2"`` days, ``"86400000"`` ms).
    """

    name: str
    value: Any
    source: str
    key: str | None = None
    given: Any = None

    def to_json(self) -> dict[str, Any]:
        """JSON-ready form: ``value``, ``source``, ``key`` and ``given``."""
        return {
            "value": json_ready(self.value),
            "source": self.source,
            "key": self.key,
            "given": json_ready(self.given),
        }


@dataclass(frozen=True)
class ResolvedParameters:
    """Every argument of one maintenance call, with the policy keys that were not used.

    Attributes:
        policy_type: The policy type.
        function: The maintenance function called.
        parameters: Each argument, in the function's order.
        unknown_keys: Config keys that mean nothing here (logged as warnings).
        not_applied: Known config keys that are not applied, with the reason.
        notes: Anything else worth knowing about the values (a table property that still limits them).
    """

    policy_type: PolicyType
    function: str
    parameters: Mapping[str, ResolvedParameter]
    unknown_keys: tuple[str, ...] = ()
    not_applied: Mapping[str, str] = field(default_factory=dict)
    notes: tuple[str, ...] = ()

    def to_json(self) -> dict[str, Any]:
        """JSON-ready form."""
        return {
            "function": self.function,
            "parameters": {name: parameter.to_json() for name, parameter in self.parameters.items()},
            "unknown_keys": list(self.unknown_keys),
            "not_applied": dict(self.not_applied),
            "notes": list(self.notes),
        }


def check_overrides(
    overrides: Mapping[Any, Mapping[str, Any]] | None, now: datetime
) -> dict[PolicyType, dict[str, tuple[Any, Any]]]:
    """Check explicit arguments up front and read them: ``{type: {argument: (as given, value)}}``.

    Args:
        overrides: ``{policy type: {argument: value}}``; types as :class:`PolicyType` or their strings,
            arguments by the maintenance function's names (``retain_last``, ``older_than``, ...).
        now: The run's time (a ``timedelta`` ``older_than`` counts back from it).

    Raises:
        PolarisRequestError: An unknown type or argument, or a value the argument cannot take.
    """
    checked: dict[PolicyType, dict[str, tuple[Any, Any]]] = {}
    for raw_type, arguments in (overrides or {}).items():
        try:
            policy_type = PolicyType(raw_type)
        except ValueError:
            raise PolarisRequestError(
                f"overrides names the policy type {raw_type!r}, which is not a maintenance policy type; use one of "
                f"{', '.join(member.value for member in PolicyType)}."
            ) from None
        mapping = MAPPINGS[policy_type]
        if not isinstance(arguments, Mapping):
            raise PolarisRequestError(
                f"overrides[{policy_type.value!r}] must be a mapping of argument names to values, not {arguments!r}."
            )
        taken = ", ".join(spec.name for spec in mapping.parameters)
        for name, value in arguments.items():
            spec = mapping.spec(name)
            if spec is None:
                by_key = next(
                    (s.name for s in mapping.parameters if s.policy_key and _key(s.policy_key) == _key(name)), None
                )
                hint = f" (the policy key {name!r} is the argument {by_key!r})" if by_key else ""
                raise PolarisRequestError(
                    f"overrides[{policy_type.value!r}] has the argument {name!r}, which {mapping.function} does not "
                    f"take from a policy{hint}; use one of {taken}."
                )
            try:
                checked.setdefault(policy_type, {})[name] = (value, spec.coerce(value, now))
            except _Invalid as exc:
                raise PolarisRequestError(
                    f"overrides[{policy_type.value!r}][{name!r}] = {value!r} cannot be used: {name} takes {exc}."
                ) from None
    return checked


def _config(policy: Policy, policy_type: PolicyType) -> dict[str, tuple[str, Any]]:
    """The policy's config by matching key (``-`` read as ``_``): ``{key: (as written, value)}``."""
    assert policy.content is not None
    config: dict[str, tuple[str, Any]] = {}
    for written, value in policy.content.config.items():
        key = _key(written)
        if key in config:
            raise PolicyContentError(
                f"Policy {policy.name!r} ({policy_type.value}) sets both {config[key][0]!r} and {written!r} in its "
                "config, which mean the same; remove one in Polaris.",
                policy=policy.name,
            )
        config[key] = (written, value)
    return config


def _from_policy(spec: ParameterSpec, policy: Policy, config: Mapping[str, tuple[str, Any]]) -> tuple[str, Any] | None:
    """``(key as written, value)`` of ``spec`` in the policy, if it sets it."""
    if spec.policy_key is None:
        return None
    if spec.top_level:
        assert policy.content is not None
        value = getattr(policy.content, spec.policy_key)
        if value is None:
            return None
        return spec.policy_key, list(value) if isinstance(value, tuple) else value  # as the content has it
    return config.get(_key(spec.policy_key))


def resolve_parameters(
    policy_type: PolicyType,
    policy: Policy,
    *,
    table: str,
    properties: Mapping[str, str],
    table_location: str,
    now: datetime,
    overrides: Mapping[str, tuple[Any, Any]] | None = None,
) -> ResolvedParameters:
    """Resolve every argument of ``policy_type``'s maintenance call for one table, and log which source won.

    Args:
        policy_type: The policy type.
        policy: The effective policy of that type (its content parsed).
        table: The table's name, for logs and messages.
        properties: The table's properties.
        table_location: The table's location (the default of ``locations``).
        now: The run's time: ages become cut-offs before it.
        overrides: Explicit arguments, as :func:`check_overrides` returns them for this type.

    Raises:
        PolicyContentError: A policy value that cannot be read, or two spellings of one config key.
        MaintenanceError: A table property that cannot be read.
    """
    if policy.content is None:
        raise PolicyContentError(
            f"Policy {policy.name!r} has no parsed content, so it cannot drive {policy_type.value}; check its type "
            "and content in Polaris.",
            policy=policy.name,
        )
    now = now if now.tzinfo is not None else now.replace(tzinfo=UTC)
    mapping = MAPPINGS[policy_type]
    config = _config(policy, policy_type)
    overrides = overrides or {}
    resolved: dict[str, ResolvedParameter] = {}
    for spec in mapping.parameters:
        parameter = _resolve(spec, policy, policy_type, config, table, properties, table_location, now, overrides)
        resolved[spec.name] = parameter
        log.info(
            "%s: %s %s=%r from %s", table, policy_type.value, spec.name, json_ready(parameter.value), parameter.source
        )
    used = {_key(spec.policy_key) for spec in mapping.parameters if spec.policy_key and not spec.top_level}
    not_applied = {
        config[key][0]: reason for key, reason in mapping.not_applied.items() if key in config and key not in used
    }
    unknown = tuple(
        written for key, (written, _) in config.items() if key not in used and key not in mapping.not_applied
    )
    if not_applied:
        log.info("%s: %s policy %r: not applied: %s", table, policy_type.value, policy.name, not_applied)
    if unknown:
        log.warning(
            "%s: %s policy %r has config key(s) %s that %s does not know; they are not applied",
            table,
            policy_type.value,
            policy.name,
            ", ".join(map(repr, unknown)),
            mapping.function,
        )
    notes = _notes(policy_type, resolved, properties)
    for note in notes:
        log.warning("%s: %s: %s", table, policy_type.value, note)
    return ResolvedParameters(policy_type, mapping.function, resolved, unknown, not_applied, notes)


def _resolve(
    spec: ParameterSpec,
    policy: Policy,
    policy_type: PolicyType,
    config: Mapping[str, tuple[str, Any]],
    table: str,
    properties: Mapping[str, str],
    table_location: str,
    now: datetime,
    overrides: Mapping[str, tuple[Any, Any]],
) -> ResolvedParameter:
    if spec.name in overrides:
        given, value = overrides[spec.name]
        return ResolvedParameter(spec.name, value, ARGUMENT, given=given)
    found = _from_policy(spec, policy, config)
    if found is not None:
        written, given = found
        try:
            value = (spec.policy_coerce or spec.coerce)(given, now)
        except _Invalid as exc:
            where = written if spec.top_level else f"config {written!r}"
            raise PolicyContentError(
                f"Policy {policy.name!r} ({policy_type.value}) sets {where} to {given!r}, which is not {exc}; "
                f"fix the policy's content in Polaris.",
                policy=policy.name,
            ) from None
        return ResolvedParameter(spec.name, value, f"policy {policy.name}", key=written, given=given)
    if spec.table_property is not None and spec.table_property in properties:
        given = properties[spec.table_property]
        try:
            value = (spec.property_coerce or spec.coerce)(given, now)
        except _Invalid as exc:
            raise MaintenanceError(
                f"Table {table} has the property {spec.table_property}={given!r}, which is not {exc}; fix the "
                f"property, or set {spec.name!r} in the policy or as an argument."
            ) from None
        return ResolvedParameter(
            spec.name, value, f"table property {spec.table_property}", key=spec.table_property, given=given
        )
    return ResolvedParameter(spec.name, spec.default(now, table_location), DEFAULT)


def _notes(
    policy_type: PolicyType, resolved: Mapping[str, ResolvedParameter], properties: Mapping[str, str]
) -> tuple[str, ...]:
    """What still limits the resolved values beyond this module's precedence."""
    if policy_type != PolicyType.SNAPSHOT_EXPIRY:
        return ()
    retain = resolved["retain_last"]
    raw = properties.get(MIN_SNAPSHOTS_TO_KEEP)
    if retain.key == MIN_SNAPSHOTS_TO_KEEP or raw is None:
        return ()
    try:
        floor = int(raw)
    except ValueError:
        return ()
    if floor <= retain.value:
        return ()
    return (
        f"retain_last={retain.value} (from {retain.source}) is below the table property {MIN_SNAPSHOTS_TO_KEEP}="
        f"{floor}, and expire_snapshots keeps at least that many snapshots of each branch; lower the property to "
        "keep fewer",
    )
