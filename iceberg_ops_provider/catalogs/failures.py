"""What catalog clients raise, as this project's errors (:func:`translate`) or as facts (:func:`failure`).

Messages name the catalog's endpoint (never a password) and the setting to change where the catalog was described;
:func:`failure` is for fronts that must not repeat what a remote server said (the pages).
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from functools import partial
from typing import TYPE_CHECKING

from iceberg_ops_provider.catalogs.auth import auth_error, storage_error
from iceberg_ops_provider.catalogs.redact import split_url
from iceberg_ops_provider.catalogs.requests_of import http_error, one_line, request_path, the_catalog
from iceberg_ops_provider.errors import (
    CatalogAuthError,
    CatalogConfigError,
    CatalogUnavailableError,
    IcebergOpsError,
    MissingExtraError,
)
from iceberg_ops_provider.messages import message

if TYPE_CHECKING:
    from iceberg_ops_provider.catalogs.spec import CatalogSpec

__all__ = ["CatalogFailure", "catalog_errors", "failure", "missing_uri", "missing_warehouse", "translate"]

_SQL_UNREACHABLE = (
    "connection refused",
    "could not translate host name",
    "name or service not known",
    "timeout expired",
    "could not connect",
    "no route to host",
    "the database system is starting up",
    "the database system is shutting down",
)
_SQL_REFUSED = (
    "password authentication failed",
    "no password supplied",
    "no pg_hba.conf entry",
    "authentication failed",
    "access denied",
)
# What database drivers say when a catalog database is busy or its connection broke: worth another try
# ("server closed the connection unexpectedly": a server that restarted or dropped a connection it had accepted).
_SQL_TRANSIENT = (
    "database is locked",
    "database is busy",
    "database table is locked",
    "server closed the connection",
    "terminating connection",
    "connection reset",
    "connection timed out",
    "could not receive data",
    "could not send data",
    "ssl connection has been closed",
    "ssl syscall error",
    "the connection is closed",
    "connection is lost",
    "lost connection",
    "canceling statement due to conflict with recovery",
    "too many connections",
    "remaining connection slots are reserved",
)
# PyIceberg's own message for a missing uri, which names an option of PyIceberg's command line.
_URI_MISSING = re.compile(
    r"URI missing, please provide using \S+, the config or environment variable (PYICEBERG_CATALOG__\S+__URI)"
)
# Any other option of PyIceberg's command line its messages name, reworded as the catalog option it sets.
_PYICEBERG_OPTION = re.compile(r"(?<![\w-])-{2}([a-z][\w-]*(?:\.[\w-]+)*)")


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


def _unavailable(exc: BaseException, spec: CatalogSpec) -> CatalogUnavailableError | None:
    """Timeouts and connection errors of ``requests``, Thrift (Hive), botocore (Glue); a 503 answer."""
    from requests.exceptions import ConnectionError as RequestsConnectionError
    from requests.exceptions import Timeout

    endpoint = spec.endpoint()
    if isinstance(exc, Timeout | RequestsConnectionError):
        request = request_path(exc)
        if isinstance(exc, Timeout):
            seconds = getattr(exc, "seconds", None) or spec.timeout  # a deadline of its own (a page's part) may be less
            text = message(
                f"{the_catalog(endpoint)} did not answer within {seconds:g} s"
                f"{f' ({request})' if request else ''}; check that it is running and reachable, or raise {{timeout}}.",
                timeout=spec.setting("timeout"),
            )
            return CatalogUnavailableError(text, endpoint=endpoint, timeout=seconds, request=request)
        detail = f"{request}: {_reason(exc)}" if request else _reason(exc)
        return CatalogUnavailableError(
            f"{the_catalog(endpoint)} could not be reached ({detail}); check that it is running and reachable.",
            endpoint=endpoint,
            request=request,
        )
    return _thrift(exc, spec) or _botocore(exc, spec) or _service_unavailable(exc, spec)


def _thrift(exc: BaseException, spec: CatalogSpec) -> CatalogUnavailableError | None:
    """A Hive metastore that cannot be reached: Thrift's transport errors (refused, unknown host, closed)."""
    try:
        from thrift.transport.TTransport import TTransportException
    except ImportError:  # the hive extra is not installed, so no Hive catalog raised this
        return None
    if not isinstance(exc, TTransportException):
        return None
    # "Could not connect to any of [('127.0.0.1', 9083)]" reads better as "... [127.0.0.1:9083]".
    reason = re.sub(r"\('([^']*)', (\d+)\)", r"\1:\2", one_line(getattr(exc, "message", None) or exc))
    cause = exc.__cause__ or exc.__context__
    if cause is not None and not isinstance(cause, TTransportException):
        reason = f"{reason}: {_reason(cause) if _reason(cause) != type(cause).__name__ else one_line(cause)}"
    what = "could not be reached" if exc.type == TTransportException.NOT_OPEN else "broke off the connection"
    parts = split_url(spec.endpoint().split(",")[0])
    at = f" at {parts.host}" if parts is not None and parts.host else ""
    return CatalogUnavailableError(
        message(
            f"{the_catalog(spec.endpoint())} {what} (Thrift: {reason}); check that the Hive metastore{at} is running "
            "and reachable, and {uri}.",
            uri=spec.setting("uri"),
        ),
        endpoint=spec.endpoint(),
    )


def _botocore(exc: BaseException, spec: CatalogSpec) -> CatalogUnavailableError | None:
    """An AWS endpoint (Glue) that cannot be reached or did not answer, after botocore's own retries."""
    try:
        from botocore.exceptions import ConnectionClosedError, ConnectTimeoutError, ReadTimeoutError
        from botocore.exceptions import ConnectionError as BotocoreConnectionError
    except ImportError:  # no botocore, so no AWS client raised this
        return None
    if not isinstance(exc, BotocoreConnectionError | ReadTimeoutError | ConnectionClosedError):
        return None
    timed_out = isinstance(exc, ConnectTimeoutError | ReadTimeoutError)
    return CatalogUnavailableError(
        f"{the_catalog(spec.endpoint())} {'did not answer in time' if timed_out else 'could not be reached'} "
        f"({one_line(exc)}); check that it is running and reachable (for Glue: glue.endpoint and glue.region).",
        endpoint=spec.endpoint(),
        timeout=spec.timeout if timed_out else None,
    )


def _service_unavailable(exc: BaseException, spec: CatalogSpec) -> CatalogUnavailableError | None:
    from pyiceberg.exceptions import ServiceUnavailableError

    if not isinstance(exc, ServiceUnavailableError):
        return None
    request = request_path(http_error(exc))
    return CatalogUnavailableError(
        f"{the_catalog(spec.endpoint())} is unavailable (503{f' on {request}' if request else ''}: {one_line(exc)}); "
        "try again later.",
        endpoint=spec.endpoint(),
        reason="unavailable",
        status=503,
        request=request,
    )


def _bounded(exc: BaseException, spec: CatalogSpec) -> CatalogConfigError | None:
    """What the bounded REST transport and :mod:`.trust` refuse, and an address the HTTP client cannot read."""
    import requests
    from urllib3.exceptions import LocationParseError

    from iceberg_ops_provider.catalogs.rest import AnswerTooLarge, EncodingRefused, RedirectRefused
    from iceberg_ops_provider.catalogs.trust import AddressMoved, ImportRefused, SettingRefused

    request = request_path(exc) or "a request"
    catalog = the_catalog(spec.endpoint())
    refuse = partial(CatalogConfigError, endpoint=spec.endpoint())
    if isinstance(exc, RedirectRefused):
        return refuse(
            message(
                f"{catalog} answered {request} with a redirect ({exc.status}) to another origin "
                f"({exc.target or 'unknown'}), which is not followed; check {{uri}}: it must be the catalog's own base "
                "URL.",
                uri=spec.setting("uri"),
            ),
            reason="redirect",
            status=exc.status,
        )
    if isinstance(exc, AddressMoved):
        return refuse(
            message(
                f"{catalog} answered GET /v1/config with a configuration moving {exc.key!r} to another origin "
                f"({exc.origin}), which is refused: its requests and credentials would go there. Check {{uri}}: it "
                "must be the catalog's own base URL.",
                uri=spec.setting("uri"),
            ),
            reason="redirect",
        )
    if isinstance(exc, ImportRefused):
        who = {
            "server": f"{catalog} answered with a configuration or table metadata",
            "table": f"A table of the {the_catalog(spec.endpoint())[4:]} has a property",
        }[exc.source]
        return refuse(
            message(
                f"{who} naming a class to import in {exc.key!r}, which is refused: only the catalog's own settings "
                "may name one (PyIceberg's and PyArrow's own classes excepted). If you trust that class, name the "
                "same in {setting}.",
                setting=spec.setting(exc.key),
            ),
            reason="import",
        )
    if isinstance(exc, SettingRefused):
        return refuse(
            f"{catalog} answered GET /v1/config with a configuration setting {exc.key!r}, which is refused: how this "
            "process authenticates and signs its requests is the catalog's own settings' to say, not the server's.",
            reason="setting",
        )
    if isinstance(exc, AnswerTooLarge):
        return refuse(
            f"{catalog} answered {request} with more than {exc.limit} bytes, which is not read "
            "further: no Iceberg catalog answers that much; check the catalog's address.",
            reason="too-large",
        )
    if isinstance(exc, EncodingRefused):
        return refuse(
            f"{catalog} answered {request} compressed ({exc.encoding}) though asked for an uncompressed answer; it "
            "is not decompressed (a small answer can decompress past any bound). Check the catalog's address, or a "
            "proxy in between that compresses answers.",
            reason="compressed",
        )
    uri = str(spec.properties.get("uri", ""))
    if isinstance(exc, requests.exceptions.InvalidURL | LocationParseError) and "://" in uri:
        return refuse(
            message(
                f"{catalog} has an address the HTTP client cannot read (its text is not repeated: it may hold a "
                "password): a '/', '?', '#' or '\\' before the host ends the host early. Check {uri}; "
                "percent-encode those characters in a user name or password ('/' as %2F, '?' as %3F, '#' as %23, "
                "'\\' as %5C).",
                uri=spec.setting("uri"),
            ),
        )
    return None


def _sqlite(exc: BaseException, spec: CatalogSpec) -> IcebergOpsError | None:
    """A SQL catalog whose SQLite database file is not a database, cannot be opened, or is locked."""
    import sqlite3

    from sqlalchemy.exc import DatabaseError

    if not isinstance(exc, DatabaseError) or not isinstance(exc.orig, sqlite3.DatabaseError):
        return None
    reason = one_line(exc.orig)
    where = f"The catalog database {spec.database}" if spec.database else "The catalog's SQLite database"
    setting = spec.setting("db_path" if spec.kind == "sqlite" else "uri")
    if "not a database" in reason:
        return CatalogConfigError(
            message(
                f"{where} is not an SQLite database ({reason}); point {{setting}} at the catalog's SQLite database "
                "file.",
                setting=setting,
            ),
            endpoint=spec.endpoint(),
        )
    if "database is locked" in reason or "database is busy" in reason:
        # Transient: another process holds a write transaction open longer than SQLite's busy wait.
        return CatalogUnavailableError(
            f"{where} is locked by another process ({reason}), which kept it longer than SQLite waits (5 s): another "
            "command or task writing to the catalog, or a program holding a transaction open on the file. Run it again "
            "once that process finished.",
            endpoint=spec.endpoint(),
            reason="busy",
        )
    if "unable to open database file" in reason:  # not "readonly database": a bug of the caller, not the catalog's
        return CatalogConfigError(
            message(
                f"{where} could not be opened ({reason}); check that its folder exists and is readable, or change "
                "{setting}.",
                setting=setting,
            ),
            endpoint=spec.endpoint(),
        )
    return None


def _sql_database(exc: BaseException, spec: CatalogSpec) -> IcebergOpsError | None:
    """A database server's connection errors: unreachable, a refused login, no such database, busy or broken."""
    from sqlalchemy.exc import DBAPIError
    from sqlalchemy.exc import TimeoutError as PoolTimeoutError

    endpoint = spec.endpoint()
    if isinstance(exc, PoolTimeoutError):
        return CatalogUnavailableError(
            f"The catalog database at {endpoint} did not serve the request ({one_line(exc)[:300]}): every "
            "connection of its pool is busy.",
            endpoint=endpoint,
            reason="busy",
        )
    if not isinstance(exc, DBAPIError) or exc.orig is None:
        return None
    reason = one_line(exc.orig)
    text = reason.lower()
    if any(marker in text for marker in _SQL_REFUSED) or re.search(r'role "[^"]*" does not exist', text):
        return CatalogAuthError(
            message(
                f"The catalog database at {endpoint} refused the login ({reason}); check the user name and "
                "password of {uri} and what that user may do.",
                uri=spec.setting("uri"),
            ),
            endpoint=endpoint,
            settings=("uri",),
        )
    if re.search(r'database "[^"]*" does not exist', text) or "unknown database" in text:
        return CatalogConfigError(
            message(
                f"The catalog database at {endpoint} does not exist ({reason}); create it (CREATE DATABASE ...) or "
                "point {uri} at an existing database.",
                uri=spec.setting("uri"),
            ),
            reason="missing",
            endpoint=endpoint,
        )
    if any(marker in text for marker in _SQL_UNREACHABLE):
        return CatalogUnavailableError(
            message(
                f"The catalog database at {endpoint} could not be reached ({reason}); check that it is running "
                "and reachable, and the host and port of {uri}.",
                uri=spec.setting("uri"),
            ),
            endpoint=endpoint,
            timeout=spec.timeout if "timeout expired" in text else None,
        )
    if exc.connection_invalidated or any(marker in text for marker in _SQL_TRANSIENT):
        return CatalogUnavailableError(
            f"The catalog database at {endpoint} did not serve the request ({reason[:300]}); it is busy, locked by "
            "another writer, or its connection broke.",
            endpoint=endpoint,
            reason="busy",
        )
    return None


def _not_a_catalog(exc: BaseException, spec: CatalogSpec, *, opening: bool) -> CatalogConfigError | None:
    """A ``uri`` whose ``/v1/config`` answer is not an Iceberg REST catalog's (``opening``: any 4xx of it)."""
    from pydantic import ValidationError
    from pyiceberg.exceptions import RESTError

    text = str(exc)
    status = getattr(getattr(http_error(exc), "response", None), "status_code", None)
    rest = (spec.catalog_type or "rest") == "rest"
    # An answer PyIceberg could not read as the REST specification's: whatever answers there is no Iceberg catalog.
    other_json = isinstance(exc, ValidationError) and rest
    refused = opening and rest and isinstance(exc, RESTError) and (status is None or 400 <= status < 500)
    said = isinstance(exc, RESTError) and ("/v1/config" in text or "unexpected JSON Payload" in text)
    if not (other_json or refused or said):
        return None
    return CatalogConfigError(
        message(
            f"The endpoint {spec.endpoint()} is not an Iceberg REST catalog: its answer to "
            f"{'GET /v1/config' if opening or '/v1/config' in text else 'a request'} was not one "
            f"({one_line(text)[:160]}). Check {{uri}}: it must be the catalog's base URL (for SeaweedFS its Iceberg "
            "port, not its S3 port; for Polaris .../api/catalog).",
            uri=spec.setting("uri"),
        ),
        reason="not-a-catalog",
        status=status,
        endpoint=spec.endpoint(),
    )


def missing_warehouse(
    exc: BaseException, spec: CatalogSpec, *, listing_root: bool = False
) -> CatalogConfigError | None:
    """The error of a catalog whose warehouse does not exist (``listing_root``: a missing namespace means that)."""
    from pyiceberg.exceptions import NoSuchNamespaceError, RESTError

    bucket_missing = isinstance(exc, NoSuchNamespaceError | RESTError) and re.search(
        r"table bucket \S+ not found", str(exc)
    )
    if not (bucket_missing or (listing_root and isinstance(exc, NoSuchNamespaceError))):
        return None
    warehouse = spec.properties.get("warehouse")
    return CatalogConfigError(
        message(
            f"The catalog's warehouse{f' {warehouse!r}' if warehouse else ''} was not found ({one_line(exc)[:160]}). "
            "Check {warehouse}: on S3 Tables it is the ARN of an existing table bucket; create the bucket first, or "
            "fix the name.",
            warehouse=spec.setting("warehouse"),
        ),
        reason="no-warehouse",
        endpoint=spec.endpoint(),
    )


def _pyiceberg_config(exc: BaseException, spec: CatalogSpec) -> IcebergOpsError | None:
    """PyIceberg's ``ValueError`` about a catalog's properties (worded for its own command line), or a missing extra."""
    from pyiceberg.exceptions import NotInstalledError

    what = f"the {spec.catalog_type or spec.kind!r} catalog {spec.name or '(default)'!r}"
    if isinstance(exc, NotInstalledError):
        extra = {"glue": "glue", "hive": "hive", "sql": "sqlite", "in-memory": "sqlite"}.get(spec.catalog_type or "")
        if extra is not None:
            return MissingExtraError(f"The {spec.catalog_type!r} catalog type", extra, None)
        return CatalogConfigError(f"Could not open {what}: {one_line(exc)}".rstrip(".") + ".")
    if not isinstance(exc, ValueError) or isinstance(exc, IcebergOpsError):
        return None
    text = one_line(exc)
    found = _URI_MISSING.search(text)
    if found:
        return missing_uri(spec, found.group(1))
    uri = spec.properties.get("uri")
    if isinstance(uri, str) and "://" not in uri and (spec.catalog_type or "rest") == "rest":
        return CatalogConfigError(
            message(
                f"Could not open {what}: its uri {uri!r} has no scheme; give {{uri}} whole, such as 'https://{uri}'.",
                uri=spec.setting("uri"),
            )
        )
    text = _PYICEBERG_OPTION.sub(r"the `\1` option", text)
    return CatalogConfigError(f"Could not open {what}: {text}".rstrip(".") + ".")


def missing_uri(spec: CatalogSpec, variable: str) -> CatalogConfigError:
    """The error of a catalog of ``spec`` opened without a uri (``variable``: PyIceberg's variable for it)."""
    return CatalogConfigError(
        message(
            f"Could not open the {spec.catalog_type or spec.kind!r} catalog {spec.name or '(default)'!r}: its uri is "
            f"missing; give {{uri}}, or set {variable} or `uri` under catalogs.{(spec.name or 'default').lower()} "
            "in .pyiceberg.yaml.",
            uri=spec.setting("uri"),
        )
    )


def translate(exc: BaseException, spec: CatalogSpec, *, opening: bool = False) -> IcebergOpsError | None:
    """The error of this project ``exc`` amounts to, else ``None`` (``opening``: a ``ValueError`` is a property)."""
    if isinstance(exc, IcebergOpsError):
        return None
    found = (
        _bounded(exc, spec)
        or _unavailable(exc, spec)
        or auth_error(exc, spec)
        or storage_error(exc, spec)
        or _sqlite(exc, spec)
        or _sql_database(exc, spec)
        or _not_a_catalog(exc, spec, opening=opening)
        or missing_warehouse(exc, spec)
    )
    if found is None and opening:
        found = _pyiceberg_config(exc, spec)
    return found


@contextmanager
def catalog_errors(spec: CatalogSpec, *, opening: bool = False) -> Iterator[None]:
    """Raise what :func:`translate` makes of an exception raised inside (``from`` it); anything else unchanged."""
    try:
        yield
    except Exception as exc:
        error = translate(exc, spec, opening=opening)
        if error is None:
            raise
        raise error from exc


# Reasons of a CatalogConfigError that only an answer of the catalog gives.
_ANSWERED = ("not-a-catalog", "redirect", "too-large", "compressed", "import", "setting", "no-warehouse")


@dataclass(frozen=True)
class CatalogFailure:
    """What a failed catalog call was, as facts a front words itself (never the text a server sent).

    ``kind`` is an error's ``reason`` (``timeout``, ``redirect``, ...), or ``not-found``, ``conflict``,
    ``server-error``, ``refused`` (another 4xx) or ``error``; ``error`` is the exception's type, for the log.
    """

    kind: str
    answered: bool
    status: int | None = None
    timeout: float | None = None
    error: str = ""

    @property
    def status_class(self) -> str | None:
        """``2xx`` ... ``5xx`` of :attr:`status`."""
        return f"{self.status // 100}xx" if self.status else None


def failure(exc: BaseException, spec: CatalogSpec) -> CatalogFailure:
    """The facts of ``exc``, raised by a call on the catalog of ``spec``."""
    from pyiceberg.exceptions import (
        BadRequestError,
        CommitFailedException,
        NoSuchIdentifierError,
        NoSuchNamespaceError,
        NoSuchTableError,
        RESTError,
        ServerError,
    )

    name = type(exc).__name__
    ours = exc if isinstance(exc, IcebergOpsError) else translate(exc, spec)
    if isinstance(ours, CatalogUnavailableError):
        return CatalogFailure(ours.reason, ours.reason in ("unavailable", "busy"), ours.status, ours.timeout, name)
    if isinstance(ours, CatalogConfigError):
        answered = ours.status is not None or ours.reason in _ANSWERED
        return CatalogFailure(ours.reason, answered, ours.status, error=name)
    status = getattr(getattr(http_error(exc), "response", None), "status_code", None)
    kinds = (
        (NoSuchTableError | NoSuchNamespaceError | NoSuchIdentifierError, "not-found"),
        (CommitFailedException, "conflict"),
        (ServerError, "server-error"),
        (BadRequestError | RESTError, "refused"),
    )
    kind = next((kind for types, kind in kinds if isinstance(exc, types)), "error")
    return CatalogFailure(kind, kind != "error", status or (500 if kind == "server-error" else None), None, name)
