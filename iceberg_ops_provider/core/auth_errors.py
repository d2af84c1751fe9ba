"""Credentials a catalog refused or could not find, in this project's terms: :func:`auth_error`.

A catalog's client reports a refused or missing credential in its own words: a REST catalog's
401/403/419 answer or an OAuth2 token endpoint refusing the client, botocore finding no AWS
credentials (or PyIceberg's SigV4 signer finding none), an AWS service (Glue) answering
``AccessDenied``, an object store under the catalog's FileIO refusing access. :func:`auth_error`
turns each into a :class:`~iceberg_ops_provider.errors.CatalogAuthError` that names the endpoint and
the options and environment variables to check (``.endpoint``, ``.settings``).

:func:`storage_error` reads PyArrow's S3 errors, which report a refused credential and an object
store out of reach in the same ``AWS Error <CODE>`` form: the refusals are this module's, the other
half is lent to :func:`~iceberg_ops_provider.core.error_translation.unavailable_error`.
"""

from __future__ import annotations

import re

from iceberg_ops_provider.core.catalog_messages import (
    http_error,
    one_line,
    origin,
    request_of,
    the_catalog,
    without_password,
)
from iceberg_ops_provider.errors import CatalogAuthError, CatalogUnavailableError, IcebergOpsError

__all__ = ["auth_error", "storage_error"]

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
    text = the_catalog(endpoint)
    return text[0].lower() + text[1:]


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


def storage_error(exc: BaseException) -> IcebergOpsError | None:
    """An object store (PyArrow's S3 filesystem, under the catalog's FileIO) that refused or was out of reach."""
    if not isinstance(exc, OSError):
        return None
    text = one_line(exc)
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


def _rest_auth_error(exc: BaseException, endpoint: str) -> CatalogAuthError | None:
    """A REST catalog that answered 401, 403 or 419, or whose OAuth2 token endpoint refused the client."""
    try:
        from pyiceberg.exceptions import AuthorizationExpiredError, ForbiddenError, OAuthError, UnauthorizedError
    except ImportError:  # pragma: no cover - PyIceberg is a dependency
        return None
    if not isinstance(exc, UnauthorizedError | ForbiddenError | AuthorizationExpiredError | OAuthError):
        return None
    http = http_error(exc)
    method, url = request_of(http) if http is not None else ("", "")
    status = getattr(getattr(http, "response", None), "status_code", None)
    endpoint = without_password(endpoint) or origin(url)
    headers = getattr(getattr(http, "request", None), "headers", None) or {}
    authorization = str(headers.get("Authorization", "") or "")
    if authorization.strip() in ("Bearer", "Bearer None"):  # what PyIceberg sends when it has no token
        authorization = ""
    answer = one_line(exc)
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
    return CatalogAuthError(f"{the_catalog(endpoint)} {what} ({detail}); {hint}.", endpoint=endpoint, settings=settings)


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
    endpoint = without_password(endpoint)
    if isinstance(exc, partly):
        found = f"Only part of the AWS credentials were found ({one_line(exc)})"
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
    endpoint = without_password(endpoint)
    operation = getattr(exc, "operation_name", "") or "the request"
    return CatalogAuthError(
        f"{the_catalog(endpoint)} refused the credentials ({operation}: {code}: {one_line(message)}); check "
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
    storage = storage_error(exc)
    return storage if isinstance(storage, CatalogAuthError) else None
