"""The policy client's arguments, checked before anything is sent and put in the form Polaris's API takes."""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from typing import Any, Literal

from iceberg_ops_provider.errors import PolarisRequestError, PolicyContentError
from iceberg_ops_provider.polaris.policies import PolicyContent, PolicyType

__all__ = [
    "SEPARATOR",
    "TARGETS",
    "NamespaceLike",
    "TargetType",
    "attachment_target",
    "check_name",
    "check_policy_type",
    "content_text",
    "namespace_levels",
]

TargetType = Literal["catalog", "namespace", "table-like"]
"""What a policy is attached to (Polaris's ``PolicyAttachmentTarget.type``)."""

NamespaceLike = str | Sequence[str]
"""A namespace as ``"a.b"`` or ``("a", "b")`` (the tuple form allows dots inside a level)."""

SEPARATOR = "\x1f"
_NAME = re.compile(r"^[A-Za-z0-9_-]+$")
TARGETS = {
    "catalog": ("the catalog", "CATALOG"),
    "namespace": ("namespace", "NAMESPACE"),
    "table-like": ("table", "TABLE"),
}
"""Each attachment target type: how a message names it, and the entity its privileges name."""


def namespace_levels(value: NamespaceLike, what: str = "namespace") -> tuple[str, ...]:
    """The levels of a namespace given as ``"a.b"`` or a sequence, checked (``what`` names it in messages)."""
    if isinstance(value, str):
        levels = tuple(value.split(".")) if value else ()
    elif isinstance(value, Sequence):
        levels = tuple(value)
    else:
        raise PolarisRequestError(f"The {what} must be 'a.b' or a sequence of levels like ('a', 'b'), not {value!r}.")
    if not levels:
        raise PolarisRequestError(f"The {what} is empty: name at least one level, like 'sales' or ('sales',).")
    for level in levels:
        if not isinstance(level, str) or not level:
            raise PolarisRequestError(f"The {what} {value!r} has an empty or non-text level: every level needs a name.")
        if SEPARATOR in level:
            raise PolarisRequestError(f"The {what} {value!r} contains the 0x1F unit separator, which Polaris reserves.")
    return levels


def check_name(name: object) -> str:
    """``name`` if Polaris accepts it as a policy name, else a :class:`PolarisRequestError`."""
    if not isinstance(name, str) or not _NAME.match(name):
        raise PolarisRequestError(
            f"Invalid policy name {name!r}: Polaris allows only letters, digits, '-' and '_' "
            "(pattern ^[A-Za-z0-9\\-_]+$)."
        )
    return name


def check_policy_type(policy_type: object) -> str:
    """``policy_type`` if it is a non-empty string, else a :class:`PolarisRequestError`."""
    if not isinstance(policy_type, str) or not policy_type.strip():
        known = ", ".join(member.value for member in PolicyType)
        raise PolarisRequestError(f"The policy type must be a non-empty string such as {known}; not {policy_type!r}.")
    return policy_type


def attachment_target(target_type: str, path: NamespaceLike) -> dict[str, Any]:
    """Polaris's ``PolicyAttachmentTarget`` (``{"type", "path"}``) for a target type and path, checked."""
    if target_type not in TARGETS:
        raise PolarisRequestError(f"target_type must be one of {', '.join(TARGETS)}, not {target_type!r}.")
    if target_type == "catalog":
        if path not in ((), [], "", None):
            raise PolarisRequestError(f"A catalog target takes no path (got {path!r}); the catalog is the client's.")
        return {"type": "catalog", "path": []}
    levels = namespace_levels(path, what=f"{target_type} path")
    if target_type == "table-like" and len(levels) < 2:
        raise PolarisRequestError(
            f"A table-like target's path is its namespace levels followed by its name, like 'sales.orders'; "
            f"got {path!r}."
        )
    return {"type": target_type, "path": list(levels)}


def _json_value(value: Any) -> Any:
    """``json.dumps`` fallback: read-only mappings and tuples as plain JSON."""
    if isinstance(value, Mapping):
        return dict(value)
    if isinstance(value, (set, frozenset)):
        return sorted(value)
    raise TypeError(f"{type(value).__name__} is not JSON")


def content_text(policy_type: str, content: Mapping[str, Any] | PolicyContent | str | None, name: str) -> str:
    """Policy content as the JSON text Polaris stores, checked against the type's schema for maintenance types."""
    if isinstance(content, PolicyContent):
        return json.dumps(content.to_json())
    if not isinstance(content, (str, Mapping)):
        raise PolarisRequestError(
            f"Policy {name!r}: content must be a mapping, a PolicyContent or its JSON text, "
            f"not {type(content).__name__}."
        )
    if policy_type in PolicyType._value2member_map_:
        try:
            PolicyContent.parse(policy_type, content, policy=name)
        except PolicyContentError as exc:
            raise PolicyContentError(f"{exc} Nothing was sent to Polaris.", policy=name) from None
    return content if isinstance(content, str) else json.dumps(content, default=_json_value)
