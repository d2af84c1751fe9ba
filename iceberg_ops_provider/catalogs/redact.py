"""Secrets of a catalog's settings, found by what they are (a property's name, the parts of a URI).

Nothing here looks for a secret's text in other text: a message that shows a catalog shows these parts,
so it can neither repeat a secret nor tell whether a guess was right.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote, quote_plus, unquote

__all__ = [
    "MASK",
    "UrlParts",
    "display_url",
    "is_secret_key",
    "redact_url",
    "secret_forms",
    "split_secrets",
    "split_url",
    "without_path_params",
]

MASK = "***"
"""What stands where a secret was."""

SECRET_WORDS = (
    "secret",
    "password",
    "passwd",
    "token",
    "credential",
    "key",
    "session",
    "private",
    "authorization",
    "sas",
    "signature",
)
"""Words in a property's name (or a mapping's holding it) that mark a secret: over-masking is cheaper than showing."""

_SCHEME = re.compile(r"^\s*([A-Za-z][A-Za-z0-9+.-]*)://")
# A host (a name, or an IPv6 literal in brackets) and a port of any text (a bad port is still a port, not a password).
_HOST = re.compile(r"^(\[[0-9A-Za-z:.%]*\]|[A-Za-z0-9._~%!$&'()*+,;=-]*)(:[^/?#@\[\]]*)?(?=$|[/?#])")


@dataclass(frozen=True)
class UrlParts:
    """A URI cut into parts, each as written (nothing decoded or checked); ``host`` includes the port."""

    scheme: str
    user: str | None
    password: str | None
    host: str
    path: str
    query: str | None


def split_url(text: str) -> UrlParts | None:
    """``text`` cut into its parts when it starts like a URI or holds user info; never raises.

    The user info ends at the last ``@`` followed by something shaped like a host, so a password holding
    ``/``, ``#``, ``[``, ``:`` or ``@`` unencoded stays in the password: where that is ambiguous, more is
    counted as user info (an address part hidden is better than a secret shown).
    """
    found = _SCHEME.match(text)
    if found is None and "@" not in text:
        return None
    scheme = found.group(1) if found is not None else ""
    rest = text[found.end() :].strip() if found is not None else text.strip()
    user = password = None
    ats = [at for at in range(len(rest) - 1, -1, -1) if rest[at] == "@"]
    split = next((at for at in ats if _HOST.match(rest[at + 1 :])), ats[0] if ats else None)
    if split is not None:
        userinfo, rest = rest[:split], rest[split + 1 :]
        user, colon, secret = userinfo.partition(":")
        password = secret if colon else None
        if password is None and "%3a" in user.lower():  # an encoded ':' in the user info: a password all the same
            user, password = "", user
    host = _HOST.match(rest)
    end = host.end() if host is not None else len(re.split(r"[/?#]", rest, maxsplit=1)[0])
    hostport, tail = rest[:end], rest[end:]
    tail = tail.split("#", 1)[0]
    path, question, query = tail.partition("?")
    return UrlParts(scheme, user, password, hostport, path, query if question else None)


_PARAMS = re.compile(r";|%3b", re.IGNORECASE)


def _path_params(path: str) -> tuple[str, str | None]:
    """``path`` cut at its first ``;`` (or ``%3B``): the path before, and its parameters, which may hold secrets."""
    found = _PARAMS.search(path)
    if found is None:
        return path, None
    return path[: found.start()], path[found.end() :]


def without_path_params(path: str) -> str:
    """``path`` without the parameters of its segments (``/api;token=x/v1/config`` is ``/api/v1/config``)."""
    return re.sub(r"(?:;|%3b)[^/]*", "", path, flags=re.IGNORECASE)


def _start(parts: UrlParts) -> str:
    return f"{parts.scheme}://" if parts.scheme else ""


def redact_url(text: str) -> str:
    """``text`` with the password of its user info, its query values and path parameters as ``***``."""
    parts = split_url(text)
    if parts is None:
        return text
    userinfo = ""
    if parts.user is not None:
        userinfo = parts.user + (f":{MASK}" if parts.password is not None else "") + "@"
    path, params = _path_params(parts.path)
    if params is not None:
        items = (item.partition("=") for item in params.split(";"))
        path += ";" + ";".join(f"{key}={MASK}" if equals else MASK for key, equals, _ in items)
    query = ""
    if parts.query is not None:  # a bare item may be a secret too
        pairs = (pair.partition("=") for pair in parts.query.split("&") if pair)
        query = "?" + "&".join(f"{key}={MASK}" if equals else MASK for key, equals, _ in pairs)
    return f"{_start(parts)}{userinfo}{parts.host}{path}{query}"


def display_url(text: str) -> str:
    """Where a URI points, to show: no password, query or path parameters (other text as given)."""
    parts = split_url(text)
    if parts is None:
        return text
    user = f"{parts.user}@" if parts.user else ""
    return f"{_start(parts)}{user}{parts.host}{_path_params(parts.path)[0]}"


def url_secrets(text: str) -> list[str]:
    """The secret parts of a URI: the password (as written and decoded), the query and path parameter values."""
    parts = split_url(text)
    if parts is None:
        return []
    found = []
    if parts.password:
        found += [parts.password, unquote(parts.password)]
    params = _path_params(parts.path)[1] or ""
    for item in [*(parts.query or "").split("&"), *params.split(";")]:
        key, equals, value = item.partition("=")
        secret = value if equals else key
        if secret:
            found += [secret, unquote(secret)]
    return found


def is_secret_key(key: str) -> bool:
    """Whether a property named ``key`` (a dotted path for nested ones) holds a secret."""
    lowered = key.lower()
    return any(word in lowered for word in SECRET_WORDS) or lowered.rsplit(".", 1)[-1] == "sig"  # Azure's SAS


def _redacted_value(path: str, value: Any) -> tuple[Any, bool]:
    if isinstance(value, Mapping):
        shown, hidden = {}, False
        for key, item in value.items():
            shown[key], inner = _redacted_value(f"{path}.{key}", item)
            hidden = hidden or inner
        return shown, hidden
    if isinstance(value, str) and is_secret_key(path):
        return MASK, True
    if isinstance(value, str) and (_SCHEME.match(value) or "@" in value):
        redacted = redact_url(value)
        return redacted, redacted != value.strip()
    return value, False


def split_secrets(properties: Mapping[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """``properties`` as ``(shown, secrets)``: secret parts shown as ``***``, and each property holding one whole."""
    shown: dict[str, Any] = {}
    secrets: dict[str, Any] = {}
    for key, value in properties.items():
        shown[key], hidden = _redacted_value(str(key), value)
        if hidden:
            secrets[key] = value
    return shown, secrets


def _leaves(path: str, value: Any) -> Iterator[str]:
    if isinstance(value, Mapping):
        for key, item in value.items():
            yield from _leaves(f"{path}.{key}", item)
    elif isinstance(value, str):
        if is_secret_key(path):
            yield value
        yield from url_secrets(value)


def secret_forms(secrets: Mapping[str, Any]) -> tuple[str, ...]:
    """Every text form of the secret values (raw, decoded, URL-encoded; a credential's halves), for a log masker."""
    values: set[str] = set()
    for key, value in secrets.items():
        for leaf in _leaves(str(key), value):
            parts = [leaf, *leaf.split(":", 1)[1:]] if "credential" in str(key).lower() else [leaf]
            for part in parts:
                values.update({part, quote(part, safe=""), quote(part, safe=" +"), quote_plus(part)})
    return tuple(sorted(value for value in values if value))
