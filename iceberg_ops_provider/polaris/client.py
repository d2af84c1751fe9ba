"""Apache Polaris 1.x's policy API over HTTP, through an injectable ``requests``-like session.

Paths are ``{base_url}/polaris/v1/{catalog}/...`` with ``base_url`` the catalog API root (PyIceberg's ``uri``);
multi-level namespaces travel joined with the 0x1F unit separator. Retries, timeouts and typed errors are
:mod:`~iceberg_ops_provider.polaris.transport`'s.
"""

from __future__ import annotations

import logging
import math
import os
from collections.abc import Mapping, Sequence
from typing import Any
from urllib.parse import quote, urlsplit

import requests

from iceberg_ops_provider.catalogs.requests_of import one_line
from iceberg_ops_provider.errors import PolarisError, PolarisRequestError
from iceberg_ops_provider.polaris.arguments import (
    SEPARATOR,
    TARGETS,
    NamespaceLike,
    TargetType,
    attachment_target,
    check_name,
    check_policy_type,
    content_text,
    namespace_levels,
)
from iceberg_ops_provider.polaris.auth import DEFAULT_SCOPE, ClientCredentialsAuth, StaticTokenAuth
from iceberg_ops_provider.polaris.policies import ApplicablePolicy, Policy, PolicyContent
from iceberg_ops_provider.polaris.transport import Call, HTTPResponse, HTTPSession, Transport

__all__ = ["HTTPResponse", "HTTPSession", "NamespaceLike", "PolarisPolicyClient", "TargetType"]

logger = logging.getLogger(__name__)

MAX_PAGES = 10_000
"""Pages followed before a listing is declared endless."""


class PolarisPolicyClient:
    """A client for Apache Polaris 1.x's policy API (the Policy Store) of one Polaris catalog.

    Args:
        base_url: The catalog API root, ``http(s)://host:port/api/catalog`` (PyIceberg's ``uri``).
        catalog: The Polaris catalog name (PyIceberg's ``warehouse`` for Polaris).
        token: A bearer token; with ``credential`` too, it is used until Polaris refuses it.
        credential: ``"client_id:client_secret"``: OAuth2 tokens are fetched and refreshed.
        oauth2_server_uri: The token endpoint (default ``{base_url}/v1/oauth/tokens``).
        verify: ``True``, a CA bundle path, or ``False`` (logged as a warning).
        max_retries: Retries of a 429 or 503, or a failed connection (only through a ``requests.Session``).
        page_size: ``pageSize`` asked of listings (``None``: Polaris's default); every page is followed.
        cert: A client certificate for mutual TLS: a PEM path, or ``(cert, key)`` paths.
        backoff: ``urllib3``'s backoff factor; ``max_backoff`` caps each wait, ``Retry-After`` included.

    Raises:
        PolarisRequestError: An argument cannot work (a URL without http(s), a missing CA bundle, ...).
    """

    def __init__(
        self,
        base_url: str,
        catalog: str,
        *,
        token: str | None = None,
        credential: str | None = None,
        oauth2_server_uri: str | None = None,
        scope: str = DEFAULT_SCOPE,
        verify: bool | str = True,
        timeout: float = 30.0,
        max_retries: int = 3,
        page_size: int | None = None,
        session: HTTPSession | None = None,
        headers: Mapping[str, str] | None = None,
        cert: str | tuple[str, str] | None = None,
        backoff: float = 0.5,
        max_backoff: float = 30.0,
    ) -> None:
        parts = urlsplit(base_url) if isinstance(base_url, str) else None
        if parts is None or parts.scheme not in ("http", "https") or not parts.netloc:
            shown = base_url if isinstance(base_url, str) and "@" not in base_url else "<a URL with credentials>"
            raise PolarisRequestError(
                f"base_url must be Polaris's catalog API root like 'https://polaris.example:8181/api/catalog', "
                f"not {shown!r}."
            )
        for argument, url in (("base_url", base_url), ("oauth2_server_uri", oauth2_server_uri)):
            if isinstance(url, str) and "@" in urlsplit(url).netloc:  # not echoed: it holds a password
                raise PolarisRequestError(
                    f"{argument} holds a user name or password (user:password@host): it would show up in logs "
                    "and messages. Pass the credentials as credential='client-id:secret' or token= instead."
                )
        if not isinstance(catalog, str) or not catalog.strip() or "/" in catalog:
            raise PolarisRequestError(
                f"catalog must name the Polaris catalog (PyIceberg's `warehouse` for Polaris), not {catalog!r}."
            )
        if isinstance(verify, str):
            if not os.path.exists(verify):
                raise PolarisRequestError(
                    f"The CA bundle {verify!r} (verify=) does not exist: pass the path of a PEM file with the CA "
                    "that signed Polaris's certificate, or verify=True for the system CAs."
                )
        elif not isinstance(verify, bool):
            raise PolarisRequestError(f"verify must be True, False or a CA bundle path, not {verify!r}.")
        if isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or not 0 < timeout < math.inf:
            raise PolarisRequestError(f"timeout must be a positive number of seconds, not {timeout!r}.")
        if isinstance(max_retries, bool) or not isinstance(max_retries, int) or max_retries < 0:
            raise PolarisRequestError(f"max_retries must be a whole number >= 0, not {max_retries!r}.")
        if page_size is not None and (isinstance(page_size, bool) or not isinstance(page_size, int) or page_size < 1):
            raise PolarisRequestError(f"page_size must be a whole number >= 1 or None, not {page_size!r}.")
        for name, value in (("backoff", backoff), ("max_backoff", max_backoff)):
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 <= value < math.inf:
                raise PolarisRequestError(f"{name} must be a number of seconds >= 0, not {value!r}.")
        self.base_url = base_url.rstrip("/")
        self.catalog = catalog
        self.token_url = oauth2_server_uri or f"{self.base_url}/v1/oauth/tokens"
        self._api = f"{self.base_url}/polaris/v1/{quote(catalog, safe='')}"
        self._page_size = page_size
        self._owns_session = session is None
        self._transport = Transport(
            session if session is not None else requests.Session(),
            base_url=self.base_url,
            catalog=catalog,
            verify=verify,
            timeout=float(timeout),
            max_retries=max_retries,
            backoff=float(backoff),
            max_backoff=float(max_backoff),
            headers=headers,
            cert=cert,
            token_url=self.token_url,
        )
        if credential:
            self._transport.auth = ClientCredentialsAuth(
                credential, self.token_url, self._transport.fetch_token, scope=scope, initial_token=token
            )
        elif token:
            self._transport.auth = StaticTokenAuth(token)
        if verify is False:
            logger.warning(
                "TLS certificate verification is off for Polaris at %s: anyone on the network path can read "
                "and change the traffic, tokens included. Pass verify='/path/ca.pem' to trust a private CA instead.",
                self.base_url,
            )

    @classmethod
    def from_catalog_properties(
        cls, properties: Mapping[str, Any], catalog: str | None = None, **kwargs: Any
    ) -> PolarisPolicyClient:
        """A client for the Polaris behind a PyIceberg REST catalog, from that catalog's properties.

        Reads ``uri``, ``warehouse`` (unless ``catalog`` is given), ``credential``, ``token``, ``scope``,
        ``oauth2-server-uri``, ``ssl`` (nested or dotted), ``header.*``, ``timeout`` and ``rest-page-size``;
        ``kwargs`` override any of them.

        Raises:
            PolarisRequestError: ``uri`` is missing, or no catalog name can be found.
        """
        props = dict(properties)
        uri = props.get("uri")
        if not uri:
            raise PolarisRequestError(
                "The catalog properties have no 'uri': Polaris's policy API lives beside its Iceberg REST API, "
                "so pass the REST catalog's properties (uri, warehouse, credential, ...)."
            )
        if urlsplit(str(uri)).scheme not in ("http", "https"):
            raise PolarisRequestError(
                f"The catalog's uri {uri!r} is not an HTTP(S) URL: these are not a REST catalog's properties. "
                "Polaris's policy API needs Polaris's catalog API root (https://<host>:8181/api/catalog): build "
                "PolarisPolicyClient(base_url, catalog, ...) directly, or pass the Polaris REST catalog's properties."
            )
        name = catalog or props.get("warehouse")
        if not name or "://" in str(name):
            raise PolarisRequestError(
                "Cannot tell the Polaris catalog name: the properties' 'warehouse' is "
                f"{props.get('warehouse')!r}. Pass catalog='<Polaris catalog name>'."
            )
        options: dict[str, Any] = {key: str(props[key]) for key in ("credential", "token", "scope") if props.get(key)}
        if props.get("oauth2-server-uri"):
            options["oauth2_server_uri"] = str(props["oauth2-server-uri"])
        ssl = props.get("ssl") if isinstance(props.get("ssl"), Mapping) else {}
        client = ssl.get("client") if isinstance(ssl.get("client"), Mapping) else {}
        ca_bundle = ssl.get("cabundle", props.get("ssl.cabundle"))
        if isinstance(ca_bundle, bool) or (isinstance(ca_bundle, str) and ca_bundle.lower() in ("true", "false")):
            options["verify"] = ca_bundle if isinstance(ca_bundle, bool) else ca_bundle.lower() == "true"
        elif ca_bundle:
            options["verify"] = str(ca_bundle)
        client_cert = client.get("cert", props.get("ssl.client.cert"))
        client_key = client.get("key", props.get("ssl.client.key"))
        if client_cert:
            options["cert"] = (str(client_cert), str(client_key)) if client_key else str(client_cert)
        headers = {key[len("header.") :]: str(value) for key, value in props.items() if key.startswith("header.")}
        if headers:
            options["headers"] = headers
        for key, option, read, what in (
            ("timeout", "timeout", float, "a number of seconds"),
            ("rest-page-size", "page_size", int, "a whole number"),
        ):
            if props.get(key) not in (None, ""):
                try:
                    options[option] = read(props[key])
                except (TypeError, ValueError):
                    raise PolarisRequestError(
                        f"The catalog property {key!r} must be {what}, not {props[key]!r}."
                    ) from None
        options.update(kwargs)
        return cls(str(uri), str(name), **options)

    def applicable_policies(
        self,
        namespace: NamespaceLike | None = None,
        table: str | None = None,
        policy_type: str | None = None,
    ) -> list[ApplicablePolicy]:
        """The policies that apply to the catalog, a namespace (``namespace``) or a table, inherited ones included.

        Polaris resolves inheritance (the nearest attachment wins); every page is followed. A maintenance
        policy with malformed content is returned with ``content=None`` and the reason in ``content_error``.

        Raises:
            PolarisError: A typed subclass for each way the request can fail.
            PolicyContentError: Polaris answered a policy without a name or type.
        """
        if table is not None and namespace is None:
            raise PolarisRequestError(
                f"The table {table!r} needs its namespace: call applicable_policies('<namespace>', {table!r})."
            )
        if table is not None and (not isinstance(table, str) or not table):
            raise PolarisRequestError(f"The table must be a non-empty name, not {table!r}.")
        params: dict[str, str] = {}
        target, privilege = "the catalog", "CATALOG_READ_PROPERTIES on the catalog"
        if namespace is not None:
            levels = namespace_levels(namespace)
            params["namespace"] = SEPARATOR.join(levels)
            target, privilege = f"namespace {'.'.join(levels)}", "NAMESPACE_READ_PROPERTIES on the namespace"
        if table is not None:
            params["target-name"] = table
            target, privilege = f"table {'.'.join(levels)}.{table}", "TABLE_READ_PROPERTIES on the table"
        if policy_type is not None:
            params["policyType"] = check_policy_type(policy_type)
        url = f"{self._api}/applicable-policies"
        items = self._pages(f"list the policies applicable to {target}", url, params, "applicable-policies", privilege)
        # Leniently: a policy with bad content comes back with its content_error, so the others still apply.
        policies = [ApplicablePolicy.from_json(self._object(item, url), where=url, lenient=True) for item in items]
        # Polaris 1.x ignores a policyType it does not know instead of filtering by it.
        return [policy for policy in policies if policy_type is None or policy.policy_type == policy_type]

    def load_policy(self, namespace: NamespaceLike, name: str) -> Policy:
        """The policy ``name`` defined in ``namespace``.

        Raises:
            PolarisNotFoundError: No such policy (or namespace, or catalog).
            PolicyContentError: Its content is malformed for its maintenance type.
        """
        url, what = self._at(namespace, name)
        return self._policy(
            self._transport.request(Call(f"load {what}", "GET", url, privilege="POLICY_READ on it")), url
        )

    def list_policies(
        self, namespace: NamespaceLike, policy_type: str | None = None
    ) -> list[tuple[tuple[str, ...], str]]:
        """The ``(namespace, name)`` of every policy defined in ``namespace`` (every page followed).

        Raises:
            PolarisNotFoundError: No such namespace (or catalog).
        """
        levels = namespace_levels(namespace)
        params = {"policyType": check_policy_type(policy_type)} if policy_type is not None else {}
        url = self._policies_url(levels)
        items = self._pages(
            f"list the policies of namespace {'.'.join(levels)}", url, params, "identifiers", "POLICY_LIST on it"
        )
        found: list[tuple[tuple[str, ...], str]] = []
        for item in items:
            entry = self._object(item, url)
            ns, name = entry.get("namespace"), entry.get("name")
            if not isinstance(name, str) or not isinstance(ns, list):
                raise PolarisError(
                    f"GET {url} answered a policy identifier without a namespace list and a name: "
                    f"{one_line(entry, 300)}. Is base_url a Polaris 1.x catalog API root?",
                    url=url,
                )
            found.append((tuple(str(level) for level in ns), name))
        return found

    def create_policy(
        self,
        namespace: NamespaceLike,
        name: str,
        policy_type: str,
        content: Mapping[str, Any] | PolicyContent | str,
        description: str | None = None,
    ) -> Policy:
        """Create a policy in ``namespace`` (version 0) and return it as Polaris stored it.

        ``content`` is checked against the type's schema first; a mapping or :class:`PolicyContent` is sent
        JSON-encoded, a string as the JSON it is.

        Raises:
            PolicyContentError: The content is not valid for the type (nothing was sent).
            PolarisConflictError: A policy of that name exists in the namespace.
        """
        levels = namespace_levels(namespace)
        check_name(name)
        check_policy_type(policy_type)
        body: dict[str, Any] = {"name": name, "type": policy_type, "content": content_text(policy_type, content, name)}
        if description is not None:
            body["description"] = description
        url = self._policies_url(levels)
        action = f"create policy {name!r} in namespace {'.'.join(levels)}"
        return self._policy(
            self._transport.request(Call(action, "POST", url, json=body, privilege="POLICY_CREATE on it")), url
        )

    def update_policy(
        self,
        namespace: NamespaceLike,
        policy: Policy,
        *,
        content: Mapping[str, Any] | PolicyContent | str | None = None,
        description: str | None = None,
    ) -> Policy:
        """Replace the content and/or description of ``policy`` (as loaded: its ``version`` is expected).

        Raises:
            PolarisConflictError: The policy changed since it was loaded (load it again and retry).
            PolicyContentError: The new content is not valid for the policy's type.
        """
        url, what = self._at(namespace, policy.name)
        text = content_text(policy.policy_type, content, policy.name) if content is not None else policy.raw_content
        body: dict[str, Any] = {"current-policy-version": policy.version, "content": text}
        new_description = description if description is not None else policy.description
        if new_description is not None:
            body["description"] = new_description
        call = Call(f"update {what}", "PUT", url, json=body, privilege="POLICY_WRITE on it")
        return self._policy(self._transport.request(call), url)

    def attach_policy(
        self,
        namespace: NamespaceLike,
        name: str,
        target_type: TargetType,
        path: NamespaceLike = (),
        parameters: Mapping[str, str] | None = None,
    ) -> None:
        """Attach policy ``name`` of ``namespace`` to the catalog, a namespace or a table.

        ``path`` is ``()`` for the catalog, the namespace's levels, or the table's namespace levels followed
        by its name (``"a.b.orders"``); attaching again replaces the (string) ``parameters``.

        Raises:
            PolarisConflictError: Another inheritable policy of the same type is attached to the target.
        """
        if parameters is not None and (
            not isinstance(parameters, Mapping)
            or not all(isinstance(key, str) and isinstance(value, str) for key, value in parameters.items())
        ):
            raise PolarisRequestError(f"Attachment parameters must map strings to strings, not {parameters!r}.")
        extra = {"parameters": dict(parameters)} if parameters is not None else {}
        self._mapping("ATTACH", namespace, name, target_type, path, extra)

    def detach_policy(
        self, namespace: NamespaceLike, name: str, target_type: TargetType, path: NamespaceLike = ()
    ) -> None:
        """Detach policy ``name`` of ``namespace`` from a target (see :meth:`attach_policy` for ``path``).

        Raises:
            PolarisNotFoundError: The policy is not attached to that target, or either does not exist.
        """
        self._mapping("DETACH", namespace, name, target_type, path, {})

    def drop_policy(self, namespace: NamespaceLike, name: str, detach_all: bool = False) -> None:
        """Drop policy ``name`` of ``namespace``; ``detach_all`` first detaches it from everything.

        Raises:
            PolarisRequestError: The policy is still attached and ``detach_all`` is false.
        """
        url, what = self._at(namespace, name)
        params = {"detach-all": "true" if detach_all else "false"}
        self._transport.request(Call(f"drop {what}", "DELETE", url, params=params, privilege="POLICY_DROP on it"))

    def close(self) -> None:
        """Close the HTTP session if the client created it."""
        if self._owns_session:
            self._transport.session.close()  # type: ignore[attr-defined]  # a requests.Session

    def __enter__(self) -> PolarisPolicyClient:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return (
            f"PolarisPolicyClient(base_url={self.base_url!r}, catalog={self.catalog!r}, auth={self._transport.auth!r})"
        )

    def _policies_url(self, levels: Sequence[str]) -> str:
        return f"{self._api}/namespaces/{quote(SEPARATOR.join(levels), safe='')}/policies"

    def _at(self, namespace: NamespaceLike, name: str) -> tuple[str, str]:
        levels = namespace_levels(namespace)
        url = f"{self._policies_url(levels)}/{quote(check_name(name), safe='')}"
        return url, f"policy {name!r} of namespace {'.'.join(levels)}"

    def _mapping(
        self,
        verb: str,
        namespace: NamespaceLike,
        name: str,
        target_type: TargetType,
        path: NamespaceLike,
        extra: dict[str, Any],
    ) -> None:
        url, what = self._at(namespace, name)
        target = attachment_target(target_type, path)
        noun, entity = TARGETS[target_type]
        action = (
            f"{verb.lower()} {what} {'to' if verb == 'ATTACH' else 'from'} {noun} {'.'.join(target['path'])}".strip()
        )
        privilege = f"POLICY_{verb} on the policy and {entity}_{verb}_POLICY on the target"
        method = "PUT" if verb == "ATTACH" else "POST"
        self._transport.request(
            Call(action, method, f"{url}/mappings", json={"target": target, **extra}, privilege=privilege)
        )

    def _policy(self, body: Any, url: str) -> Policy:
        if not isinstance(body, Mapping) or not isinstance(body.get("policy"), Mapping):
            raise PolarisError(
                f"{url} answered JSON without a 'policy' object ({one_line(body, 300)}). "
                "Is base_url a Polaris 1.x catalog API root (.../api/catalog)?",
                url=url,
            )
        return Policy.from_json(body["policy"], where=url)

    @staticmethod
    def _object(item: Any, url: str) -> Mapping[str, Any]:
        if not isinstance(item, Mapping):
            raise PolarisError(
                f"GET {url} answered a list entry that is not an object: {one_line(item, 300)}.", url=url
            )
        return item

    def _pages(self, action: str, url: str, params: Mapping[str, str], key: str, privilege: str) -> list[Any]:
        items: list[Any] = []
        seen: set[str] = set()
        page_token: str | None = None
        if self._page_size is not None:
            params = {**params, "pageSize": str(self._page_size)}
        for _ in range(MAX_PAGES):
            page_params = params if page_token is None else {**params, "pageToken": page_token}
            call = Call(action, "GET", url, params=page_params, privilege=privilege)
            body = self._transport.request(call)
            if not isinstance(body, Mapping) or not isinstance(body.get(key), list):
                raise PolarisError(
                    f"Could not {action}: GET {call.shown_url} answered JSON without a {key!r} list "
                    f"({one_line(body, 160)}). Is base_url ({self.base_url}) a Polaris 1.x catalog API root?",
                    url=call.shown_url,
                )
            items.extend(body[key])
            if body.get("next-page-token") in (None, ""):
                return items
            page_token = str(body["next-page-token"])
            if page_token in seen:
                raise PolarisError(
                    f"Could not {action}: Polaris answered the page token {page_token!r} a second time "
                    f"(GET {call.shown_url}), so following it would never end. This is a server fault: report it "
                    "to the Polaris operators; page_size=None may avoid paging altogether.",
                    url=call.shown_url,
                )
            seen.add(page_token)
        raise PolarisError(f"Could not {action}: Polaris kept answering new pages past {MAX_PAGES}.", url=url)
