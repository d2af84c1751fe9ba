"""HTTP to Apache Polaris: timeouts, bounded retries, bearer tokens, and typed errors with hints.

Retries are ``urllib3``'s ``Retry`` on the ``requests.Session``; anything but a 2xx answer becomes a typed
:class:`~iceberg_ops_provider.errors.PolarisError`, never naming a secret (docs/polaris.md, "The client").
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Mapping
from dataclasses import KW_ONLY, InitVar, dataclass, field
from typing import Any, Protocol
from urllib.parse import quote, urlencode, urlsplit, urlunsplit

import requests
from requests.adapters import HTTPAdapter
from urllib3.exceptions import InvalidHeader, MaxRetryError, ReadTimeoutError
from urllib3.util.retry import Retry

from iceberg_ops_provider.catalogs.requests_of import one_line
from iceberg_ops_provider.errors import (
    PolarisAuthError,
    PolarisConflictError,
    PolarisError,
    PolarisForbiddenError,
    PolarisNotFoundError,
    PolarisRequestError,
    PolarisServerError,
)
from iceberg_ops_provider.polaris.auth import BearerAuth

__all__ = ["Call", "HTTPResponse", "HTTPSession", "Transport"]

logger = logging.getLogger(__name__)

_RETRY_STATUSES = frozenset({429, 503})
_NOT_POLARIS = (
    "a proxy, load balancer or login page may have answered instead of Polaris: check that base_url is "
    "Polaris's catalog API root (https://host:8181/api/catalog)"
)
_BAD_REQUEST_HINTS = {
    "PolicyInUseException": "The policy is still attached: detach it first, or drop it with detach_all=True.",
    "InvalidPolicyException": (
        'Fix the policy content: a maintenance policy takes {"version": "2025-02-03", "enable": true, '
        '"config": {...}} with enable a JSON boolean and no other top-level keys.'
    ),
    "PolicyAttachException": "Maintenance policies attach only to the catalog, namespaces and Iceberg tables.",
}
_NOT_FOUND_HINTS = {
    "NoSuchPolicyException": "Check the policy name and the namespace it is defined in.",
    "NoSuchNamespaceException": "Check that the namespace exists in the catalog.",
    "NoSuchTableException": "Check that the table exists (only Iceberg tables take maintenance policies).",
    "NoSuchViewException": "Views take no maintenance policies; check the table name.",
    "NoSuchTargetException": "Check that the target (namespace or table) exists.",
    "NoSuchMappingException": "The policy is not attached to that target; applicable_policies() shows what applies.",
}
_ATTACHED_TWICE = (
    "Another policy of the same inheritable type is already attached to that target (Polaris allows one per "
    "type per entity): detach it first."
)
_CONFLICT_HINTS = {
    "PolicyVersionMismatchException": "The policy changed since it was loaded: load it again and retry.",
    "PolicyMappingAlreadyExistsException": _ATTACHED_TWICE,
    "ConflictPolicyAttachmentException": _ATTACHED_TWICE,
    "AlreadyExistsException": "A policy of that name exists in the namespace: load or update it, or pick another name.",
}


class HTTPResponse(Protocol):
    """What is read from an answer: a ``requests.Response`` or a :class:`~iceberg_ops_provider.testing.FakeResponse`."""

    status_code: int
    headers: Mapping[str, str]
    text: str

    def json(self) -> Any:
        """The decoded JSON body; raises ``ValueError`` when it is not JSON."""
        ...


class HTTPSession(Protocol):
    """What sends: a ``requests.Session`` or a :class:`~iceberg_ops_provider.testing.FakeSession`.

    ``request`` is called with the keywords ``params``, ``json``, ``data``, ``headers``, ``timeout``,
    ``verify`` and ``cert``, as ``requests.Session.request`` takes them.
    """

    def request(self, method: str, url: str, **kwargs: Any) -> HTTPResponse:
        """Send one request and return its answer."""
        ...


@dataclass(frozen=True)
class Call:
    """One API call: what it does (as in "Could not <action>"), where it goes, and the privilege a 403 names."""

    action: str
    method: str
    url: str
    params: Mapping[str, str] | None = None
    json: Any = None
    data: Mapping[str, str] | None = field(default=None, repr=False)  # holds the client secret
    privilege: str = ""
    token_endpoint: bool = False

    @property
    def shown_url(self) -> str:
        """The URL with its query and without any ``user:password@`` part, for messages and logs."""
        parts = urlsplit(self.url)
        query = urlencode(self.params, quote_via=quote) if self.params else ""
        return urlunsplit((parts.scheme, parts.netloc.rpartition("@")[2], parts.path, query, ""))

    def failed(self, cls: type[PolarisError], what: str, **facts: Any) -> PolarisError:
        """The error ``cls`` saying this call ``what`` (``answered HTTP 500 ...``), with its URL and ``facts``."""
        return cls(f"Could not {self.action}: {self.method} {self.shown_url} {what}", url=self.shown_url, **facts)

    @property
    def retry_connection(self) -> bool:
        """Whether the call changes nothing (a read, a token request), so a dropped connection may be retried."""
        return self.method == "GET" or self.token_endpoint


class _PolarisRetry(Retry):
    def is_retry(self, method: str, status_code: int, has_retry_after: bool = False) -> bool:
        """429 and 503 whatever the method: Polaris did not process the request."""
        return status_code in (self.status_forcelist or ())

    def parse_retry_after(self, retry_after: str) -> float:
        """``Retry-After`` capped by the longest wait; unreadable, it leaves the wait to the backoff."""
        try:
            return min(super().parse_retry_after(retry_after), self.backoff_max)
        except InvalidHeader:
            return 0.0

    def increment(self, method: str | None = None, url: str | None = None, *args: Any, **kwargs: Any) -> Retry:
        """The next state; an answer that timed out is reported at once, as the timeout promises."""
        error = kwargs.get("error")
        if isinstance(error, ReadTimeoutError):
            raise error
        response = kwargs.get("response")
        why = f"HTTP {response.status}" if response is not None else f"the connection failed ({one_line(error, 240)})"
        new = super().increment(method, url, *args, **kwargs)
        logger.warning("Polaris %s %s: %s; retrying (retry %d)", method, url, why, len(new.history))
        return new


def retrying_adapter(
    max_retries: int, backoff: float, max_backoff: float, *, methods: frozenset[str] = frozenset({"GET"})
) -> HTTPAdapter:
    """A ``requests`` adapter retrying as the module says (``methods``: retried after a connection dropped)."""
    retry = _PolarisRetry(
        total=max_retries,
        other=0,
        allowed_methods=methods,
        status_forcelist=_RETRY_STATUSES,
        backoff_factor=backoff,
        backoff_max=max_backoff,
        raise_on_status=False,
    )
    return HTTPAdapter(max_retries=retry)


def _cause(exc: BaseException) -> str:
    """The innermost reason of a ``requests`` error (urllib3 wraps it in "Max retries exceeded ...")."""
    reason = getattr(exc.args[0], "reason", None) if exc.args else None
    return one_line(reason if reason is not None else exc, 240)


def _body_summary(response: HTTPResponse) -> str:
    content_type = response.headers.get("Content-Type") or "no content type"
    return f"{content_type}, starting {one_line(response.text or '', 80)!r}"


@dataclass(eq=False, repr=False)
class Transport:
    """Sends :class:`Call` objects to Polaris with retries, authentication (:attr:`auth`) and typed errors.

    A ``requests.Session`` gets the retrying adapters mounted for ``base_url`` and ``token_url``; another
    session object retries nothing. The other arguments are :class:`PolarisPolicyClient`'s.
    """

    session: HTTPSession
    _: KW_ONLY
    base_url: str
    catalog: str
    verify: bool | str = True
    timeout: float = 30.0
    max_retries: int = 3
    backoff: InitVar[float] = 0.5
    max_backoff: InitVar[float] = 30.0
    headers: Mapping[str, str] | None = None
    cert: str | tuple[str, str] | None = None
    token_url: InitVar[str | None] = None
    auth: BearerAuth = field(default_factory=BearerAuth, init=False)

    def __post_init__(self, backoff: float, max_backoff: float, token_url: str | None) -> None:
        self.headers = {"Accept": "application/json", **dict(self.headers or {})}
        if isinstance(self.session, requests.Session):
            self.session.mount(self.base_url, retrying_adapter(self.max_retries, backoff, max_backoff))
            if token_url:
                posts = frozenset({"GET", "POST"})
                self.session.mount(token_url, retrying_adapter(self.max_retries, backoff, max_backoff, methods=posts))

    def request(self, call: Call, *, authenticate: bool = True) -> Any:
        """Send ``call`` and return its decoded JSON body (``None`` for an empty answer), or raise a typed error."""
        for refetched in (False, True):
            header = self.auth.header() if authenticate else None
            headers = {**self.headers, "Authorization": header} if header else dict(self.headers)
            response, attempts = self._send(call, headers)
            if response.status_code == 401 and authenticate and not refetched and self.auth.invalidate(header):
                logger.info("Polaris refused the access token on %s %s; fetching a new one", call.method, call.url)
                continue
            return self._decode(call, response, attempts)
        raise AssertionError("unreachable")  # pragma: no cover

    def fetch_token(self, url: str, form: Mapping[str, str]) -> Mapping[str, Any]:
        """Post an OAuth2 token request form to ``url`` and return the JSON answer.

        Raises:
            PolarisAuthError: The endpoint refused the request or answered no JSON object.
            PolarisServerError: The endpoint failed or could not be reached.
        """
        body = self.request(
            Call("fetch an access token", "POST", url, data=form, token_endpoint=True), authenticate=False
        )
        if not isinstance(body, Mapping):
            raise PolarisAuthError(
                f"The token endpoint {url} answered {one_line(body, 80)!r}, not a JSON object. Check oauth2-server-uri "
                "(normally <base_url>/v1/oauth/tokens).",
                url=url,
            )
        return body

    def _send(self, call: Call, headers: Mapping[str, str]) -> tuple[HTTPResponse, int]:
        logger.debug("Polaris request %s %s", call.method, call.shown_url)
        try:
            response = self.session.request(
                call.method,
                call.url,
                params=dict(call.params) if call.params else None,
                json=call.json,
                data=dict(call.data) if call.data is not None else None,
                headers=dict(headers),
                timeout=self.timeout,
                verify=self.verify,
                cert=self.cert,
                # Polaris never redirects; following one would post the client secret (or the
                # token) to whatever host the answer names.
                allow_redirects=False,
            )
        except requests.exceptions.SSLError as exc:
            raise PolarisError(
                f"Could not {call.action}: the TLS connection for {call.method} {call.shown_url} failed "
                f"({_cause(exc)}). If Polaris's certificate comes from a private CA, pass its CA bundle as "
                "verify='/path/ca.pem' (PyIceberg property ssl.cabundle); check also that the host name in "
                "base_url matches the certificate.",
                url=call.shown_url,
            ) from None
        except (requests.exceptions.ChunkedEncodingError, requests.exceptions.ContentDecodingError) as exc:
            raise call.failed(
                PolarisServerError,
                f"got a garbled answer ({type(exc).__name__}). Check that nothing between here and Polaris cuts "
                "answers.",
            ) from None
        except (requests.exceptions.InvalidHeader, UnicodeError):
            # The message would show the header's value: a token or a configured header.
            raise PolarisRequestError(
                f"Could not {call.action}: a header of {call.method} {call.shown_url} (the bearer token, or one "
                "given with headers= / header.* properties) holds characters an HTTP header cannot carry. Check "
                "the token (or what the token endpoint answered) and the configured headers.",
                url=call.shown_url,
            ) from None
        except requests.exceptions.Timeout as exc:
            if isinstance(exc, requests.exceptions.ConnectTimeout):  # no connection: nothing was sent
                raise self._unreachable(call, exc) from None
            raise call.failed(
                PolarisServerError,
                f"got no answer within {self.timeout:g} s. Polaris may be overloaded; pass a larger timeout= if it "
                "is only slow.",
            ) from None
        except requests.exceptions.ConnectionError as exc:
            raise self._unreachable(call, exc) from None
        except requests.exceptions.RequestException as exc:
            raise call.failed(
                PolarisRequestError,
                f"could not be sent ({one_line(exc, 240)}). Check base_url and the client's arguments.",
            ) from None
        if 300 <= response.status_code < 400:
            raise call.failed(
                PolarisError,
                f"answered a redirect (HTTP {response.status_code}); Polaris does not redirect, and the request is "
                "not sent on (its credentials would go with it). Set base_url (or oauth2_server_uri) to the final "
                "address.",
                status=response.status_code,
            )
        retries = getattr(getattr(response, "raw", None), "retries", None)
        return response, 1 + len(getattr(retries, "history", ()))

    def _unreachable(self, call: Call, exc: requests.exceptions.RequestException) -> PolarisServerError:
        """A connection that failed: ``urllib3`` retried it unless it dropped after a change was sent."""
        exhausted = bool(exc.args) and isinstance(exc.args[0], MaxRetryError)
        attempts = self.max_retries + 1 if exhausted else 1
        sent = not exhausted and not call.retry_connection  # dropped after a change was sent
        unsure = " The change may or may not have been applied: check first." if sent else ""
        return call.failed(
            PolarisServerError,
            f"failed after {attempts} attempt(s) because the connection failed ({_cause(exc)}). Check that Polaris "
            f"is running and reachable at {self.base_url}.{unsure}",
        )

    def _decode(self, call: Call, response: HTTPResponse, attempts: int) -> Any:
        status = response.status_code
        if not 200 <= status < 300:
            raise self._error(call, response, attempts)
        if status == 204 or not (response.text or "").strip():
            return None
        try:
            return response.json()
        except (ValueError, RecursionError):
            raise call.failed(
                PolarisError,
                f"answered HTTP {status} with a body that is not JSON ({_body_summary(response)}); {_NOT_POLARIS}.",
                status=status,
            ) from None

    def _error(self, call: Call, response: HTTPResponse, attempts: int) -> PolarisError:
        status = response.status_code
        text = response.text or ""
        body: Any = None
        json_body = False
        if text.strip():
            with contextlib.suppress(ValueError, RecursionError):
                body, json_body = response.json(), True
        error_type = message = ""
        if isinstance(body, Mapping):
            envelope = body.get("error")
            if isinstance(envelope, Mapping):  # Iceberg REST / Polaris
                error_type, message = str(envelope.get("type") or ""), str(envelope.get("message") or "")
            elif isinstance(envelope, str):  # OAuth2 token endpoint
                error_type, message = envelope, str(body.get("error_description") or "")
        if error_type or message:
            said = ": ".join(part for part in (error_type, one_line(message, 300)) if part)
        elif not text.strip():
            said = "no body"
        elif not json_body:
            said = f"a body that is not JSON ({_body_summary(response)}); {_NOT_POLARIS}"
        else:
            said = f"JSON without Polaris's error envelope: {one_line(body, 160)}"
        cls, hint = self._hint(call, status, error_type, message, attempts)
        return call.failed(cls, f"answered HTTP {status} ({said}). {hint}", status=status, error_type=error_type)

    def _hint(
        self, call: Call, status: int, error_type: str, message: str, attempts: int
    ) -> tuple[type[PolarisError], str]:
        tries = f" through {attempts} attempts" if attempts > 1 else ""
        if status == 429:
            return PolarisServerError, f"Polaris throttled the client{tries}: try again later, or raise max_retries."
        if status >= 500:
            return PolarisServerError, f"Polaris failed on its side{tries}: see its server log and try again later."
        if call.token_endpoint:
            scope = getattr(self.auth, "scope", "")
            if error_type == "invalid_scope":
                return PolarisAuthError, (
                    f"The scope {scope!r} was refused: Polaris takes 'PRINCIPAL_ROLE:ALL' or 'PRINCIPAL_ROLE:<role>'."
                )
            return PolarisAuthError, (
                f"No access token could be obtained with {self.auth.description}: check the client id and secret "
                "of the credential ('client_id:client_secret') and the token endpoint (oauth2-server-uri, by "
                "default <base_url>/v1/oauth/tokens)."
            )
        if status in (400, 422):
            generic = "Check the call's arguments (names, policy type, content, target)."
            return PolarisRequestError, _BAD_REQUEST_HINTS.get(error_type, generic)
        if status == 401:
            return PolarisAuthError, (
                f"Polaris refused the credentials (the client uses {self.auth.description}): check the token or the "
                "credential ('client_id:client_secret') and the token endpoint; a static token may have expired."
            )
        if status == 403:
            needed = call.privilege or "the privilege this call needs"
            return PolarisForbiddenError, (
                f"Grant one of the principal's roles a catalog role on catalog {self.catalog!r} holding {needed} "
                "(CATALOG_MANAGE_CONTENT includes it)."
            )
        if status == 404:
            hint = _NOT_FOUND_HINTS.get(error_type) or (
                f"Check the catalog name {self.catalog!r} (PyIceberg's `warehouse` for Polaris), the namespace, "
                f"table and policy names, and base_url {self.base_url} (the catalog API root); and that this "
                "Polaris is 1.0 or later with its policy store enabled (feature flag ENABLE_POLICY_STORE)."
            )
            return PolarisNotFoundError, hint
        if status == 406 and ("ENABLE_POLICY_STORE" in message or "Feature not enabled" in message):
            return PolarisError, (
                "Polaris's policy store is switched off: set the realm feature flag ENABLE_POLICY_STORE to true."
            )
        if status == 409:
            return PolarisConflictError, _CONFLICT_HINTS.get(error_type, "Polaris changed meanwhile: reload and retry.")
        return PolarisError, f"This status is not part of Polaris's policy API: check base_url {self.base_url}."
