"""Credentials a catalog (or its object store) refused or could not find, as :class:`CatalogAuthError`."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from iceberg_ops_provider.catalogs.requests_of import http_error, one_line, request_path, the_catalog
from iceberg_ops_provider.errors import CatalogAuthError, CatalogUnavailableError, IcebergOpsError
from iceberg_ops_provider.messages import message

if TYPE_CHECKING:
    from iceberg_ops_provider.catalogs.spec import CatalogSpec

__all__ = ["auth_error", "storage_error"]

_AWS_ENVIRONMENT = ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_PROFILE")
_OAUTH = ("credential", "token", "oauth2-server-uri", "scope")
_AWS_KEYS = ("client.access-key-id", "client.secret-access-key", "glue.access-key-id", "glue.secret-access-key")
_SIGV4 = (*_AWS_KEYS[:2], "client.session-token", "rest.signing-region", "rest.signing-name")
_GLUE = (*_AWS_KEYS[2:], "glue.session-token", "glue.region", *_AWS_KEYS[:2])
_S3 = ("s3.access-key-id", "s3.secret-access-key", "s3.session-token", "s3.region")
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


def storage_error(exc: BaseException, spec: CatalogSpec) -> IcebergOpsError | None:
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
        return CatalogUnavailableError(
            message(
                f"The object store{f' at {endpoint}' if endpoint else ''} could not be reached ({text}); check that it "
                "is running and reachable, and {endpoint_setting}.",
                endpoint_setting=spec.setting("s3.endpoint"),
            ),
            endpoint=endpoint,
        )
    if found.group(1) not in _STORAGE_AUTH_CODES:
        return None
    return CatalogAuthError(
        message(
            f"The object store refused access{f' to {location}' if location else ''} ({text}); check "
            f"{' / '.join(_S3)} among {{where}} (or {' / '.join(_AWS_ENVIRONMENT)} in the environment), and what that "
            "identity may read and write there.",
            where=spec.setting(""),
        ),
        endpoint=location,
        settings=(*_S3, *_AWS_ENVIRONMENT),
    )


def _http(exc: BaseException) -> tuple[int | None, str, str]:
    """The status, ``METHOD /path`` and ``Authorization`` scheme sent, of the request behind ``exc``."""
    http = http_error(exc)
    status = getattr(getattr(http, "response", None), "status_code", None)
    request = request_path(http)
    headers = getattr(getattr(http, "request", None), "headers", None) or {}
    authorization = str(headers.get("Authorization", "") or "").strip()
    if authorization in ("Bearer", "Bearer None"):  # what PyIceberg sends when it has no token
        authorization = ""
    return status, request, authorization.split(" ", 1)[0]


def _rest_auth_error(exc: BaseException, spec: CatalogSpec) -> CatalogAuthError | None:
    """A REST catalog that answered 401, 403 or 419, or whose OAuth2 token endpoint refused the client."""
    from pyiceberg.exceptions import AuthorizationExpiredError, ForbiddenError, OAuthError, UnauthorizedError

    if not isinstance(exc, UnauthorizedError | ForbiddenError | AuthorizationExpiredError | OAuthError):
        return None
    status, request, scheme = _http(exc)
    answer = one_line(exc)
    signed = scheme.startswith("AWS4-") or "signature" in answer.lower()
    if signed:
        settings: tuple[str, ...] = (*_SIGV4, *_AWS_ENVIRONMENT)
        hint = (
            "check the SigV4 settings: client.access-key-id and client.secret-access-key (or "
            f"{' / '.join(_AWS_ENVIRONMENT)} in the environment), client.session-token when the keys are temporary, "
            "rest.signing-region and rest.signing-name, among {where}"
        )
    elif scheme or isinstance(exc, OAuthError):
        settings = _OAUTH
        hint = "check {credential} (CLIENT_ID:CLIENT_SECRET) or token, and oauth2-server-uri / scope, among {where}"
    else:
        settings = (*_OAUTH[:2], "rest.sigv4-enabled", *_SIGV4[:2])
        hint = (
            "no credentials were sent: set {credential} or token (OAuth2), or rest.sigv4-enabled: true with "
            "client.access-key-id and client.secret-access-key (SigV4), among {where}"
        )
    if status == 403 and not signed:
        hint += ", and what that identity is allowed to do"
    what = "refused access" if status == 403 else "did not accept the credentials"
    request = " ".join(str(part) for part in (status or "", request) if part)
    endpoint = spec.endpoint()
    return CatalogAuthError(
        message(
            f"{the_catalog(endpoint)} {what} ({f'{request}: ' if request else ''}{answer}); {hint}.",
            where=spec.setting(""),
            credential=spec.setting("credential"),
        ),
        endpoint=endpoint,
        settings=settings,
        status=status,
    )


def _missing_aws_credentials(exc: BaseException, spec: CatalogSpec) -> CatalogAuthError | None:
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
    found = "No AWS credentials were found"
    if isinstance(exc, partly):
        found = f"Only part of the AWS credentials were found ({one_line(exc)})"
    subject = the_catalog(spec.endpoint())
    return CatalogAuthError(
        message(
            f"{found} to sign the requests to {subject[0].lower()}{subject[1:]}: set client.access-key-id and "
            "client.secret-access-key (glue.access-key-id and glue.secret-access-key for Glue) among {where}, or "
            "AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY (or AWS_PROFILE) in the environment.",
            where=spec.setting(""),
        ),
        endpoint=spec.endpoint(),
        settings=(*_AWS_KEYS, *_AWS_ENVIRONMENT),
    )


def _aws_client_auth_error(exc: BaseException, spec: CatalogSpec) -> CatalogAuthError | None:
    """An AWS service (Glue) that refused the credentials or the action: botocore's ``ClientError``, 401/403."""
    try:
        from botocore.exceptions import ClientError
    except ImportError:
        return None
    if not isinstance(exc, ClientError):
        return None
    error = exc.response.get("Error", {}) or {}
    code = str(error.get("Code", "") or "")
    text = str(error.get("Message", "") or "")
    status = (exc.response.get("ResponseMetadata", {}) or {}).get("HTTPStatusCode")
    if "<Code>" in text:  # an XML error document passed through as the message (moto does this)
        inner_code = re.search(r"<Code>([^<]+)</Code>", text)
        inner_message = re.search(r"<Message>([^<]*)</Message>", text)
        code = inner_code.group(1) if inner_code else code
        text = inner_message.group(1) if inner_message else text
    if code not in _AWS_AUTH_CODES and status not in (401, 403) and code not in ("401", "403"):
        return None
    operation = getattr(exc, "operation_name", "") or "the request"
    return CatalogAuthError(
        message(
            f"{the_catalog(spec.endpoint())} refused the credentials ({operation}: {code}: {one_line(text)}); check "
            f"{' / '.join(_GLUE[:4])} (or client.access-key-id / client.secret-access-key) among {{where}}, or "
            f"{' / '.join(_AWS_ENVIRONMENT)} in the environment, and what that identity is allowed to do.",
            where=spec.setting(""),
        ),
        endpoint=spec.endpoint(),
        settings=(*_GLUE, *_AWS_ENVIRONMENT),
        status=status if isinstance(status, int) else None,
    )


def auth_error(exc: BaseException, spec: CatalogSpec) -> CatalogAuthError | None:
    """The :class:`CatalogAuthError` that ``exc`` amounts to, or ``None`` when it is something else."""
    found = _rest_auth_error(exc, spec) or _missing_aws_credentials(exc, spec) or _aws_client_auth_error(exc, spec)
    if found is not None:
        return found
    storage = storage_error(exc, spec)
    return storage if isinstance(storage, CatalogAuthError) else None
