"""A small Apache Polaris 1.x policy server on loopback: the policy API's endpoints, shapes and errors.

It serves, under ``/api/catalog``, the OAuth2 token endpoint (client credentials; tokens with
``expires_in``; OAuth error JSON) and the eight policy endpoints of Polaris's OpenAPI spec
(``polaris/v1/{prefix}/...``): create, load, list, update, drop, attach, detach, and
applicable-policies with Polaris's inheritance rules (per inheritable type the nearest attachment
wins; ``inherited`` and ``namespace`` as ``PolicyCatalog.getApplicablePolicies`` sets them). Errors
use the Iceberg envelope ``{"error": {"message", "type", "code"}}`` with Polaris's exception names;
a missing, unknown or expired bearer token gets Polaris's bare 401 (``WWW-Authenticate: Bearer``,
no body). Content is validated on create and update as Polaris's Jackson validator does (strict
boolean ``enable``, ``version`` 2025-02-03 or absent, no unknown keys, ``config`` scalars).

Catalogs, namespaces and tables are whatever a test declares (no Iceberg metadata). Faults can
be queued: the next N requests answer a status (429 with ``Retry-After``, 503, an HTML page, ...),
drop the connection without answering, or stall past the client's timeout. ``https`` is served
when a certificate is given (``tests.polaris.tls`` writes one).
"""

from __future__ import annotations

import json
import re
import ssl
import threading
import time
import uuid
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qsl, unquote

PREFIX = "/api/catalog"
SEPARATOR = "\x1f"
CONTENT_VERSION = "2025-02-03"
POLICY_TYPES = (
    "system.data-compaction",
    "system.metadata-compaction",
    "system.orphan-file-removal",
    "system.snapshot-expiry",
)  # all four are inheritable
_NAME = re.compile(r"^[A-Za-z0-9\-_]+$")
_ORPHAN_FIELDS = ("max_orphan_file_age_in_days", "locations")

Namespace = tuple[str, ...]
PolicyKey = tuple[Namespace, str]
Target = tuple[str, tuple[str, ...]]  # ("catalog", ()), ("namespace", levels), ("table-like", levels + name)


class ApiError(Exception):
    """An error answer in Polaris's envelope."""

    def __init__(self, status: int, error_type: str, message: str) -> None:
        super().__init__(message)
        self.status, self.error_type, self.message = status, error_type, message


class _Answer(Exception):
    """A raw answer that is not an envelope (a bare 401, an OAuth error, a plain 404)."""

    def __init__(self, status: int, body: Any = None, headers: Mapping[str, str] | None = None) -> None:
        super().__init__(status)
        self.status, self.body, self.headers = status, body, dict(headers or {})


@dataclass
class StoredPolicy:
    namespace: Namespace
    name: str
    policy_type: str
    content: str | None
    description: str | None = None
    version: int = 0

    def to_json(self) -> dict[str, Any]:
        data: dict[str, Any] = {"policy-type": self.policy_type, "inheritable": True, "name": self.name}
        if self.description is not None:
            data["description"] = self.description
        data.update(content=self.content, version=self.version)
        return data


@dataclass
class CatalogState:
    namespaces: set[Namespace] = field(default_factory=set)
    tables: set[tuple[str, ...]] = field(default_factory=set)
    policies: dict[PolicyKey, StoredPolicy] = field(default_factory=dict)
    mappings: dict[Target, dict[PolicyKey, dict[str, str]]] = field(default_factory=dict)


@dataclass
class Fault:
    kind: str  # "status", "drop" or "stall"
    status: int = 503
    body: str = ""
    headers: dict[str, str] = field(default_factory=dict)
    seconds: float = 0.0
    path: str | None = None


@dataclass(frozen=True)
class Seen:
    """A request the server received (path as sent, query decoded)."""

    method: str
    path: str
    query: dict[str, str]
    headers: dict[str, str]
    body: bytes


def _levels(text: str) -> Namespace:
    return tuple(text.split(SEPARATOR))


def _dotted(levels: tuple[str, ...]) -> str:
    return ".".join(levels)


def validate_content(policy_type: str, content: Any) -> None:
    """Check ``content`` as Polaris's validator does; raise the 400 it answers."""

    def invalid(message: str) -> ApiError:
        return ApiError(400, "InvalidPolicyException", message)

    if content is None or content == "":
        raise invalid("Policy is empty")
    if not isinstance(content, str):
        raise ApiError(400, "BadRequestException", "content must be a string")
    try:
        value = json.loads(content)
    except json.JSONDecodeError as exc:
        raise invalid(f"com.fasterxml.jackson.core.JsonParseException: {exc.msg}") from None
    if not isinstance(value, dict):
        raise invalid(f"Cannot deserialize value of type policy content from {type(value).__name__}")
    allowed = {"enable", "version", "config"}
    if policy_type == "system.orphan-file-removal":
        allowed.update(_ORPHAN_FIELDS)
    for key in value:
        if key not in allowed:
            raise invalid(f'Unrecognized field "{key}", not marked as ignorable')
    if "enable" not in value:
        raise invalid("Missing required creator property 'enable'")
    enable = value["enable"]
    if enable is None:
        raise invalid("Null value for creator property 'enable'")
    if not isinstance(enable, bool):
        raise invalid(f"Invalid boolean value: {enable if isinstance(enable, str) else json.dumps(enable)}")
    version = value.get("version")
    if version not in (None, "") and str(version) != CONTENT_VERSION:
        raise invalid(f"Invalid policy version: {version}")
    config = value.get("config")
    if config is not None:
        if not isinstance(config, dict):
            raise invalid("Cannot deserialize value of type `java.util.Map<java.lang.String,java.lang.String>`")
        for item in config.values():
            if isinstance(item, (dict, list)):
                raise invalid("Cannot deserialize value of type `java.lang.String` from a JSON container")
    age = value.get("max_orphan_file_age_in_days")
    if age is not None:
        if isinstance(age, bool) or not isinstance(age, (int, float, str)):
            raise invalid("Cannot deserialize value of type `int`")
        try:
            days = int(float(age))
        except ValueError:
            raise invalid(f"Cannot deserialize value of type `int` from String {age!r}") from None
        if days < 0:
            raise invalid(f"Invalid max_orphan_file_age_in_days: {days}. It must be greater than or equal to 0")
    locations = value.get("locations")
    if locations is not None and (
        not isinstance(locations, list) or any(isinstance(x, (dict, list)) for x in locations)
    ):
        raise invalid("Cannot deserialize value of type `java.util.List<java.lang.String>`")


class _HTTPServer(ThreadingHTTPServer):
    daemon_threads = True
    polaris: PolarisServer
    tls: ssl.SSLContext | None = None

    def finish_request(self, request: Any, client_address: Any) -> None:
        if self.tls is None:
            super().finish_request(request, client_address)
            return
        try:
            wrapped = self.tls.wrap_socket(request, server_side=True)
        except (ssl.SSLError, OSError):
            return  # the client refused the certificate: nothing to answer
        try:
            super().finish_request(wrapped, client_address)
        finally:
            wrapped.close()

    def handle_error(self, request: Any, client_address: Any) -> None:
        pass  # clients that time out or drop connections are part of the tests


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True  # headers and body go out in two writes: do not wait for an ACK between
    server: _HTTPServer

    def log_message(self, format: str, *args: object) -> None:
        pass

    def do_GET(self) -> None:
        self._handle("GET")

    def do_POST(self) -> None:
        self._handle("POST")

    def do_PUT(self) -> None:
        self._handle("PUT")

    def do_DELETE(self) -> None:
        self._handle("DELETE")

    def _handle(self, method: str) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length) if length else b""
        raw_path, _, raw_query = self.path.partition("?")
        seen = Seen(method, raw_path, dict(parse_qsl(raw_query, keep_blank_values=True)), dict(self.headers), body)
        polaris = self.server.polaris
        fault = polaris._record(seen)
        if fault is not None and fault.kind == "drop":
            self.close_connection = True
            return
        if fault is not None and fault.kind == "stall":
            polaris._released.wait(fault.seconds)
            self.close_connection = True
            return
        if fault is not None:
            self._send(fault.status, fault.body.encode(), fault.headers)
            return
        try:
            status, payload = polaris._dispatch(seen)
            headers: dict[str, str] = {}
        except ApiError as exc:
            status, headers = exc.status, {}
            payload = {"error": {"message": exc.message, "type": exc.error_type, "code": exc.status}}
        except _Answer as answer:
            status, payload, headers = answer.status, answer.body, answer.headers
        if isinstance(payload, (dict, list)):
            headers.setdefault("Content-Type", "application/json")
            data = json.dumps(payload).encode()
        else:
            data = (payload or "").encode()
        self._send(status, data, headers)

    def _send(self, status: int, data: bytes, headers: Mapping[str, str]) -> None:
        self.send_response(status)
        for key, value in headers.items():
            self.send_header(key, value)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        if data:
            self.wfile.write(data)


class PolarisServer:
    """The server, its state, its switches and its fault queue (start with ``with PolarisServer() as server``).

    Args:
        tls: ``(certificate, key)`` PEM paths to serve https.
        token_lifetime: ``expires_in`` of issued tokens, in seconds (they expire then, too).

    Attributes:
        catalogs: The catalogs by name.
        requests: Every request received.
        tokens_issued: Every access token the token endpoint issued.
        max_page_size: A page size the server imposes when the client asks for none.
        repeat_page_token: Answer the same next-page-token forever (a broken server).
        forbidden: Answer 403 to every policy request.
        policy_store_enabled: ``False`` answers 406 like a realm with ENABLE_POLICY_STORE off.
    """

    def __init__(self, tls: tuple[str, str] | None = None, token_lifetime: int = 3600) -> None:
        self.catalogs: dict[str, CatalogState] = {}
        self.requests: list[Seen] = []
        self.tokens_issued: list[str] = []
        self.token_lifetime = token_lifetime
        self.max_page_size: int | None = None
        self.repeat_page_token = False
        self.forbidden = False
        self.policy_store_enabled = True
        self._clients: dict[str, str] = {}
        self._tokens: dict[str, float | None] = {}
        self._faults: list[Fault] = []
        self._lock = threading.RLock()
        self._released = threading.Event()
        self._httpd = _HTTPServer(("127.0.0.1", 0), _Handler)
        self._httpd.polaris = self
        if tls is not None:
            context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
            context.load_cert_chain(*tls)
            self._httpd.tls = context
        self._thread = threading.Thread(target=self._httpd.serve_forever, args=(0.02,), daemon=True)
        scheme = "https" if tls else "http"
        self.url = f"{scheme}://127.0.0.1:{self._httpd.server_address[1]}"
        self.base_url = self.url + PREFIX
        self.token_url = self.base_url + "/v1/oauth/tokens"

    def __enter__(self) -> PolarisServer:
        self._thread.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self._released.set()
        self._httpd.shutdown()
        self._httpd.server_close()
        self._thread.join(5)

    # --- arranging ------------------------------------------------------------------------------

    def add_catalog(self, name: str) -> CatalogState:
        with self._lock:
            return self.catalogs.setdefault(name, CatalogState())

    def add_namespace(self, catalog: str, namespace: str | Namespace) -> Namespace:
        levels = tuple(namespace.split(".")) if isinstance(namespace, str) else tuple(namespace)
        with self._lock:
            for depth in range(1, len(levels) + 1):
                self.catalogs[catalog].namespaces.add(levels[:depth])
        return levels

    def add_table(self, catalog: str, identifier: str | tuple[str, ...]) -> tuple[str, ...]:
        path = tuple(identifier.split(".")) if isinstance(identifier, str) else tuple(identifier)
        self.add_namespace(catalog, path[:-1])
        with self._lock:
            self.catalogs[catalog].tables.add(path)
        return path

    def add_client(self, client_id: str, client_secret: str) -> None:
        self._clients[client_id] = client_secret

    def issue_token(self, lifetime: float | None = None) -> str:
        """A token valid for ``lifetime`` seconds (forever when ``None``), as a principal's."""
        token = f"static-{uuid.uuid4().hex}"
        self._tokens[token] = None if lifetime is None else time.monotonic() + lifetime
        return token

    def revoke_tokens(self) -> None:
        self._tokens.clear()

    def put_policy(
        self,
        catalog: str,
        namespace: str | Namespace,
        name: str,
        policy_type: str = "system.snapshot-expiry",
        content: str | Mapping[str, Any] | None = None,
        description: str | None = None,
    ) -> StoredPolicy:
        """Store a policy as is (no validation: for content Polaris would refuse today)."""
        levels = self.add_namespace(catalog, namespace)
        if content is None:
            content = {"version": CONTENT_VERSION, "enable": True, "config": {}}
        text = content if isinstance(content, str) else json.dumps(dict(content))
        stored = StoredPolicy(levels, name, policy_type, text, description)
        with self._lock:
            self.catalogs[catalog].policies[(levels, name)] = stored
        return stored

    def attach(
        self,
        catalog: str,
        namespace: str | Namespace,
        name: str,
        target_type: str,
        path: str | tuple[str, ...] = (),
        parameters: Mapping[str, str] | None = None,
    ) -> None:
        """Attach a stored policy (with the same checks as the API)."""
        levels = tuple(namespace.split(".")) if isinstance(namespace, str) else tuple(namespace)
        target_path = tuple(path.split(".")) if isinstance(path, str) and path else tuple(path)
        with self._lock:
            state = self.catalogs[catalog]
            key = self._attach(
                state, self._policy(state, levels, name), {"type": target_type, "path": list(target_path)}
            )
            state.mappings[key][(levels, name)] = dict(parameters or {})

    # --- faults ---------------------------------------------------------------------------------

    def fail_next(
        self,
        count: int = 1,
        status: int = 503,
        *,
        retry_after: str | None = None,
        body: str | Mapping[str, Any] | None = None,
        content_type: str = "application/json",
        path: str | None = None,
    ) -> None:
        """Answer the next ``count`` requests (under ``path`` when given) with ``status``."""
        headers = {"Content-Type": content_type}
        if retry_after is not None:
            headers["Retry-After"] = retry_after
        if body is None:
            body = {"error": {"message": f"injected {status}", "type": "ServiceFailureException", "code": status}}
        text = body if isinstance(body, str) else json.dumps(dict(body))
        with self._lock:
            self._faults.extend(Fault("status", status, text, headers, path=path) for _ in range(count))

    def drop_next(self, count: int = 1, path: str | None = None) -> None:
        """Close the connection of the next ``count`` requests without answering."""
        with self._lock:
            self._faults.extend(Fault("drop", path=path) for _ in range(count))

    def stall_next(self, count: int = 1, seconds: float = 5.0, path: str | None = None) -> None:
        """Answer nothing to the next ``count`` requests for ``seconds`` (then close)."""
        with self._lock:
            self._faults.extend(Fault("stall", seconds=seconds, path=path) for _ in range(count))

    def _record(self, seen: Seen) -> Fault | None:
        with self._lock:
            self.requests.append(seen)
            for index, fault in enumerate(self._faults):
                if fault.path is None or fault.path in unquote(seen.path):
                    return self._faults.pop(index)
        return None

    # --- routing --------------------------------------------------------------------------------

    def _dispatch(self, seen: Seen) -> tuple[int, Any]:
        if not seen.path.startswith(PREFIX + "/"):
            raise _Answer(404, "Not Found", {"Content-Type": "text/plain"})
        segments = [unquote(part) for part in seen.path[len(PREFIX) + 1 :].split("/")]
        if segments == ["v1", "oauth", "tokens"] and seen.method == "POST":
            return self._token(dict(parse_qsl(seen.body.decode(), keep_blank_values=True)))
        if segments[:2] != ["polaris", "v1"] or len(segments) < 4:
            raise _Answer(404, "Not Found", {"Content-Type": "text/plain"})
        self._authenticate(seen.headers)
        if not self.policy_store_enabled:
            raise ApiError(406, "UnsupportedOperationException", "Feature not enabled: ENABLE_POLICY_STORE")
        if self.forbidden:
            raise ApiError(403, "ForbiddenException", "Principal 'root' is not authorized for this operation")
        with self._lock:
            state = self.catalogs.get(segments[2])
            if state is None:
                raise ApiError(404, "NotFoundException", f"Unable to find catalog {segments[2]}")
            return self._route(state, seen, segments[3:])

    def _route(self, state: CatalogState, seen: Seen, tail: list[str]) -> tuple[int, Any]:
        method = seen.method
        if tail == ["applicable-policies"] and method == "GET":
            return 200, self._applicable(state, seen.query)
        if len(tail) >= 3 and tail[0] == "namespaces" and tail[2] == "policies":
            namespace = _levels(tail[1])
            if namespace not in state.namespaces:
                raise ApiError(404, "NoSuchNamespaceException", f"Namespace does not exist: {_dotted(namespace)}")
            if len(tail) == 3 and method == "GET":
                return 200, self._list(state, namespace, seen.query)
            if len(tail) == 3 and method == "POST":
                return 200, self._create(state, namespace, self._json(seen.body))
            if len(tail) in (4, 5):
                policy = self._policy(state, namespace, tail[3])
                if len(tail) == 4 and method == "GET":
                    return 200, {"policy": policy.to_json()}
                if len(tail) == 4 and method == "PUT":
                    return 200, self._update(policy, self._json(seen.body))
                if len(tail) == 4 and method == "DELETE":
                    return self._drop(state, policy, seen.query.get("detach-all") == "true")
                if tail[4:] == ["mappings"] and method == "PUT":
                    return self._attach_request(state, policy, self._json(seen.body))
                if tail[4:] == ["mappings"] and method == "POST":
                    return self._detach(state, policy, self._json(seen.body))
        raise ApiError(405, "NotAllowedException", f"{method} is not supported on {seen.path}")

    @staticmethod
    def _json(body: bytes) -> dict[str, Any]:
        try:
            value = json.loads(body or b"null")
        except json.JSONDecodeError as exc:
            raise ApiError(400, "BadRequestException", f"Malformed request body: {exc.msg}") from None
        if not isinstance(value, dict):
            raise ApiError(400, "BadRequestException", "The request body must be a JSON object")
        return value

    # --- auth -----------------------------------------------------------------------------------

    def _token(self, form: dict[str, str]) -> tuple[int, Any]:
        def oauth(status: int, error: str, description: str) -> _Answer:
            return _Answer(status, {"error": error, "error_description": description})

        client_id, secret = form.get("client_id", ""), form.get("client_secret", "")
        if not client_id or not secret:
            raise oauth(400, "invalid_client", "The Client is invalid")
        if form.get("grant_type") != "client_credentials":
            raise oauth(400, "invalid_grant", "The grant is invalid")
        scopes = form.get("scope", "").split(" ")
        if not all(scope.startswith("PRINCIPAL_ROLE:") and len(scope) > len("PRINCIPAL_ROLE:") for scope in scopes):
            raise oauth(400, "invalid_scope", "The scope is invalid")
        if self._clients.get(client_id) != secret:
            raise oauth(401, "unauthorized_client", "The client is not authorized")
        token = f"token-{len(self.tokens_issued) + 1}-{uuid.uuid4().hex[:8]}"
        self.tokens_issued.append(token)
        self._tokens[token] = time.monotonic() + self.token_lifetime
        answer = {
            "access_token": token,
            "token_type": "bearer",
            "issued_token_type": "urn:ietf:params:oauth:token-type:access_token",
            "expires_in": self.token_lifetime,
        }
        return 200, answer

    def _authenticate(self, headers: Mapping[str, str]) -> None:
        value = next((v for k, v in headers.items() if k.lower() == "authorization"), "")
        scheme, _, token = value.partition(" ")
        expiry = self._tokens.get(token, 0.0) if scheme.lower() == "bearer" else 0.0
        if expiry is not None and expiry <= time.monotonic():
            raise _Answer(401, None, {"WWW-Authenticate": "Bearer"})

    def token_valid(self, token: str) -> bool:
        expiry = self._tokens.get(token, 0.0)
        return expiry is None or expiry > time.monotonic()

    # --- policies -------------------------------------------------------------------------------

    @staticmethod
    def _policy(state: CatalogState, namespace: Namespace, name: str) -> StoredPolicy:
        policy = state.policies.get((namespace, name))
        if policy is None:
            raise ApiError(404, "NoSuchPolicyException", f"Policy does not exist: {_dotted(namespace)}.{name}")
        return policy

    def _create(self, state: CatalogState, namespace: Namespace, body: dict[str, Any]) -> dict[str, Any]:
        name, policy_type = body.get("name"), body.get("type")
        if not isinstance(name, str) or not _NAME.match(name):
            raise ApiError(400, "BadRequestException", f"Invalid policy name: {name}")
        if not isinstance(policy_type, str):
            raise ApiError(400, "BadRequestException", "Missing required property 'type'")
        if (namespace, name) in state.policies:
            raise ApiError(409, "AlreadyExistsException", f"Policy already exists {_dotted(namespace)}.{name}")
        if policy_type not in POLICY_TYPES:
            raise ApiError(400, "BadRequestException", f"Unknown policy type: {policy_type}")
        validate_content(policy_type, body.get("content"))
        stored = StoredPolicy(namespace, name, policy_type, body["content"], body.get("description"))
        state.policies[(namespace, name)] = stored
        return {"policy": stored.to_json()}

    def _update(self, policy: StoredPolicy, body: dict[str, Any]) -> dict[str, Any]:
        given = body.get("current-policy-version")
        if not isinstance(given, int):
            raise ApiError(400, "BadRequestException", "Missing current-policy-version")
        if given != policy.version:
            raise ApiError(
                409,
                "PolicyVersionMismatchException",
                f"Policy version mismatch. Given version is {given}, current version is {policy.version}",
            )
        content, description = body.get("content"), body.get("description")
        if content == policy.content and description == policy.description:
            return {"policy": policy.to_json()}
        validate_content(policy.policy_type, content)
        policy.content, policy.description, policy.version = content, description, policy.version + 1
        return {"policy": policy.to_json()}

    @staticmethod
    def _drop(state: CatalogState, policy: StoredPolicy, detach_all: bool) -> tuple[int, Any]:
        key = (policy.namespace, policy.name)
        attached = [target for target, policies in state.mappings.items() if key in policies]
        if attached and not detach_all:
            raise ApiError(
                400, "PolicyInUseException", f"Policy {_dotted(policy.namespace)}.{policy.name} is still attached"
            )
        for target in attached:
            del state.mappings[target][key]
        del state.policies[key]
        return 204, None

    @staticmethod
    def _target(state: CatalogState, target: Any) -> Target:
        if not isinstance(target, dict) or target.get("type") not in ("catalog", "namespace", "table-like"):
            raise ApiError(400, "BadRequestException", f"Invalid policy attachment target: {target}")
        path = tuple(target.get("path") or ())
        if target["type"] == "catalog":
            if path:
                raise ApiError(400, "BadRequestException", "A catalog target takes no path")
            return ("catalog", ())
        if target["type"] == "namespace":
            if path not in state.namespaces:
                raise ApiError(404, "NoSuchNamespaceException", f"Namespace does not exist: {_dotted(path)}")
            return ("namespace", path)
        if path not in state.tables:
            raise ApiError(404, "NoSuchTableException", f"Table does not exist: {_dotted(path)}")
        return ("table-like", path)

    def _attach(self, state: CatalogState, policy: StoredPolicy, target: Any) -> Target:
        key = self._target(state, target)
        for other in state.mappings.get(key, {}):
            if other != (policy.namespace, policy.name) and state.policies[other].policy_type == policy.policy_type:
                where = _dotted(key[1]) if key[1] else "the catalog"
                raise ApiError(
                    409,
                    "PolicyMappingAlreadyExistsException",
                    f"The policy mapping of same type ({policy.policy_type}) for {where} already exists",
                )
        state.mappings.setdefault(key, {})
        return key

    def _attach_request(self, state: CatalogState, policy: StoredPolicy, body: dict[str, Any]) -> tuple[int, Any]:
        key = self._attach(state, policy, body.get("target"))
        state.mappings[key][(policy.namespace, policy.name)] = dict(body.get("parameters") or {})
        return 204, None

    def _detach(self, state: CatalogState, policy: StoredPolicy, body: dict[str, Any]) -> tuple[int, Any]:
        key = self._target(state, body.get("target"))
        if (policy.namespace, policy.name) not in state.mappings.get(key, {}):
            raise ApiError(404, "NoSuchMappingException", f"Policy {policy.name} is not attached to that target")
        del state.mappings[key][(policy.namespace, policy.name)]
        return 204, None

    # --- reading --------------------------------------------------------------------------------

    def _page(self, items: list[Any], query: Mapping[str, str]) -> tuple[list[Any], str | None]:
        size: int | None = self.max_page_size
        if "pageSize" in query:
            try:
                size = int(query["pageSize"])
            except ValueError:
                size = 0
            if size < 1:
                raise ApiError(400, "BadRequestException", f"Invalid pageSize: {query['pageSize']}")
        start = 0
        if query.get("pageToken"):
            match = re.fullmatch(r"page-(\d+)", query["pageToken"])
            if match is None:
                raise ApiError(400, "BadRequestException", f"Invalid page token: {query['pageToken']}")
            start = int(match.group(1))
        if size is None:
            return items[start:], None
        if self.repeat_page_token:
            return items[start : start + size], f"page-{size}"
        following = start + size
        return items[start:following], f"page-{following}" if following < len(items) else None

    def _list(self, state: CatalogState, namespace: Namespace, query: Mapping[str, str]) -> dict[str, Any]:
        wanted = query.get("policyType") if query.get("policyType") in POLICY_TYPES else None
        found = sorted(
            name
            for (levels, name), policy in state.policies.items()
            if levels == namespace and (wanted is None or policy.policy_type == wanted)
        )
        page, following = self._page([{"namespace": list(namespace), "name": name} for name in found], query)
        return {"next-page-token": following, "identifiers": page}

    def _applicable(self, state: CatalogState, query: Mapping[str, str]) -> dict[str, Any]:
        # Polaris reads an unknown policyType as no filter at all.
        wanted = query.get("policyType") if query.get("policyType") in POLICY_TYPES else None
        path: list[Target] = [("catalog", ())]
        if query.get("namespace"):
            namespace = _levels(query["namespace"])
            if namespace not in state.namespaces:
                raise ApiError(404, "NoSuchNamespaceException", f"Namespace does not exist: {_dotted(namespace)}")
            path.extend(("namespace", namespace[:depth]) for depth in range(1, len(namespace) + 1))
            if query.get("target-name"):
                table = (*namespace, query["target-name"])
                if table not in state.tables:
                    raise ApiError(404, "NoSuchTableException", f"Table does not exist: {_dotted(table)}")
                path.append(("table-like", table))
        effective: dict[str, PolicyKey] = {}  # nearest attachment wins, per (inheritable) type
        direct: set[PolicyKey] = set()
        for depth, entity in enumerate(path):
            for key in state.mappings.get(entity, {}):
                policy = state.policies[key]
                if wanted is None or policy.policy_type == wanted:
                    effective[policy.policy_type] = key
                    if depth == len(path) - 1:
                        direct.add(key)
        items = [
            {**state.policies[key].to_json(), "inherited": key not in direct, "namespace": list(key[0])}
            for key in effective.values()
        ]
        page, following = self._page(items, query)
        return {"next-page-token": following, "applicable-policies": page}


def iter_seen(server: PolarisServer, path_part: str) -> Iterator[Seen]:
    """The requests whose decoded path contains ``path_part``."""
    return (seen for seen in list(server.requests) if path_part in unquote(seen.path))
