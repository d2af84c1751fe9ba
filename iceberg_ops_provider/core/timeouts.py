"""Bounded waits on catalogs: nothing iceberg-ops asks of a catalog may hang forever.

PyIceberg's clients mostly wait without limit: the REST catalog's ``requests.Session`` has no
timeout, and its constructor already calls ``GET /v1/config``. A catalog that accepts connections
and never answers would block a command (or an Airflow task) until someone kills it. This module
gives every catalog call a bound, :data:`DEFAULT_CATALOG_TIMEOUT` seconds unless configured, and
turns running out of it into a :class:`~iceberg_ops_provider.errors.CatalogUnavailableError` that
names the endpoint:

* :func:`bound_catalog_requests` makes every HTTP request of a REST catalog default to the bound.
* :func:`call_with_timeout` bounds a call whose transport is out of reach (building a catalog of
  any kind, which for REST already talks to the server).
* :func:`catalog_errors` (and :func:`catalog_error`) translate what the clients under PyIceberg raise
  into errors that say what to check, each naming the endpoint:

  - :class:`~iceberg_ops_provider.errors.CatalogUnavailableError` (transient, see
    :func:`unavailable_error`): ``requests``' timeouts and connection errors (refused, unknown
    host), Thrift transport errors of a Hive metastore, botocore's connection errors (Glue), a 503
    answer, an object store that cannot be reached;
  - :class:`~iceberg_ops_provider.errors.CatalogAuthError` (permanent, see :func:`auth_error`):
    401/403 answers (a SigV4 signature mismatch, a bad or expired token), no AWS credentials
    anywhere, AWS errors refusing the credentials (Glue, the object store); the message names the
    options and environment variables to check;
  - :class:`~iceberg_ops_provider.errors.CatalogConfigError` (permanent): a SQL catalog database
    that is not an SQLite database or cannot be opened.
* :func:`catalog_endpoint` says where a catalog lives, without passwords, for messages.

What each catalog kind gets:

* REST (and ``s3tables``): every request of the catalog's session gets ``timeout=<bound>``
  unless the caller passes one. The bound applies to connecting and to each wait for data, as
  ``requests`` does, not to a whole response.
* SQL (``sqlite``, ``memory``): nothing to do. SQLite is a local file; a database locked by
  another writer fails after SQLite's own busy timeout (5 s, the default of Python's ``sqlite3``).
* Glue: boto3's own defaults already bound it (60 s to connect and 60 s per read, with retries).
* Hive: building the catalog does not connect, and later Thrift calls are not bounded here.

Table data is read and written by PyIceberg's FileIO, not by the catalog client, and is left
alone: PyArrow's S3 filesystem already gives up on a connection after about 1 s and on a stalled
request after about 3 s per attempt (the AWS SDK's defaults, three attempts), so raising those to
the catalog's bound would make a stalled object store fail later, not sooner. Set
``s3.connect-timeout`` / ``s3.request-timeout`` as catalog properties to change them: tables
loaded afterwards get them in their FileIO.
"""

from __future__ import annotations

import contextvars
import re
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from typing import TYPE_CHECKING, Any, TypeVar
from urllib.parse import urlsplit, urlunsplit

from iceberg_ops_provider.errors import (
    CatalogAuthError,
    CatalogConfigError,
    CatalogUnavailableError,
    IcebergOpsError,
)

if TYPE_CHECKING:
    from pyiceberg.catalog import Catalog

__all__ = [
    "DEFAULT_CATALOG_TIMEOUT",
    "auth_error",
    "bound_catalog_requests",
    "call_with_timeout",
    "catalog_endpoint",
    "catalog_error",
    "catalog_errors",
    "check_timeout",
    "unavailable_error",
]

DEFAULT_CATALOG_TIMEOUT = 60.0
"""Seconds a catalog may take to answer one request (or to be built) unless configured otherwise."""

_HINT = (
    "check that it is running and reachable, or raise the timeout "
    "(timeout= of CatalogFactory.build / --catalog-timeout / the connection's `timeout` extra)"
)

T = TypeVar("T")


_MAX_TIMEOUT = 7 * 24 * 3600


def check_timeout(value: object, option: str = "timeout") -> float:
    """``value`` as a number of seconds, refusing anything that is not a finite number above zero.

    Raises:
        CatalogConfigError: ``value`` is not a number (booleans and strings included), is zero,
            negative, NaN or more than a week; the message names ``option``.
    """
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise CatalogConfigError(
            f"Option {option!r} must be a number of seconds greater than 0 (for example 30), "
            f"got {value!r} ({type(value).__name__})."
        )
    if not 0 < value <= _MAX_TIMEOUT:  # also refuses NaN, and integers too large for a float
        raise CatalogConfigError(
            f"Option {option!r} must be a number of seconds greater than 0 and at most a week "
            f"(for example 30), got {value!r}."
        )
    return float(value)


def _seconds_text(seconds: float) -> str:
    return f"{seconds:g} s"


def _without_password(url: str) -> str:
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


def _the_catalog(endpoint: str) -> str:
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
            return _without_password(str(uri or engine.url))
    if isinstance(uri, str) and uri:
        return _without_password(uri)
    glue_endpoint = properties.get("glue.endpoint")
    if isinstance(glue_endpoint, str) and glue_endpoint:
        return _without_password(glue_endpoint)
    return f"{type(catalog).__name__} {getattr(catalog, 'name', '')!r}"


def _request_of(exc: BaseException) -> tuple[str, str]:
    """The method and URL (no query, no password) of the request ``exc`` was raised for, when known."""
    request = getattr(exc, "request", None)
    url = str(getattr(request, "url", "") or "")
    if url:
        with suppress(ValueError):
            url = urlunsplit(urlsplit(_without_password(url))._replace(query="", fragment=""))
    return str(getattr(request, "method", "") or ""), url


def _origin(url: str) -> str:
    try:
        parts = urlsplit(url)
    except ValueError:
        return ""
    return _without_password(urlunsplit((parts.scheme, parts.netloc, "", "", ""))) if parts.netloc else ""


def _reason(exc: BaseException) -> str:
    """A short reason for a connection error: ``[Errno 111] Connection refused`` rather than urllib3's page."""
    text = str(exc)
    found = re.search(r"\[Errno -?\d+\] [^'\")]+", text)
    if found:
        return found.group(0).strip()
    for marker in ("Failed to resolve", "Name or service not known", "Connection refused", "Connection reset"):
        if marker in text:
            return marker
    return type(exc).__name__


def _one_line(text: object) -> str:
    return " ".join(str(text).split())


def _causes(exc: BaseException) -> Iterator[BaseException]:
    """``exc``, then what caused it (``__cause__``, else ``__context__``), without looping."""
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen and len(seen) < 16:
        seen.add(id(current))
        yield current
        current = current.__cause__ or current.__context__


def _host_port(endpoint: str) -> str:
    """``host:port`` of a URL (``thrift://metastore:9083`` gives ``metastore:9083``); empty if it has none."""
    if "://" not in endpoint:
        return ""
    try:
        return urlsplit(endpoint.split(",")[0]).netloc.rpartition("@")[2]
    except ValueError:
        return ""


def _thrift_unavailable(exc: BaseException, endpoint: str) -> CatalogUnavailableError | None:
    """A Hive metastore that cannot be reached: Thrift's transport errors (refused, unknown host, closed)."""
    try:
        from thrift.transport.TTransport import TTransportException
    except ImportError:  # the hive extra is not installed, so no Hive catalog raised this
        return None
    if not isinstance(exc, TTransportException):
        return None
    # "Could not connect to any of [('127.0.0.1', 9083)]" reads better as "... [127.0.0.1:9083]".
    reason = re.sub(r"\('([^']*)', (\d+)\)", r"\1:\2", _one_line(getattr(exc, "message", None) or exc))
    cause = exc.__cause__ or exc.__context__
    if cause is not None and not isinstance(cause, TTransportException):
        reason = f"{reason}: {_reason(cause) if _reason(cause) != type(cause).__name__ else _one_line(cause)}"
    endpoint = _without_password(endpoint)
    where = _host_port(endpoint)
    what = "could not be reached" if exc.type == TTransportException.NOT_OPEN else "broke off the connection"
    hint = (
        f"check that the Hive metastore at {where} is running and reachable, and the catalog's uri"
        if where
        else "check that the Hive metastore is running and reachable, and the catalog's uri (thrift://HOST:PORT)"
    )
    return CatalogUnavailableError(f"{_the_catalog(endpoint)} {what} (Thrift: {reason}); {hint}.", endpoint=endpoint)


def _botocore_unavailable(exc: BaseException, endpoint: str, seconds: float | None) -> CatalogUnavailableError | None:
    """An AWS endpoint (Glue) that cannot be reached or did not answer, after botocore's own retries."""
    try:
        from botocore.exceptions import ConnectionClosedError, ConnectTimeoutError, ReadTimeoutError
        from botocore.exceptions import ConnectionError as BotocoreConnectionError
    except ImportError:  # no botocore, so no AWS client raised this
        return None
    if not isinstance(exc, BotocoreConnectionError | ReadTimeoutError | ConnectionClosedError):
        return None
    url = str(getattr(exc, "kwargs", {}).get("endpoint_url", "") or "")
    endpoint = _without_password(endpoint) or _origin(url)
    timed_out = isinstance(exc, ConnectTimeoutError | ReadTimeoutError)
    what = "did not answer in time" if timed_out else "could not be reached"
    return CatalogUnavailableError(
        f"{_the_catalog(endpoint)} {what} ({_one_line(exc)}); check that it is running and reachable "
        "(for Glue: glue.endpoint and glue.region).",
        endpoint=endpoint,
        timeout=seconds if timed_out else None,
    )


_AWS_ERROR = re.compile(r"AWS Error ([A-Z_]+)")
# Codes of the AWS SDK (as PyArrow's S3 filesystem reports them) that mean "these credentials will not do".
_STORAGE_AUTH_CODES = frozenset(
    {
        "ACCESS_DENIED",
        "INVALID_ACCESS_KEY_ID",
        "SIGNATURE_DOES_NOT_MATCH",
        "INVALID_SIGNATURE",
        "EXPIRED_TOKEN",
        "INVALID_CLIENT_TOKEN_ID",
        "MISSING_AUTHENTICATION_TOKEN",
        "UNRECOGNIZED_CLIENT",
    }
)
_S3_SETTINGS = (
    "s3.access-key-id",
    "s3.secret-access-key",
    "s3.session-token",
    "s3.region",
    "AWS_ACCESS_KEY_ID",
    "AWS_SECRET_ACCESS_KEY",
    "AWS_PROFILE",
)


def _storage_error(exc: BaseException) -> IcebergOpsError | None:
    """An object store (PyArrow's S3 filesystem, under the catalog's FileIO) that refused or was out of reach."""
    if not isinstance(exc, OSError):
        return None
    text = _one_line(exc)
    found = _AWS_ERROR.search(text)
    if not found:
        return None
    bucket = re.search(r"in bucket '([^']+)'", text)
    location = f"s3://{bucket.group(1)}" if bucket else ""
    if found.group(1) == "NETWORK_CONNECTION":
        address = re.search(r"Failed to connect to (\S+?) ", text)
        endpoint = address.group(1) if address else location
        at = f" at {endpoint}" if endpoint else ""
        return CatalogUnavailableError(
            f"The object store{at} could not be reached ({text}); check that it is running and reachable, "
            "and the s3.endpoint property of the catalog.",
            endpoint=endpoint,
        )
    if found.group(1) not in _STORAGE_AUTH_CODES:
        return None
    where = f" to {location}" if location else ""
    return CatalogAuthError(
        f"The object store refused access{where} ({text}); check {_listing(_S3_SETTINGS[:4])} among the catalog's "
        f"options {_WHERE} (or {_listing(_S3_SETTINGS[4:])} in the environment), and what that identity may read "
        "and write there.",
        endpoint=location,
        settings=_S3_SETTINGS,
    )


def _service_unavailable(exc: BaseException, endpoint: str) -> CatalogUnavailableError | None:
    """A REST catalog that answered 503 Service Unavailable."""
    try:
        from pyiceberg.exceptions import ServiceUnavailableError
    except ImportError:  # pragma: no cover - PyIceberg is a dependency
        return None
    if not isinstance(exc, ServiceUnavailableError):
        return None
    http = _http_error(exc)
    method, url = _request_of(http) if http is not None else ("", "")
    endpoint = _without_password(endpoint) or _origin(url)
    request = f" on {method} {url}".rstrip() if url else ""
    return CatalogUnavailableError(
        f"{_the_catalog(endpoint)} is unavailable (503{request}: {_one_line(exc)}); try again later.",
        endpoint=endpoint,
    )


def unavailable_error(
    exc: BaseException, endpoint: str = "", seconds: float | None = None
) -> CatalogUnavailableError | None:
    """The :class:`CatalogUnavailableError` that ``exc`` amounts to, or ``None`` when it is something else.

    ``requests``' ``Timeout`` becomes "did not answer within ``seconds``"; its ``ConnectionError``
    (refused, unknown host, reset) becomes "could not be reached". A Hive metastore's Thrift
    transport errors, botocore's connection errors and timeouts (Glue), a REST catalog's 503 and an
    object store that PyArrow cannot connect to become the same. Each names the endpoint
    (``endpoint``, else what the error says: the origin of the request's URL, ``host:port``) and,
    when known, the request. The caller raises the result ``from exc``.
    """
    try:
        from requests.exceptions import ConnectionError as RequestsConnectionError
        from requests.exceptions import Timeout
    except ImportError:  # pragma: no cover - requests is a dependency of PyIceberg
        return None
    if not isinstance(exc, Timeout | RequestsConnectionError):
        found = _thrift_unavailable(exc, endpoint) or _botocore_unavailable(exc, endpoint, seconds)
        found = found or _service_unavailable(exc, endpoint)
        storage = _storage_error(exc) if found is None else None
        return found or (storage if isinstance(storage, CatalogUnavailableError) else None)
    method, url = _request_of(exc)
    endpoint = _without_password(endpoint) or _origin(url)
    request = f"{method} {url}".strip()
    if isinstance(exc, Timeout):
        within = f"within {_seconds_text(seconds)}" if seconds is not None else "in time"
        detail = f" ({request})" if request else ""
        message = f"{_the_catalog(endpoint)} did not answer {within}{detail}; {_HINT}."
    else:
        detail = f"{request}: {_reason(exc)}" if request else _reason(exc)
        message = f"{_the_catalog(endpoint)} could not be reached ({detail}); check that it is running and reachable."
    return CatalogUnavailableError(message, endpoint=endpoint, timeout=seconds if isinstance(exc, Timeout) else None)


# --- credentials ---------------------------------------------------------------------------------

_WHERE = "(`catalog:` in iceberg-ops.yaml, the extra of the Airflow connection, or CatalogFactory.build's keywords)"
_AWS_ENVIRONMENT = ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_PROFILE")
_SIGV4_SETTINGS = (
    "client.access-key-id",
    "client.secret-access-key",
    "client.session-token",
    "rest.signing-region",
    "rest.signing-name",
    *_AWS_ENVIRONMENT,
)
_OAUTH_SETTINGS = ("credential", "token", "oauth2-server-uri", "scope")
_AWS_KEY_SETTINGS = (
    "client.access-key-id",
    "client.secret-access-key",
    "glue.access-key-id",
    "glue.secret-access-key",
    *_AWS_ENVIRONMENT,
)
_GLUE_SETTINGS = (
    "glue.access-key-id",
    "glue.secret-access-key",
    "glue.session-token",
    "glue.region",
    "client.access-key-id",
    "client.secret-access-key",
    *_AWS_ENVIRONMENT,
)
# Error codes of AWS services (botocore's ClientError) that refuse the caller's credentials or rights.
_AWS_AUTH_CODES = frozenset(
    {
        "AccessDenied",
        "AccessDeniedException",
        "AuthFailure",
        "ExpiredToken",
        "ExpiredTokenException",
        "IncompleteSignature",
        "InvalidAccessKeyId",
        "InvalidClientTokenId",
        "InvalidSignatureException",
        "InvalidToken",
        "MissingAuthenticationTokenException",
        "SignatureDoesNotMatch",
        "UnauthorizedOperation",
        "UnrecognizedClientException",
    }
)


def _listing(names: tuple[str, ...] | list[str]) -> str:
    return " / ".join(names)


def _the_catalog_lower(endpoint: str) -> str:
    text = _the_catalog(endpoint)
    return text[0].lower() + text[1:]


def _http_error(exc: BaseException) -> Any:
    """The ``requests`` error (with its request and response) behind a PyIceberg REST error, if any."""
    return next(
        (
            e
            for e in _causes(exc)
            if getattr(e, "request", None) is not None and getattr(e, "response", None) is not None
        ),
        None,
    )


def _rest_auth_error(exc: BaseException, endpoint: str) -> CatalogAuthError | None:
    """A REST catalog that answered 401, 403 or 419, or whose OAuth2 token endpoint refused the client."""
    try:
        from pyiceberg.exceptions import AuthorizationExpiredError, ForbiddenError, OAuthError, UnauthorizedError
    except ImportError:  # pragma: no cover - PyIceberg is a dependency
        return None
    if not isinstance(exc, UnauthorizedError | ForbiddenError | AuthorizationExpiredError | OAuthError):
        return None
    http = _http_error(exc)
    method, url = _request_of(http) if http is not None else ("", "")
    status = getattr(getattr(http, "response", None), "status_code", None)
    endpoint = _without_password(endpoint) or _origin(url)
    headers = getattr(getattr(http, "request", None), "headers", None) or {}
    authorization = str(headers.get("Authorization", "") or "")
    if authorization.strip() in ("Bearer", "Bearer None"):  # what PyIceberg sends when it has no token
        authorization = ""
    answer = _one_line(exc)
    if authorization.startswith("AWS4-") or "signature" in answer.lower():
        settings: tuple[str, ...] = _SIGV4_SETTINGS
        hint = (
            "check the SigV4 settings: client.access-key-id and client.secret-access-key (or "
            f"{_listing(_AWS_ENVIRONMENT)} in the environment), client.session-token when the keys are temporary, "
            f"rest.signing-region and rest.signing-name, among the catalog's options {_WHERE}"
        )
    elif authorization or isinstance(exc, OAuthError):
        settings = _OAUTH_SETTINGS
        hint = (
            "check credential (CLIENT_ID:CLIENT_SECRET, the login and password of an Airflow connection) or token, "
            f"and oauth2-server-uri / scope, among the catalog's options {_WHERE}"
        )
    else:
        settings = (*_OAUTH_SETTINGS[:2], "rest.sigv4-enabled", *_SIGV4_SETTINGS[:2])
        hint = (
            "no credentials were sent: set credential or token (OAuth2), or rest.sigv4-enabled: true with "
            f"client.access-key-id and client.secret-access-key (SigV4), among the catalog's options {_WHERE}"
        )
    if status == 403 and not authorization.startswith("AWS4-") and "signature" not in answer.lower():
        hint += ", and what that identity is allowed to do"
    what = "refused access" if status == 403 else "did not accept the credentials"
    request = " ".join(str(part) for part in (status or "", method, url) if part)
    detail = f"{request}: {answer}" if request else answer
    return CatalogAuthError(
        f"{_the_catalog(endpoint)} {what} ({detail}); {hint}.", endpoint=endpoint, settings=settings
    )


def _missing_aws_credentials(exc: BaseException, endpoint: str) -> CatalogAuthError | None:
    """No AWS credentials anywhere botocore looks (options, environment, profile, instance metadata)."""
    try:
        from botocore.exceptions import NoCredentialsError, PartialCredentialsError
    except ImportError:
        missing: tuple[type[BaseException], ...] = ()
        partly: tuple[type[BaseException], ...] = ()
    else:
        missing, partly = (NoCredentialsError,), (PartialCredentialsError,)
    # PyIceberg's SigV4 signer calls get_credentials().get_frozen_credentials() and fails on the None.
    unsigned = isinstance(exc, AttributeError) and "get_frozen_credentials" in str(exc)
    if not (unsigned or isinstance(exc, missing + partly)):
        return None
    endpoint = _without_password(endpoint)
    if isinstance(exc, partly):
        found = f"Only part of the AWS credentials were found ({_one_line(exc)})"
    else:
        found = "No AWS credentials were found"
    return CatalogAuthError(
        f"{found} to sign the requests to {_the_catalog_lower(endpoint)}: set client.access-key-id and "
        "client.secret-access-key (glue.access-key-id and glue.secret-access-key for Glue) among the catalog's "
        f"options {_WHERE}, or AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY (or AWS_PROFILE) in the environment.",
        endpoint=endpoint,
        settings=_AWS_KEY_SETTINGS,
    )


def _aws_client_auth_error(exc: BaseException, endpoint: str) -> CatalogAuthError | None:
    """An AWS service (Glue) that refused the credentials or the action: botocore's ``ClientError``, 401/403."""
    try:
        from botocore.exceptions import ClientError
    except ImportError:
        return None
    if not isinstance(exc, ClientError):
        return None
    error = exc.response.get("Error", {}) or {}
    code = str(error.get("Code", "") or "")
    message = str(error.get("Message", "") or "")
    status = (exc.response.get("ResponseMetadata", {}) or {}).get("HTTPStatusCode")
    if "<Code>" in message:  # an XML error document passed through as the message (moto does this)
        inner_code = re.search(r"<Code>([^<]+)</Code>", message)
        inner_message = re.search(r"<Message>([^<]*)</Message>", message)
        code = inner_code.group(1) if inner_code else code
        message = inner_message.group(1) if inner_message else message
    if code not in _AWS_AUTH_CODES and status not in (401, 403) and code not in ("401", "403"):
        return None
    endpoint = _without_password(endpoint)
    operation = getattr(exc, "operation_name", "") or "the request"
    return CatalogAuthError(
        f"{_the_catalog(endpoint)} refused the credentials ({operation}: {code}: {_one_line(message)}); check "
        f"{_listing(_GLUE_SETTINGS[:4])} (or client.access-key-id / client.secret-access-key) among the catalog's "
        f"options {_WHERE}, or {_listing(_AWS_ENVIRONMENT)} in the environment, and what that identity is allowed "
        "to do.",
        endpoint=endpoint,
        settings=_GLUE_SETTINGS,
    )


def auth_error(exc: BaseException, endpoint: str = "") -> CatalogAuthError | None:
    """The :class:`CatalogAuthError` that ``exc`` amounts to, or ``None`` when it is something else.

    A REST catalog's 401/403/419 answer or refused OAuth2 client (the message tells SigV4 settings
    from OAuth2 ones by what was sent), missing AWS credentials (botocore's ``NoCredentialsError``,
    or PyIceberg's SigV4 signer finding none), an AWS service refusing the credentials (Glue), an
    object store refusing access. The message names the endpoint and the options and environment
    variables to check. The caller raises the result ``from exc``.
    """
    found = (
        _rest_auth_error(exc, endpoint)
        or _missing_aws_credentials(exc, endpoint)
        or _aws_client_auth_error(exc, endpoint)
    )
    if found is not None:
        return found
    storage = _storage_error(exc)
    return storage if isinstance(storage, CatalogAuthError) else None


def _sqlite_error(exc: BaseException, endpoint: str) -> CatalogConfigError | None:
    """A SQL catalog whose SQLite database file is not a database, or cannot be opened."""
    try:
        from sqlalchemy.exc import DatabaseError
    except ImportError:  # no SQLAlchemy, so no SQL catalog raised this
        return None
    import sqlite3

    if not isinstance(exc, DatabaseError) or not isinstance(exc.orig, sqlite3.DatabaseError):
        return None
    reason = _one_line(exc.orig)
    path = endpoint.removeprefix("sqlite:///") if endpoint.startswith("sqlite:///") else endpoint
    where = f"The catalog database {path}" if path else "The catalog's SQLite database"
    setting = (
        "db_path (--db-path, `db_path:` under `catalog:` in iceberg-ops.yaml, the db_path extra of an Airflow "
        "connection)"
    )
    if "not a database" in reason:
        return CatalogConfigError(
            f"{where} is not an SQLite database ({reason}); point {setting} at the catalog's SQLite database file, "
            "or at a path that does not exist yet to create a new catalog there."
        )
    if "unable to open database file" in reason:
        return CatalogConfigError(
            f"{where} could not be opened ({reason}); check that its folder exists and is writable, "
            f"or change {setting}."
        )
    return None


def catalog_error(exc: BaseException, endpoint: str = "", seconds: float | None = None) -> IcebergOpsError | None:
    """The iceberg-ops error that ``exc``, raised by a catalog's client, amounts to; ``None`` when it is something else.

    :func:`unavailable_error` first (transient), then :func:`auth_error` (permanent), then a SQLite
    catalog database that is not one (:class:`CatalogConfigError`). Errors of iceberg-ops itself are
    never translated.
    """
    if isinstance(exc, IcebergOpsError):
        return None
    from iceberg_ops_provider.core.rest_errors import missing_warehouse_error, not_a_catalog_error

    return (
        unavailable_error(exc, endpoint, seconds)
        or auth_error(exc, endpoint)
        or _sqlite_error(exc, endpoint)
        or not_a_catalog_error(exc, endpoint)
        or missing_warehouse_error(exc)
    )


@contextmanager
def catalog_errors(endpoint: str, seconds: float | None) -> Iterator[None]:
    """Translate the catalog clients' errors raised inside into iceberg-ops errors (see :func:`catalog_error`).

    Args:
        endpoint: Where the catalog lives (see :func:`catalog_endpoint`); empty to use the request's origin.
        seconds: The bound in force, for the message.

    Raises:
        CatalogUnavailableError: The catalog (or its storage) could not be reached or did not
            answer; with the original exception as ``__cause__``.
        CatalogAuthError: It refused the credentials, or none were found.
        CatalogConfigError: Its SQLite database is not one.
        Exception: Anything else, unchanged.
    """
    try:
        yield
    except Exception as exc:
        error = catalog_error(exc, endpoint, seconds)
        if error is None:
            raise
        raise error from exc


class _BoundedRequest:
    """``Session.request`` with a default timeout; the bound can be changed in place."""

    def __init__(self, request: Callable[..., Any], seconds: float) -> None:
        self.request = request
        self.seconds = seconds

    def __call__(self, method: str, url: str, *args: Any, **kwargs: Any) -> Any:
        # timeout is Session.request's seventh parameter after (method, url); PyIceberg passes keywords.
        if len(args) < 7 and kwargs.get("timeout") is None:
            kwargs["timeout"] = self.seconds
        return self.request(method, url, *args, **kwargs)


def bound_catalog_requests(catalog: Catalog, seconds: float) -> None:
    """Give every HTTP request of a REST catalog a default timeout of ``seconds``.

    Requests that pass their own ``timeout`` keep it. Calling this again changes the bound rather
    than stacking another one. Catalogs of other kinds are left as they are (see the module's
    documentation for what bounds them).

    Raises:
        CatalogConfigError: ``seconds`` is not a number above zero.
    """
    seconds = check_timeout(seconds)
    try:
        from pyiceberg.catalog.rest import RestCatalog
    except ImportError:  # pragma: no cover - the REST catalog ships with PyIceberg
        return
    if not isinstance(catalog, RestCatalog):
        return
    session = getattr(catalog, "_session", None)
    if session is None:
        return
    current = session.__dict__.get("request")
    if isinstance(current, _BoundedRequest):
        current.seconds = seconds
    else:
        session.request = _BoundedRequest(session.request, seconds)


def call_with_timeout(fn: Callable[[], T], seconds: float, *, what: str, endpoint: str) -> T:
    """Run ``fn()`` and return its result, giving up after ``seconds``.

    ``fn`` runs in a daemon thread, so a call that never returns cannot keep the process alive at
    exit; it is abandoned, not stopped (Python cannot stop a thread), and keeps whatever it holds.

    Args:
        fn: The call, without arguments (use a ``lambda`` or ``functools.partial``).
        seconds: The bound, above zero.
        what: What the call does, for the message (``"GET /v1/config while opening the catalog"``).
        endpoint: Where it goes, for the message.

    Returns:
        What ``fn`` returned.

    Raises:
        CatalogUnavailableError: ``fn`` did not finish within ``seconds``.
        Exception: Whatever ``fn`` raised, unchanged.
    """
    seconds = check_timeout(seconds)
    endpoint = _without_password(endpoint)
    outcome: dict[str, Any] = {}
    context = contextvars.copy_context()

    def run() -> None:
        try:
            outcome["result"] = context.run(fn)
        except BaseException as exc:  # handed to the caller, whatever it is
            outcome["error"] = exc

    worker = threading.Thread(target=run, name=f"iceberg-ops: {what}"[:64], daemon=True)
    worker.start()
    worker.join(seconds)
    if worker.is_alive():
        raise CatalogUnavailableError(
            f"{_the_catalog(endpoint)} did not answer within {_seconds_text(seconds)} ({what}); {_HINT}.",
            endpoint=endpoint,
            timeout=seconds,
        )
    if "error" in outcome:
        raise outcome.pop("error")
    return outcome["result"]
