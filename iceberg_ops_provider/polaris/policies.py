"""Apache Polaris policies as typed values: the four maintenance policy types and their content.

Polaris sends a policy's ``content`` as a JSON string; :meth:`PolicyContent.parse` checks it against the
type's content schema (version ``2025-02-03``) as Polaris's own validator does.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from types import MappingProxyType
from typing import Any

from iceberg_ops_provider.errors import PolicyContentError

__all__ = [
    "CONTENT_VERSION",
    "ApplicablePolicy",
    "ConfigValue",
    "Policy",
    "PolicyContent",
    "PolicyType",
]

CONTENT_VERSION = "2025-02-03"
"""The only content schema version Polaris 1.x knows for its predefined policy types."""

ConfigValue = str | int | float | bool
"""A value of a policy's ``config`` (Polaris's schema allows strings, numbers and booleans)."""


class PolicyType(StrEnum):
    """Polaris's predefined maintenance policy types (all inheritable)."""

    DATA_COMPACTION = "system.data-compaction"
    METADATA_COMPACTION = "system.metadata-compaction"
    ORPHAN_FILE_REMOVAL = "system.orphan-file-removal"
    SNAPSHOT_EXPIRY = "system.snapshot-expiry"


_ORPHAN_FIELDS = ("max_orphan_file_age_in_days", "locations")


def _refuse(message: str, policy: str) -> PolicyContentError:
    return PolicyContentError(
        f"Policy {policy!r}: {message}. Fix the policy's content (it must be a JSON object like "
        f'{{"version": "{CONTENT_VERSION}", "enable": true, "config": {{...}}}}).',
        policy=policy,
    )


@dataclass(frozen=True)
class PolicyContent:
    """The parsed ``content`` of a maintenance policy (the orphan fields only for orphan-file removal)."""

    enable: bool
    config: Mapping[str, ConfigValue] = field(default_factory=dict)
    version: str = CONTENT_VERSION
    max_orphan_file_age_in_days: float | None = None
    locations: tuple[str, ...] | None = None

    @classmethod
    def parse(cls, policy_type: str, content: str | Mapping[str, Any] | None, *, policy: str = "") -> PolicyContent:
        """Read and check ``content`` (Polaris's JSON string, or its already decoded object).

        Raises:
            PolicyContentError: Not JSON, not an object, or not valid for the type's content schema.
        """
        if content is None or (isinstance(content, str) and not content.strip()):
            raise _refuse("has no content", policy)
        if isinstance(content, str):
            try:
                decoded = json.loads(content)
            except json.JSONDecodeError as exc:
                raise _refuse(f"its content is not JSON ({exc.msg} at character {exc.pos})", policy) from None
            except RecursionError:
                raise _refuse("its content nests too deeply to be a policy", policy) from None
            if isinstance(decoded, str):  # content that was JSON-encoded twice
                raise _refuse("its content is a JSON string, not an object (was it encoded twice?)", policy)
        else:
            decoded = content
        if not isinstance(decoded, Mapping):
            raise _refuse(f"its content is a JSON {type(decoded).__name__}, not an object", policy)
        orphans = policy_type == PolicyType.ORPHAN_FILE_REMOVAL
        allowed = {"version", "enable", "config", *(_ORPHAN_FIELDS if orphans else ())}
        unknown = sorted(set(decoded) - allowed)
        if unknown:
            raise _refuse(
                f"its content has the unknown key(s) {', '.join(map(repr, unknown))} "
                f"(a {policy_type} policy allows {', '.join(sorted(allowed))}; settings go inside config)",
                policy,
            )
        if "enable" not in decoded:
            raise _refuse("its content lacks the required key 'enable'", policy)
        enable = decoded["enable"]
        if not isinstance(enable, bool):
            raise _refuse(f"'enable' must be true or false (a JSON boolean), not {enable!r}", policy)
        version = decoded.get("version")
        if version is None or version == "":  # Polaris reads a null or empty version as the default one
            version = CONTENT_VERSION
        if version != CONTENT_VERSION:
            raise _refuse(f"'version' must be {CONTENT_VERSION!r}, not {version!r}", policy)
        config = {} if decoded.get("config") is None else decoded["config"]
        if not isinstance(config, Mapping):
            raise _refuse(f"'config' must be an object, not {config!r}", policy)
        for key, value in config.items():
            if not isinstance(value, (str, int, float, bool)):
                raise _refuse(f"config key {key!r} must be a string, number or boolean, not {value!r}", policy)
        age = decoded.get("max_orphan_file_age_in_days")
        if isinstance(age, str):  # Polaris's own parser accepts a number written as text
            with contextlib.suppress(ValueError):
                age = float(age.strip())
        if age is not None and (isinstance(age, bool) or not isinstance(age, (int, float)) or age < 0):
            raise _refuse(f"'max_orphan_file_age_in_days' must be a number of days, not {age!r}", policy)
        locations = decoded.get("locations")
        if locations is not None and (
            not isinstance(locations, list) or not all(isinstance(item, str) and item for item in locations)
        ):
            raise _refuse(f"'locations' must be a list of locations, not {locations!r}", policy)
        return cls(
            enable=enable,
            config=MappingProxyType(dict(config)),
            version=version,
            max_orphan_file_age_in_days=age,
            locations=tuple(locations) if locations is not None else None,
        )

    def to_json(self) -> dict[str, Any]:
        """The content as Polaris stores it (decoded), for logs and XCom."""
        data: dict[str, Any] = {"version": self.version, "enable": self.enable, "config": dict(self.config)}
        if self.max_orphan_file_age_in_days is not None:
            data["max_orphan_file_age_in_days"] = self.max_orphan_file_age_in_days
        if self.locations is not None:
            data["locations"] = list(self.locations)
        return data


def _not_polaris(what: str, policy: str, where: str) -> PolicyContentError:
    return PolicyContentError(
        f"Polaris answered {what} at {where or 'an unknown URL'}. Is this a Polaris 1.x policy endpoint?",
        policy=policy,
        url=where,
    )


def _policy_version(value: Any, name: str, where: str) -> int:
    if value is not None and (isinstance(value, bool) or not isinstance(value, int)):
        raise _not_polaris(f"policy {name!r} with the version {value!r}, not a whole number", name, where)
    return value or 0


def _flag(payload: Mapping[str, Any], key: str, default: bool, policy: str, where: str) -> bool:
    """A boolean field of Polaris's policy JSON (``"false"`` as text is false, not a non-empty string)."""
    value = payload.get(key, default)
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.strip().lower() in ("true", "false"):
        return value.strip().lower() == "true"
    raise _not_polaris(f"policy {policy!r} with {key}={value!r}, not true or false", policy, where)


@dataclass(frozen=True)
class Policy:
    """A policy as Polaris's ``loadPolicy`` returns it.

    ``content`` is ``None`` for a type this project does not know, or, read leniently, for invalid content
    (the reason in ``content_error``); ``raw_content`` is the string Polaris sent.
    """

    name: str
    policy_type: str
    inheritable: bool
    content: PolicyContent | None
    raw_content: str | None
    version: int
    description: str | None = None
    content_error: str | None = None

    @property
    def known_type(self) -> bool:
        """Whether the type is one of Polaris's four maintenance types."""
        return self.policy_type in PolicyType._value2member_map_

    @staticmethod
    def _fields(payload: Mapping[str, Any], where: str, lenient: bool = False) -> dict[str, Any]:
        name = payload.get("name")
        policy_type = payload.get("policy-type")
        if not isinstance(name, str) or not isinstance(policy_type, str):
            raise _not_polaris(
                f"a policy without a 'name' or 'policy-type' ({dict(payload)!r})", str(name or ""), where
            )
        raw = payload.get("content")
        known = policy_type in PolicyType._value2member_map_
        content, content_error = None, None
        if known:
            try:
                content = PolicyContent.parse(policy_type, raw, policy=name)
            except PolicyContentError as exc:
                served = f"{exc} Polaris served it at {where}." if where else str(exc)
                if not lenient:
                    raise PolicyContentError(served, policy=name, url=where) from None
                content_error = served
        return {
            "name": name,
            "policy_type": policy_type,
            "inheritable": _flag(payload, "inheritable", True, name, where),
            "content": content,
            "raw_content": raw if isinstance(raw, str) or raw is None else json.dumps(raw),
            "version": _policy_version(payload.get("version"), name, where),
            "description": payload.get("description"),
            "content_error": content_error,
        }

    @classmethod
    def from_json(cls, payload: Mapping[str, Any], where: str = "") -> Policy:
        """A policy from Polaris's JSON (``Policy`` in its OpenAPI spec).

        Raises:
            PolicyContentError: A required field is missing, or the content is invalid for a maintenance type.
        """
        return cls(**cls._fields(payload, where))

    def to_json(self) -> dict[str, Any]:
        """The policy as JSON-ready values, with its content decoded."""
        return {
            "name": self.name,
            "policy_type": self.policy_type,
            "inheritable": self.inheritable,
            "content": self.content.to_json() if self.content is not None else self.raw_content,
            "version": self.version,
            "description": self.description,
        }


@dataclass(frozen=True)
class ApplicablePolicy(Policy):
    """A policy that applies to an entity: ``inherited`` from a parent or not, ``namespace`` where it is defined."""

    inherited: bool = False
    namespace: tuple[str, ...] = ()

    @classmethod
    def from_json(cls, payload: Mapping[str, Any], where: str = "", *, lenient: bool = False) -> ApplicablePolicy:
        """An applicable policy from Polaris's JSON (``lenient``: invalid content kept as ``content_error``).

        Raises:
            PolicyContentError: A required field is missing, or (unless ``lenient``) the content is invalid.
        """
        fields = cls._fields(payload, where, lenient)
        namespace = payload.get("namespace") or []
        if not isinstance(namespace, list) or not all(isinstance(level, str) for level in namespace):
            what = f"policy {fields['name']!r} with a 'namespace' that is not a list of names ({namespace!r})"
            raise _not_polaris(what, fields["name"], where)
        return cls(
            **fields,
            inherited=_flag(payload, "inherited", False, fields["name"], where),
            namespace=tuple(namespace),
        )

    def to_json(self) -> dict[str, Any]:
        """The policy as JSON-ready values, with where it is defined and whether it was inherited."""
        return {**super().to_json(), "inherited": self.inherited, "namespace": list(self.namespace)}
