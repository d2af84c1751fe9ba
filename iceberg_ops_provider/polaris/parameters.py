"""The arguments of a maintenance call, resolved from a Polaris policy, with where each one came from.

Precedence: an explicit argument, the policy's content, the table property, the default (:mod:`.mappings`).
Polaris keeps ``config`` values as strings, so they are read as the parameter's type; config keys match with
``-`` and ``_`` as one. Keys mapping to nothing are reported as not applied or unknown, never dropped silently.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Any

from iceberg_ops_provider.errors import MaintenanceError, PolarisRequestError, PolicyContentError
from iceberg_ops_provider.maintenance.expire import MIN_SNAPSHOTS_TO_KEEP
from iceberg_ops_provider.polaris.mappings import MAPPINGS, InvalidValue, config_key
from iceberg_ops_provider.polaris.policies import Policy, PolicyType

if TYPE_CHECKING:
    from iceberg_ops_provider.polaris.mappings import ParameterSpec

__all__ = [
    "ARGUMENT",
    "DEFAULT",
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


def json_ready(value: Any) -> Any:
    """``value`` as JSON can hold it: datetimes as ISO text, tuples as lists."""
    if isinstance(value, datetime):
        return value.isoformat()
    return [json_ready(item) for item in value] if isinstance(value, tuple | list) else value


@dataclass(frozen=True)
class ResolvedParameter:
    """One argument's value, where it came from (``source``, ``key``), and the value as written there (``given``)."""

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
    """Every argument of one maintenance call, with the config keys not applied (with the reason) or unknown."""

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
    """Check explicit arguments (``{policy type: {argument: value}}``) up front: ``{type: {argument: (given, value)}}``.

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
                by_key = {config_key(s.policy_key): s.name for s in mapping.parameters if s.policy_key}.get(
                    config_key(name)
                )
                hint = f" (the policy key {name!r} is the argument {by_key!r})" if by_key else ""
                raise PolarisRequestError(
                    f"overrides[{policy_type.value!r}] has the argument {name!r}, which {mapping.function} does not "
                    f"take from a policy{hint}; use one of {taken}."
                )
            try:
                checked.setdefault(policy_type, {})[name] = (value, spec.coerce(value, now))
            except InvalidValue as exc:
                raise PolarisRequestError(
                    f"overrides[{policy_type.value!r}][{name!r}] = {value!r} cannot be used: {name} takes {exc}."
                ) from None
    return checked


def _config(policy: Policy, policy_type: PolicyType) -> dict[str, tuple[str, Any]]:
    assert policy.content is not None
    config: dict[str, tuple[str, Any]] = {}
    for written, value in policy.content.config.items():
        key = config_key(written)
        if key in config:
            raise PolicyContentError(
                f"Policy {policy.name!r} ({policy_type.value}) sets both {config[key][0]!r} and {written!r} in its "
                "config, which mean the same; remove one in Polaris.",
                policy=policy.name,
            )
        config[key] = (written, value)
    return config


def _from_policy(spec: ParameterSpec, policy: Policy, config: Mapping[str, tuple[str, Any]]) -> tuple[str, Any] | None:
    if spec.policy_key is None:
        return None
    if spec.top_level:
        assert policy.content is not None
        value = getattr(policy.content, spec.policy_key)
        if value is None:
            return None
        return spec.policy_key, list(value) if isinstance(value, tuple) else value  # as the content has it
    return config.get(config_key(spec.policy_key))


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

    ``overrides`` are :func:`check_overrides`'s for this type (``now``: aware, as the dispatcher's); ``table_location``
    is the default of ``locations``.

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
    mapping = MAPPINGS[policy_type]
    config = _config(policy, policy_type)
    given_overrides = overrides or {}

    def resolve(spec: ParameterSpec) -> ResolvedParameter:
        if spec.name in given_overrides:
            given, value = given_overrides[spec.name]
            return ResolvedParameter(spec.name, value, ARGUMENT, given=given)
        found = _from_policy(spec, policy, config)
        if found is not None:
            written, given = found
            try:
                value = (spec.policy_coerce or spec.coerce)(given, now)
            except InvalidValue as exc:
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
            except InvalidValue as exc:
                raise MaintenanceError(
                    f"Table {table} has the property {spec.table_property}={given!r}, which is not {exc}; fix the "
                    f"property, or set {spec.name!r} in the policy or as an argument."
                ) from None
            return ResolvedParameter(
                spec.name, value, f"table property {spec.table_property}", key=spec.table_property, given=given
            )
        return ResolvedParameter(spec.name, spec.default(now, table_location), DEFAULT)

    resolved: dict[str, ResolvedParameter] = {}
    for spec in mapping.parameters:
        resolved[spec.name] = parameter = resolve(spec)
        log.info(
            "%s: %s %s=%r from %s", table, policy_type.value, spec.name, json_ready(parameter.value), parameter.source
        )
    used = {config_key(spec.policy_key) for spec in mapping.parameters if spec.policy_key and not spec.top_level}
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
