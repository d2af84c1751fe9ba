"""Multi-table commits on REST catalogs: ``POST /v1/{prefix}/transactions/commit`` (docs/core.md)."""

from __future__ import annotations

import json
import logging
import threading
from collections.abc import Sequence
from typing import TYPE_CHECKING, NoReturn

from pyiceberg.exceptions import (
    CommitFailedException,
    CommitStateUnknownException,
    NoSuchNamespaceError,
    NoSuchTableError,
)
from pyiceberg.table import CommitTableRequest, TableIdentifier

from iceberg_ops_provider.catalogs import spec_of, translate
from iceberg_ops_provider.catalogs.requests_of import one_line
from iceberg_ops_provider.core.atomic.changes import AtomicCommitResult, TableChange

if TYPE_CHECKING:
    from pyiceberg.catalog.rest import RestCatalog
    from requests import Response

__all__ = ["TRANSACTIONS_PATH", "commit_rest", "forget_support", "known_support", "probe", "transactions_url"]

log = logging.getLogger("iceberg_ops_provider.core.atomic.commit")

TRANSACTIONS_PATH = "transactions/commit"
"""The endpoint's path below ``/v1/{prefix}/``."""

_SUPPORT: dict[str, bool] = {}
_SUPPORT_LOCK = threading.Lock()


def transactions_url(catalog: RestCatalog) -> str:
    """The URL of the catalog's ``transactions/commit`` endpoint (with its prefix, as PyIceberg builds URLs)."""
    return catalog.url(TRANSACTIONS_PATH, prefixed=True)


def known_support(catalog: RestCatalog) -> bool | None:
    """What this process learnt about the catalog's endpoint: served, not served, or ``None`` (not asked yet)."""
    with _SUPPORT_LOCK:
        return _SUPPORT.get(transactions_url(catalog))


def forget_support(catalog: RestCatalog | None = None) -> None:
    """Forget what was learnt about one catalog's endpoint (every catalog's with ``None``), to ask again."""
    with _SUPPORT_LOCK:
        if catalog is None:
            _SUPPORT.clear()
        else:
            _SUPPORT.pop(transactions_url(catalog), None)


def _error_of(response: Response) -> tuple[str, str]:
    """The Iceberg error ``type`` and ``message`` of an answer (empty when it is not an Iceberg error)."""
    try:
        error = json.loads(response.text or "{}").get("error") or {}
        return str(error.get("type") or ""), str(error.get("message") or "")
    except (ValueError, AttributeError):  # not JSON, or its error not an object
        return "", ""


def _describe(response: Response) -> str:
    kind, message = _error_of(response)
    if kind or message:
        return f"HTTP {response.status_code} {kind}: {one_line(message, 300)}".strip()
    return f"HTTP {response.status_code} {one_line(response.text or response.reason or '', 300)}".strip()


def _not_served(response: Response) -> bool:
    """Whether the answer says the server has no such endpoint (rather than refusing this request)."""
    status = response.status_code
    kind, message = _error_of(response)
    if status == 404:
        return not kind.startswith("NoSuch")  # NoSuchTableException: the endpoint exists, the table does not
    return status in (405, 501) or (status == 400 and "no route" in message.lower())


def _learn(url: str, response: Response) -> bool | None:
    """Whether the answer shows the endpoint served (remembered), or ``None`` if it says neither (5xx, credentials)."""
    status = response.status_code
    if _not_served(response):
        supported = False
    elif status < 500 and status not in (401, 403, 419):  # refusing a request, not the path, is serving it
        supported = True
    else:
        return None
    with _SUPPORT_LOCK:
        _SUPPORT[url] = supported
    return supported


def _post(catalog: RestCatalog, url: str, body: bytes) -> Response:
    """POST through the catalog's session; a refused or expired token is refreshed once, as PyIceberg does."""
    import requests

    for attempt in (1, 2):
        try:
            response = catalog._session.post(url, data=body)
        except requests.exceptions.RequestException as exc:
            if _not_sent(exc) and (error := translate(exc, spec_of(catalog))) is not None:
                raise error from exc
            raise CommitStateUnknownException(
                f"The multi-table commit to {url} got no answer ({type(exc).__name__}: {one_line(exc, 300)}): all or "
                "none of its changes were applied. Load the tables to find out."
            ) from exc
        if response.status_code in (401, 419) and attempt == 1 and hasattr(catalog, "_refresh_token"):
            try:
                catalog._refresh_token()
            except Exception:  # no token to refresh (SigV4, basic auth) or refused: report the answer as it is
                return response
            continue
        return response
    raise AssertionError("unreachable")  # pragma: no cover


def _not_sent(exc: BaseException) -> bool:
    """Whether a transport error happened before the request could reach the server (nothing applied)."""
    import requests

    markers = ("NewConnectionError", "Connection refused", "Failed to resolve")
    return isinstance(exc, requests.exceptions.ConnectTimeout) or (
        isinstance(exc, requests.exceptions.ConnectionError) and any(marker in repr(exc) for marker in markers)
    )


def _raise_for(response: Response, url: str, changes: Sequence[TableChange]) -> NoReturn:
    """Raise what a refusal of a multi-table commit means (the endpoint is served)."""
    from pyiceberg.catalog.rest.response import _handle_non_200_response
    from requests import HTTPError

    status = response.status_code
    kind, message = _error_of(response)
    tables = ", ".join(change.label() for change in changes)
    what = _describe(response)
    if status == 409:
        raise CommitFailedException(
            f"The catalog refused the multi-table commit of {tables} ({what}); nothing was applied."
        )
    if status == 404:
        error = NoSuchNamespaceError if "Namespace" in kind else NoSuchTableError
        raise error(f"{kind}: {message} (multi-table commit of {tables}; nothing was applied)")
    if 500 <= status < 600:
        raise CommitStateUnknownException(
            f"The catalog failed during the multi-table commit of {tables} ({what}): all or none of its changes "
            "were applied. Load the tables to find out."
        )
    try:
        response.raise_for_status()
    except HTTPError as exc:
        _handle_non_200_response(exc, {})
    raise CommitFailedException(f"Unexpected answer to the multi-table commit of {tables} at {url}: {what}")


def commit_rest(catalog: RestCatalog, changes: Sequence[TableChange]) -> AtomicCommitResult:
    """Commit ``changes`` in one ``transactions/commit`` request (docs/core.md, All-or-nothing commits).

    ``per-table`` (nothing sent or applied) when the server does not serve the endpoint or a change creates a table.
    """
    url = transactions_url(catalog)
    creates = [change.label() for change in changes if change.creates]
    reason = None
    if creates:
        reason = f"a REST catalog's multi-table commit cannot create tables ({', '.join(creates)})"
    elif known_support(catalog) is False:
        reason = f"the REST catalog at {catalog.uri} does not serve {TRANSACTIONS_PATH} (learnt earlier)"
    if reason is not None:
        log.info("%s: committing table by table instead of all at once", reason)
        return AtomicCommitResult("per-table", reason=reason)
    parts = [
        CommitTableRequest(
            identifier=TableIdentifier(namespace=list(change.identifier[:-1]), name=change.identifier[-1]),
            requirements=change.requirements,
            updates=change.updates,
        ).model_dump_json()
        for change in changes
    ]
    response = _post(catalog, url, ('{"table-changes": [' + ", ".join(parts) + "]}").encode("utf-8"))
    if _learn(url, response) is False:
        reason = f"the REST catalog does not serve POST {url} ({_describe(response)})"
        log.info("%s: committing table by table instead of all at once (remembered for this catalog)", reason)
        return AtomicCommitResult("per-table", reason=reason)
    if 200 <= response.status_code < 300:
        return AtomicCommitResult("rest-transaction", tuple(change.label() for change in changes))
    _raise_for(response, url, changes)


def probe(catalog: RestCatalog) -> bool | None:
    """Ask the catalog whether it serves the endpoint, with an empty multi-table commit (which changes nothing).

    Whether it does (remembered), or ``None`` when the answer says neither (a 5xx, refused credentials).
    """
    known = known_support(catalog)
    if known is not None:
        return known
    url = transactions_url(catalog)
    try:
        response = _post(catalog, url, b'{"table-changes": []}')
    except Exception as exc:
        log.debug("probing %s failed: %s: %s", url, type(exc).__name__, exc)
        return None
    supported = _learn(url, response)
    if supported is False:
        log.info("the REST catalog does not serve POST %s (%s): commits go table by table", url, _describe(response))
    return supported
