"""REST catalog answers that mean the configuration points at the wrong place.

Two mistakes a user makes on the first day, which PyIceberg reports with the server's raw answer:
a ``uri`` that is some other HTTP service (an S3 endpoint, a web server: ``GET /v1/config`` answers
404 or not with JSON), and a ``warehouse`` that names no catalog on the server (an S3 Tables table
bucket that does not exist: listing the root namespaces answers "no such namespace").
"""

from __future__ import annotations

import re

from iceberg_ops_provider.errors import CatalogConfigError

__all__ = ["missing_warehouse_error", "not_a_catalog_error"]

_SETTINGS_WHERE = "(`catalog:` in iceberg-ops.yaml, --catalog, or the Airflow connection)"


def _short(text: object, limit: int = 160) -> str:
    line = " ".join(str(text).split())
    return line if len(line) <= limit else line[: limit - 3] + "..."


def not_a_catalog_error(exc: BaseException, endpoint: str = "") -> CatalogConfigError | None:
    """A ``uri`` whose ``/v1/config`` answer is not an Iceberg REST catalog's, else ``None``."""
    try:
        from pyiceberg.exceptions import RESTError
    except ImportError:  # pragma: no cover - PyIceberg is a dependency
        return None
    text = str(exc)
    if not isinstance(exc, RESTError) or ("/v1/config" not in text and "unexpected JSON Payload" not in text):
        return None
    where = f"the endpoint {endpoint}" if endpoint else "the catalog's uri"
    return CatalogConfigError(
        f"{where} is not an Iceberg REST catalog: its answer to GET /v1/config was not one ({_short(text)}). "
        f"Check `uri` {_SETTINGS_WHERE}: it must be the catalog's base URL (for SeaweedFS its Iceberg port, "
        "not its S3 port; for Polaris .../api/catalog)."
    )


def missing_warehouse_error(
    exc: BaseException, warehouse: str = "", *, listing_root: bool = False
) -> CatalogConfigError | None:
    """The error of a catalog whose warehouse does not exist, else ``None``.

    Args:
        exc: What the catalog raised.
        warehouse: The configured warehouse, for the message.
        listing_root: ``exc`` came from listing the root namespaces, where "no such namespace" can
            only mean the warehouse (otherwise only an S3 Tables "table bucket ... not found" counts).
    """
    try:
        from pyiceberg.exceptions import NoSuchNamespaceError, RESTError
    except ImportError:  # pragma: no cover
        return None
    bucket_missing = isinstance(exc, NoSuchNamespaceError | RESTError) and re.search(
        r"table bucket \S+ not found", str(exc)
    )
    if not (bucket_missing or (listing_root and isinstance(exc, NoSuchNamespaceError))):
        return None
    named = f" {warehouse!r}" if warehouse else ""
    return CatalogConfigError(
        f"The catalog's warehouse{named} was not found ({_short(exc)}). Check `warehouse` {_SETTINGS_WHERE}: "
        "on S3 Tables it is the ARN of an existing table bucket; create the bucket first, or fix the name."
    )
