"""Catalogs: a :class:`CatalogSpec` parsed from one source (:mod:`.sources`), opened by :func:`open_catalog`.

Opening creates nothing unless asked to (``access="create"``), bounds REST requests (:mod:`.rest`),
checks who may name classes to import (:mod:`.trust`) and words failures as this project's errors (:mod:`.failures`).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # the names below, imported on first use (PEP 562): importing the package imports no client
    from iceberg_ops_provider.catalogs.factory import CatalogFactory
    from iceberg_ops_provider.catalogs.failures import CatalogFailure, catalog_errors, failure, translate
    from iceberg_ops_provider.catalogs.kinds import KINDS, PYICEBERG_KIND, REMOTE_KINDS, pyiceberg_catalog_types
    from iceberg_ops_provider.catalogs.open import empty_catalog, ensure_namespace, open_catalog, spec_of
    from iceberg_ops_provider.catalogs.redact import redact_url
    from iceberg_ops_provider.catalogs.rest import bound_catalog, bound_of, deadline
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

_HOMES = {
    "factory": ("CatalogFactory",),
    "kinds": ("KINDS", "PYICEBERG_KIND", "REMOTE_KINDS", "pyiceberg_catalog_types"),
    "open": ("empty_catalog", "ensure_namespace", "open_catalog", "spec_of"),
    "redact": ("redact_url",),
    "rest": ("bound_catalog", "bound_of", "deadline"),
    "sources": (
        "CONN_TYPE",
        "OFFICIAL_CONN_TYPE",
        "connection_meta_namespace",
        "from_connection",
        "from_file",
        "from_name",
        "from_options",
    ),
    "spec": ("DEFAULT_CATALOG_TIMEOUT", "Access", "CatalogSpec", "Source", "SpecProblem", "check_timeout"),
    "failures": ("CatalogFailure", "catalog_errors", "failure", "translate"),
    "trust": ("without_classes",),
}
_MODULE_OF = {name: module for module, names in _HOMES.items() for name in names}

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
    """The package's names, each imported on first use: PyIceberg's clients load ``.pyiceberg.yaml`` when imported."""
    module = _MODULE_OF.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{module}"), name)
    globals()[name] = value
    return value
