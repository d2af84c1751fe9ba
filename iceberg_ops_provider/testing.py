"""Fakes for driving :class:`~iceberg_ops_provider.polaris.PolarisPolicyClient` without HTTP (see docs/polaris.md).

:class:`FakeSession` stands in for the client's ``requests.Session``; the builders write the JSON Polaris 1.x
sends. The most specific route wins (with a query over without, then the longer path). A fake session sees
each call once: the client's retries are ``urllib3``'s, beneath a ``requests.Session``.
"""

from __future__ import annotations

import json as jsonlib
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import partialmethod
from typing import Any, TypeAlias
from urllib.parse import parse_qsl, unquote, urlsplit

from requests.structures import CaseInsensitiveDict

__all__ = [
    "Answer",
    "FakeRequest",
    "FakeResponse",
    "FakeSession",
    "UnexpectedRequestError",
    "applicable_policies_page",
    "error_response",
    "policy_json",
    "token_response",
]


class FakeResponse:
    """An HTTP answer, shaped like the parts of ``requests.Response`` the Polaris client reads.

    ``json`` is the JSON body (it adds ``Content-Type: application/json``), ``text`` a raw one (an HTML page,
    malformed JSON); ``url`` becomes the request's when a :class:`FakeSession` serves it.
    """

    def __init__(
        self,
        status_code: int = 200,
        json: Any = None,
        *,
        headers: Mapping[str, str] | None = None,
        text: str | None = None,
    ) -> None:
        self.status_code = status_code
        self._json = json
        self.headers: CaseInsensitiveDict[str] = CaseInsensitiveDict(headers or {})
        if json is not None:
            self.headers.setdefault("Content-Type", "application/json")
        self.text = text if text is not None else (jsonlib.dumps(json) if json is not None else "")
        self.url = ""

    @property
    def ok(self) -> bool:
        """Whether the status is below 400."""
        return self.status_code < 400

    def json(self) -> Any:
        """The JSON body; a ``ValueError`` when it is empty or not JSON, as ``requests`` raises."""
        return self._json if self._json is not None else jsonlib.loads(self.text)

    def __repr__(self) -> str:
        return f"FakeResponse(status_code={self.status_code}, text={self.text[:60]!r})"


@dataclass(frozen=True)
class FakeRequest:
    """A request a :class:`FakeSession` received, with the keyword arguments the client passed.

    Attributes:
        url: The URL as given (without the ``params``); ``path`` its path, percent-decoded (0x1F itself).
        params: The query parameters: those in the URL and those passed as ``params``.
    """

    method: str
    url: str
    path: str
    params: dict[str, str]
    headers: dict[str, str] = field(default_factory=dict)
    json: Any = None
    data: Any = None
    timeout: Any = None
    verify: Any = None
    cert: Any = None
    allow_redirects: Any = None


Answer: TypeAlias = "FakeResponse | Mapping[str, Any] | BaseException | Callable[[FakeRequest], Any]"
"""What a route answers: a response, a 200 JSON body, an exception to raise, or a callable returning one."""


class UnexpectedRequestError(AssertionError):
    """A :class:`FakeSession` received a request no route matches, or a route ran out of answers."""


@dataclass
class _Route:
    method: str
    path: str
    query: dict[str, str]
    answers: list[Any]
    repeat: bool
    served: int = 0

    def matches(self, request: FakeRequest) -> bool:
        path = request.path == self.path or (self.path.startswith("/") and request.path.endswith(self.path))
        return self.method == request.method and path and all(request.params.get(k) == v for k, v in self.query.items())

    def describe(self) -> str:
        query = "&".join(f"{key}={value}" for key, value in self.query.items())
        return f"{self.method} {self.path}{'?' + query if query else ''}"


class FakeSession:
    """A ``requests.Session`` stand-in that answers from ``routes`` (``{(method, path): answer}``, see :meth:`add`).

    Every request it receives is recorded, in order, in ``requests``.
    """

    def __init__(self, routes: Mapping[tuple[str, str], Any] | None = None) -> None:
        self._routes: list[_Route] = []
        self.requests: list[FakeRequest] = []
        self.headers: dict[str, str] = {}
        self.closed = False
        for (method, path), answer in (routes or {}).items():
            self.add(method, path, answer)

    def add(self, method: str, path: str, answer: Any) -> FakeSession:
        """Answer ``method path`` (its tail, optionally with a query that must match) with ``answer``; chains.

        ``answer`` is a :class:`FakeResponse`, a mapping (200 JSON), an exception to raise, a callable
        ``(FakeRequest) -> answer`` (each served to every request), or a list of those served one per
        request (an error once used up).
        """
        parts = urlsplit(path)
        query = dict(parse_qsl(parts.query, keep_blank_values=True))
        many = isinstance(answer, list)
        self._routes.append(
            _Route(method.upper(), unquote(parts.path), query, list(answer) if many else [answer], not many)
        )
        return self

    def request(self, method: str, url: str, **kwargs: Any) -> FakeResponse:
        """Record the request and serve the best matching route's next answer (or raise the exception it is).

        An :class:`UnexpectedRequestError` when no route matches, or the matching route's answers are used up.
        """
        parts = urlsplit(url)
        params = dict(parse_qsl(parts.query, keep_blank_values=True))
        params.update({str(key): str(value) for key, value in (kwargs.get("params") or {}).items()})
        sent = {key: kwargs.get(key) for key in ("json", "data", "timeout", "verify", "cert", "allow_redirects")}
        headers = dict(kwargs.get("headers") or {})
        request = FakeRequest(method.upper(), url, unquote(parts.path), params, headers, **sent)
        self.requests.append(request)
        candidates = [route for route in self._routes if route.matches(request)]
        if not candidates:
            known = "; ".join(route.describe() for route in self._routes) or "none"
            raise UnexpectedRequestError(
                f"FakeSession has no route for {request.method} {request.path} with params {request.params!r}. "
                f"Routes known: {known}. Add one with session.add({request.method!r}, {request.path!r}, ...)."
            )
        route = max(candidates, key=lambda item: (len(item.query), len(item.path)))
        if not route.repeat and route.served >= len(route.answers):
            raise UnexpectedRequestError(
                f"FakeSession route {route.describe()} served all its {len(route.answers)} answers; "
                f"request {len(self.requests)} ({request.method} {request.path}) wants one more."
            )
        answer = route.answers[0 if route.repeat else route.served]
        route.served += 1
        if callable(answer) and not isinstance(answer, (FakeResponse, BaseException)):
            answer = answer(request)
        if isinstance(answer, BaseException):
            raise answer
        if isinstance(answer, Mapping):
            answer = FakeResponse(200, dict(answer))
        if not isinstance(answer, FakeResponse):
            raise UnexpectedRequestError(
                f"The answer for {request.method} {request.path} is a {type(answer).__name__}; "
                "answer with a FakeResponse, a mapping, an exception or a callable returning one."
            )
        answer.url = request.url
        return answer

    get = partialmethod(request, "GET")
    post = partialmethod(request, "POST")
    put = partialmethod(request, "PUT")
    delete = partialmethod(request, "DELETE")

    def close(self) -> None:
        """Mark the session closed (nothing to release)."""
        self.closed = True

    def __enter__(self) -> FakeSession:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()


def policy_json(
    name: str,
    policy_type: str = "system.snapshot-expiry",
    *,
    enable: bool = True,
    config: Mapping[str, Any] | None = None,
    content: Mapping[str, Any] | str | None = None,
    version: int = 0,
    description: str | None = None,
    inherited: bool | None = None,
    namespace: Sequence[str] | None = None,
) -> dict[str, Any]:
    """A policy as Polaris sends it, its ``content`` a JSON string.

    ``enable`` and ``config`` make the content unless ``content`` is given (a mapping, or the exact string to
    send). ``inherited`` (from a parent) and ``namespace`` (where it is defined) are for applicable policies.
    """
    if content is None:
        content = {"version": "2025-02-03", "enable": enable, "config": dict(config or {})}
    payload: dict[str, Any] = {
        "policy-type": policy_type,
        "inheritable": True,
        "name": name,
        "content": content if isinstance(content, str) else jsonlib.dumps(dict(content)),
        "version": version,
    }
    if description is not None:
        payload["description"] = description
    if inherited is not None or namespace is not None:
        payload.update(inherited=bool(inherited), namespace=list(namespace or []))
    return payload


def applicable_policies_page(
    policies: Iterable[Mapping[str, Any]], next_page_token: str | None = None
) -> dict[str, Any]:
    """A ``getApplicablePolicies`` answer: ``{"next-page-token", "applicable-policies"}``."""
    return {"next-page-token": next_page_token, "applicable-policies": [dict(policy) for policy in policies]}


def error_response(
    status: int, message: str, error_type: str, *, headers: Mapping[str, str] | None = None
) -> FakeResponse:
    """A Polaris error answer in the Iceberg envelope ``{"error": {"message", "type", "code"}}``."""
    return FakeResponse(status, {"error": {"message": message, "type": error_type, "code": status}}, headers=headers)


def token_response(access_token: str = "token", expires_in: int | None = 3600) -> dict[str, Any]:
    """An OAuth2 token endpoint answer as Polaris sends it."""
    return {
        "access_token": access_token,
        "token_type": "bearer",
        "issued_token_type": "urn:ietf:params:oauth:token-type:access_token",
        **({} if expires_in is None else {"expires_in": expires_in}),
    }
