"""Catalogs: a :class:`CatalogSpec` parsed from one source (:mod:`.sources`), opened by :func:`open_catalog`.

Opening creates nothing unless asked to (``access="create"``), bounds REST requests (:mod:`.rest`),
checks who may name classes to import (:mod:`.trust`) and words failures as this project's errors (:mod:`.failures`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from iceberg_ops_provider.catalogs.factory import CatalogFactory
from iceberg_ops_provider.catalogs.failures import CatalogFailure, catalog_errors, failure, translate
from iceberg_ops_provider.catalogs.kinds import KINDS, PYICEBERG_KIND, REMOTE_KINDS, pyiceberg_catalog_types
from iceberg_ops_provider.catalogs.open import empty_catalog, ensure_namespace, open_catalog, spec_of
from iceberg_ops_provider.catalogs.redact import redact_url
from iceberg_ops_provider.catalogs.sources import (
    CONN_TYPE,
    OFFICIAL_CONN_TYPE,
    connection_meta_namespace,
    from_connection,
    from_file,
    from_name,
    from_options,
)
from iceberg_ops_provider.catalogs.spec import (
    DEFAULT_CATALOG_TIMEOUT,
    Access,
    CatalogSpec,
    Source,
    SpecProblem,
    check_timeout,
)
from iceberg_ops_provider.catalogs.trust import without_classes

if TYPE_CHECKING:  # imported on first use: PyIceberg's REST client loads ``.pyiceberg.yaml`` when imported
    from iceberg_ops_provider.catalogs.rest import bound_catalog, bound_of, deadline

__all__ = [
    "CONN_TYPE",
    "DEFAULT_CATALOG_TIMEOUT",
    "KINDS",
    "OFFICIAL_CONN_TYPE",
    "PYICEBERG_KIND",
    "REMOTE_KINDS",
    "Access",
    "CatalogFactory",
    "CatalogFailure",
    "CatalogSpec",
    "Source",
    "SpecProblem",
    "bound_catalog",
    "bound_of",
    "catalog_errors",
    "check_timeout",
    "connection_meta_namespace",
    "deadline",
    "empty_catalog",
    "ensure_namespace",
    "failure",
    "from_connection",
    "from_file",
    "from_name",
    "from_options",
    "open_catalog",
    "pyiceberg_catalog_types",
    "redact_url",
    "spec_of",
    "translate",
    "without_classes",
]


def __getattr__(name: str) -> Any:
    """The REST bound's names, imported on first use (importing PyIceberg's REST client loads ``.pyiceberg.yaml``)."""
    if name not in ("bound_catalog", "bound_of", "deadline"):
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    from iceberg_ops_provider.catalogs import rest

    return getattr(rest, name)
