"""What a failed catalog request was: its request and answer, and the words every catalog message starts with."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import suppress
from typing import Any
from urllib.parse import urlsplit

from iceberg_ops_provider.catalogs.redact import without_path_params

__all__ = ["causes", "http_error", "one_line", "request_path", "the_catalog"]


def one_line(text: object, limit: int | None = None) -> str:
    """``text`` on one line, runs of whitespace as one space; cut to ``limit`` characters (ending ``...``) if given."""
    line = " ".join(str(text).split())
    return line if limit is None or len(line) <= limit else line[: limit - 3] + "..."


def the_catalog(endpoint: str) -> str:
    """``The catalog at <url>``, or ``The catalog <description>`` when the endpoint is not a location."""
    if not endpoint:
        return "The catalog"
    return f"The catalog at {endpoint}" if "://" in endpoint or endpoint.startswith("/") else f"The catalog {endpoint}"


def causes(exc: BaseException) -> Iterator[BaseException]:
    """``exc``, then its causes (or contexts), each once and at most 16."""
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen and len(seen) < 16:
        seen.add(id(current))
        yield current
        current = current.__cause__ or current.__context__


def http_error(exc: BaseException) -> Any:
    """The ``requests`` error (with its request and response) behind a PyIceberg REST error, if any."""
    for cause in causes(exc):
        if getattr(cause, "request", None) is not None and getattr(cause, "response", None) is not None:
            return cause
    return None


def request_path(exc: Any) -> str:
    """``METHOD /path`` (no host, query, path parameter or password) of the request ``exc`` was raised for."""
    request = getattr(exc, "request", None)
    url = str(getattr(request, "url", "") or getattr(exc, "url", "") or "")  # the bounded transport's own refusals
    path = ""
    with suppress(ValueError):
        path = without_path_params(urlsplit(url).path)
    return f"{getattr(request, 'method', '') or getattr(exc, 'method', '') or ''} {path}".strip()
