"""Catalogs: one path from a description to an open catalog.

A catalog is described once, by a :class:`CatalogSpec` (kind, name, PyIceberg properties with the
secrets held apart, timeout, where it came from, what is wrong with it), made by one parser per
source (:mod:`.sources`: keyword arguments, the project file, an Airflow connection of either type,
a PyIceberg catalog name; :mod:`.kinds` does the work for every mapping of options). One function
opens a spec, :func:`open_catalog`, which creates nothing unless asked to (``access="create"``).

* :mod:`.redact`: a catalog's secrets, found by what they are (a property's name, the parts of a
  URI), never by searching text.
* :mod:`.sql`: SQL catalogs read without writing; :mod:`.rest`: REST catalogs whose every request
  ends by a deadline, set on the catalog's own session.
* :mod:`.translate` (with :mod:`.auth`): what catalog clients raise, as this project's errors and as
  facts (:func:`failure`) for fronts that word them themselves.
* :mod:`.factory`: :class:`CatalogFactory`, the one-call convenience of the Python API.
"""

from __future__ import annotations

from iceberg_ops_provider.catalogs.factory import CatalogFactory
from iceberg_ops_provider.catalogs.kinds import KINDS, PYICEBERG_KIND, REMOTE_KINDS, pyiceberg_catalog_types
from iceberg_ops_provider.catalogs.open import ensure_namespace, open_catalog, spec_of
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
from iceberg_ops_provider.catalogs.translate import CatalogFailure, catalog_errors, failure, translate

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
]
