"""Bearer tokens for Apache Polaris: a static token, or OAuth2 client credentials fetched and refreshed.

A fetched token is replaced before ``expires_in`` runs out, and once more when Polaris answers 401 to it.
Secrets never appear in ``repr()``, in logs or in error messages.
"""

from __future__ import annotations

import logging
import re
import threading
import time
from collections.abc import Callable, Mapping
from typing import Any

from iceberg_ops_provider.errors import PolarisAuthError, PolarisRequestError

__all__ = [
    "DEFAULT_SCOPE",
    "REFRESH_MARGIN",
    "BearerAuth",
    "ClientCredentialsAuth",
    "StaticTokenAuth",
    "split_credential",
]

logger = logging.getLogger(__name__)

_TOKEN_CHARACTERS = re.compile(r"[A-Za-z0-9\-._~+/]+=*")
"""The characters of an OAuth2 bearer token (RFC 6750's b64token)."""

DEFAULT_SCOPE = "PRINCIPAL_ROLE:ALL"
"""The scope Polaris grants every principal role of the caller under (PyIceberg's ``catalog`` is refused)."""

REFRESH_MARGIN = 60.0
"""Seconds before expiry at which a fetched token is replaced (at most half of its lifetime)."""

TokenFetcher = Callable[[str, Mapping[str, str]], Mapping[str, Any]]
"""Posts a form to a token endpoint and returns the decoded JSON answer (raising typed errors itself)."""


def split_credential(credential: str) -> tuple[str, str]:
    """``"client_id:client_secret"`` as its two halves.

    Raises:
        PolarisRequestError: The credential has no ``:`` or an empty half (the message never shows it).
    """
    client_id, sep, client_secret = credential.partition(":")
    if not sep or not client_id.strip() or not client_secret:
        raise PolarisRequestError(
            "The Polaris credential must be 'client_id:client_secret' (the principal's client id and secret "
            "joined by a colon, as PyIceberg's `credential` property takes it); the value given "
            + ("has no ':'." if not sep else "has an empty client id or secret.")
        )
    return client_id.strip(), client_secret


class BearerAuth:
    """What puts an ``Authorization`` header on Polaris requests.

    Subclasses decide where the token comes from; the client asks :meth:`header` before each
    request and calls :meth:`invalidate` when Polaris answers 401 to it.
    """

    description = "no authentication (pass token= or credential=)"
    """How requests are authenticated, for messages (never a secret)."""

    _header: str | None = None

    def header(self) -> str | None:
        """The ``Authorization`` header value to send, or ``None`` to send none."""
        return self._header

    def invalidate(self, header: str | None) -> bool:
        """Forget the token behind ``header`` after a 401; ``True`` when a fresh one can be fetched."""
        return False

    def __repr__(self) -> str:
        return f"{type(self).__name__}()"


class StaticTokenAuth(BearerAuth):
    """A bearer token given by the caller (without the ``Bearer`` prefix); it is never refreshed."""

    description = "a static bearer token"

    def __init__(self, token: str) -> None:
        if not isinstance(token, str) or not token.strip():
            raise PolarisRequestError("The Polaris token is empty: pass the access token itself, or a credential.")
        self._header = f"Bearer {token.strip()}"

    def __repr__(self) -> str:
        return "StaticTokenAuth(token='***')"


class ClientCredentialsAuth(BearerAuth):
    """OAuth2 client credentials: a token fetched on first use (``fetch`` posts the form) and replaced before expiry.

    ``initial_token`` is used until it is refused; ``clock`` is a monotonic clock (tests pass their own).
    """

    def __init__(
        self,
        credential: str,
        token_url: str,
        fetch: TokenFetcher,
        *,
        scope: str = DEFAULT_SCOPE,
        initial_token: str | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.client_id, self._client_secret = split_credential(credential)
        if not scope or not scope.strip():
            raise PolarisRequestError(
                f"The OAuth2 scope is empty: pass {DEFAULT_SCOPE!r} or 'PRINCIPAL_ROLE:<role name>'."
            )
        self.token_url = token_url
        self.scope = scope
        self._fetch = fetch
        self._clock = clock
        self._lock = threading.Lock()
        self._header: str | None = f"Bearer {initial_token.strip()}" if initial_token else None
        self._refresh_at: float | None = None

    @property
    def description(self) -> str:
        """How requests are authenticated, for messages (names the client id, never the secret)."""
        return f"OAuth2 client credentials (client id {self.client_id!r}, token endpoint {self.token_url})"

    def header(self) -> str | None:
        """``Bearer <token>``, fetching a token first when there is none or it is about to expire."""
        with self._lock:
            if self._header is None or (self._refresh_at is not None and self._clock() >= self._refresh_at):
                self._header, self._refresh_at = self._new_token()
            return self._header

    def invalidate(self, header: str | None) -> bool:
        """Forget the refused token (unless another thread already replaced it); a new one will be fetched."""
        with self._lock:
            if header is not None and header == self._header:
                self._header = None
                self._refresh_at = None
        return True

    def _new_token(self) -> tuple[str, float | None]:
        form = {
            "grant_type": "client_credentials",
            "client_id": self.client_id,
            "client_secret": self._client_secret,
            "scope": self.scope,
        }
        started = self._clock()
        answer = self._fetch(self.token_url, form)
        token = answer.get("access_token")
        if not isinstance(token, str) or not token:
            raise PolarisAuthError(
                f"The token endpoint {self.token_url} answered without an access_token (keys: "
                f"{', '.join(sorted(map(str, answer))) or 'none'}). Check that oauth2-server-uri points at "
                "Polaris's token endpoint (normally <base_url>/v1/oauth/tokens).",
                url=self.token_url,
            )
        if not _TOKEN_CHARACTERS.fullmatch(token):
            # Never echo it: a token that cannot go into a header would end up in error messages.
            raise PolarisAuthError(
                f"The token endpoint {self.token_url} answered an access_token with characters a bearer token "
                "cannot hold (RFC 6750). Check that oauth2-server-uri points at Polaris's token endpoint.",
                url=self.token_url,
            )
        lifetime = answer.get("expires_in")
        # At most ten years (which also refuses NaN and infinity): anything else is no lifetime.
        known = isinstance(lifetime, int | float) and not isinstance(lifetime, bool) and 0 < lifetime < 315_360_000
        refresh_at = started + lifetime - min(REFRESH_MARGIN, lifetime / 2) if known else None
        logger.debug(
            "Fetched a Polaris access token for client id %r (expires in %s s)",
            self.client_id,
            lifetime if refresh_at is not None else "an unknown time",
        )
        return f"Bearer {token}", refresh_at

    def __repr__(self) -> str:
        return (
            f"ClientCredentialsAuth(client_id={self.client_id!r}, client_secret='***', "
            f"token_url={self.token_url!r}, scope={self.scope!r})"
        )
