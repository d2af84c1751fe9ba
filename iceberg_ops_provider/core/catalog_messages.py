"""The words every catalog error message is made of: where the catalog lives, which request failed, how long it had.

The bounds (:mod:`iceberg_ops_provider.core.timeouts`) and the error translation
(:mod:`iceberg_ops_provider.core.error_translation`, :mod:`iceberg_ops_provider.core.auth_errors`)
word their messages alike; this module owns those shared parts, and nothing else:

* where a catalog lives, never with a password: :func:`catalog_endpoint` for a built catalog,
  :func:`without_password` and :func:`redacted` for a URL, :func:`origin` for the scheme and host of
  a request's URL, :func:`the_catalog` for the subject of a sentence;
* which request failed: :func:`request_of` (method and URL, no query) and :func:`http_error` (the
  ``requests`` error behind a PyIceberg REST error);
* how long it had: :func:`seconds_text` and :data:`TIMEOUT_HINT`, what to check after a timeout;
* :func:`one_line`: any text on one line.
"""

from __future__ import annotations

import re
from contextlib import suppress
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit, urlunsplit

if TYPE_CHECKING:
    from collections.abc import Iterator

    from pyiceberg.catalog import Catalog

__all__ = [
    "TIMEOUT_HINT",
    "catalog_endpoint",
    "http_error",
    "one_line",
    "origin",
    "redacted",
    "request_of",
    "seconds_text",
    "the_catalog",
    "without_password",
]

TIMEOUT_HINT = (
    "check that it is running and reachable, or raise the timeout "
    "(timeout= of CatalogFactory.build / --catalog-timeout / the connection's `timeout` extra)"
)
"""What to check when a catalog did not answer within its bound."""


def seconds_text(seconds: float) -> str:
    """A bound in seconds as messages write it (``30 s``, ``0.5 s``)."""
    return f"{seconds:g} s"


def one_line(text: object) -> str:
    """``text`` as a string on one line, runs of whitespace (newlines included) as one space."""
    return " ".join(str(text).split())


def without_password(url: str) -> str:
    """``url`` without the password of its user info (``user:secret@host`` becomes ``user@host``)."""
    try:
        parts = urlsplit(url)
    except ValueError:
        return url
    if not parts.password:
        return url
    host = parts.hostname or ""
    if ":" in host:  # an IPv6 literal
        host = f"[{host}]"
    netloc = f"{parts.username}@{host}" if parts.username else host
    if parts.port is not None:
        netloc += f":{parts.port}"
    return urlunsplit(parts._replace(netloc=netloc))


def redacted(text: str) -> str:
    """``text`` (a URL that may not parse) with anything between ``user:`` and ``@`` replaced by ``***``."""
    return re.sub(r"(?<=:)[^:@/]+(?=@)", "***", text)


def the_catalog(endpoint: str) -> str:
    """``The catalog at <url>``, or ``The catalog <description>`` when the endpoint is not a location."""
    if not endpoint:
        return "The catalog"
    return f"The catalog at {endpoint}" if "://" in endpoint or endpoint.startswith("/") else f"The catalog {endpoint}"


def catalog_endpoint(catalog: Catalog) -> str:
    """Where ``catalog`` lives, for messages: never a password.

    REST: its URI. SQL: the database URL with the password removed. Anything else: its ``uri``
    property when it has one (Hive), its ``glue.endpoint`` (Glue on a custom endpoint), else the
    class and the catalog's name (``GlueCatalog 'glue'``).
    """
    properties = getattr(catalog, "properties", None) or {}
    uri = getattr(catalog, "uri", None) or properties.get("uri")
    engine = getattr(catalog, "engine", None)
    if engine is not None and getattr(engine, "url", None) is not None:
        try:
            return str(engine.url.set(password=None).render_as_string(hide_password=False))
        except Exception:
            return without_password(str(uri or engine.url))
    if isinstance(uri, str) and uri:
        return without_password(uri)
    glue_endpoint = properties.get("glue.endpoint")
    if isinstance(glue_endpoint, str) and glue_endpoint:
        return without_password(glue_endpoint)
    return f"{type(catalog).__name__} {getattr(catalog, 'name', '')!r}"


def request_of(exc: BaseException) -> tuple[str, str]:
    """The method and URL (no query, no password) of the request ``exc`` was raised for, when known."""
    request = getattr(exc, "request", None)
    url = str(getattr(request, "url", "") or "")
    if url:
        with suppress(ValueError):
            url = urlunsplit(urlsplit(without_password(url))._replace(query="", fragment=""))
    return str(getattr(request, "method", "") or ""), url


def origin(url: str) -> str:
    """The scheme and host of ``url`` (``https://catalog:8181``), without a password; empty if it has none."""
    try:
        parts = urlsplit(url)
    except ValueError:
        return ""
    return without_password(urlunsplit((parts.scheme, parts.netloc, "", "", ""))) if parts.netloc else ""


def _causes(exc: BaseException) -> Iterator[BaseException]:
    """``exc``, then what caused it (``__cause__``, else ``__context__``), without looping."""
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen and len(seen) < 16:
        seen.add(id(current))
        yield current
        current = current.__cause__ or current.__context__


def http_error(exc: BaseException) -> Any:
    """The ``requests`` error (with its request and response) behind a PyIceberg REST error, if any."""
    return next(
        (
            e
            for e in _causes(exc)
            if getattr(e, "request", None) is not None and getattr(e, "response", None) is not None
        ),
        None,
    )
