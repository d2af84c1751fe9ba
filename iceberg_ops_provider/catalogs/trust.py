"""Who may choose what a catalog runs and where it sends its requests.

PyIceberg imports a class named by some properties and calls it with the catalog's properties:
``py-io-impl`` (the FileIO of every table), ``s3.retry-strategy-impl``, ``py-catalog-impl``. Such a
name may come from the user (the project file, the code, a connection, ``.pyiceberg.yaml``), from
a REST catalog's answer to ``GET /v1/config``, or from a table (its metadata's properties, the
``config`` of a load-table answer). Whoever names the class runs code where the catalog is opened;
so only the user's own settings may name any class:

* a REST catalog's configuration naming a class other than PyIceberg's and PyArrow's own
  (:data:`BUILT_IN`) is refused (:class:`ImportRefused`), as is a configuration that moves the
  catalog's address, or its token endpoint, to another origin (:class:`AddressMoved`: the requests
  and the credentials would follow it, as a refused redirect would have taken them);
* a table naming such a class is read with the catalog's own FileIO instead, and a warning logged
  (:func:`guard_file_io`): the table stays readable, and nothing it names is imported.

A front that opens catalogs on behalf of people who may edit connections but not run code (the
api-server: its pages, a connection's test) refuses connections naming classes too
(:func:`without_classes`).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from iceberg_ops_provider.messages import message

if TYPE_CHECKING:
    from iceberg_ops_provider.catalogs.spec import CatalogSpec

__all__ = [
    "BUILT_IN",
    "AddressMoved",
    "ImportRefused",
    "check_configuration",
    "guard_file_io",
    "named_classes",
    "origin",
    "without_classes",
]

log = logging.getLogger(__name__)

BUILT_IN: Mapping[str, frozenset[str]] = {
    "py-io-impl": frozenset({"pyiceberg.io.pyarrow.PyArrowFileIO", "pyiceberg.io.fsspec.FsspecFileIO"}),
    "s3.retry-strategy-impl": frozenset(
        {"pyarrow.fs.AwsDefaultS3RetryStrategy", "pyarrow.fs.AwsStandardS3RetryStrategy"}
    ),
    "py-catalog-impl": frozenset(),
}
"""The properties naming a class PyIceberg imports, and the classes of its own (and PyArrow's) they may name."""

_MOVABLE = ("uri", "oauth2-server-uri")


class ImportRefused(ValueError):
    """A catalog's configuration named a class to import that only the user's own settings may name.

    Attributes:
        key: The property (``py-io-impl``, ...).
        source: Who named it: ``server`` (a REST catalog's configuration) or ``connection``.
    """

    def __init__(self, key: str, source: str) -> None:
        self.key = key
        self.source = source
        super().__init__(f"the {source} named a class to import in {key!r}")


class AddressMoved(ValueError):
    """A REST catalog's configuration moved its address (or its token endpoint) to another origin.

    Attributes:
        key: ``uri`` or ``oauth2-server-uri``.
        origin: The origin it moved to (``scheme://host:port``: no path, no user info).
    """

    def __init__(self, key: str, origin: str) -> None:
        self.key = key
        self.origin = origin
        super().__init__(f"the catalog's configuration moves {key!r} to another origin ({origin})")


def named_classes(properties: Mapping[str, Any]) -> list[str]:
    """The keys of ``properties`` naming a class to import other than the :data:`BUILT_IN` ones."""
    return [key for key, allowed in BUILT_IN.items() if properties.get(key) and properties[key] not in allowed]


def without_classes(spec: CatalogSpec) -> CatalogSpec:
    """``spec``, with a problem for each setting naming a class to import (to open it where no code may run).

    PyIceberg's and PyArrow's own classes (:data:`BUILT_IN`) are no problem.
    """
    for key in named_classes({**spec.properties, **spec.secrets}):
        spec = spec.with_problem(
            key,
            message(
                "{setting} names a class to import, which is not imported where catalogs are read for people who "
                "may not run code (only tasks import it)",
                setting=spec.setting(key),
            ),
        )
    return spec


def _untrusted(properties: Mapping[str, Any], trusted: Mapping[str, Any]) -> list[str]:
    """Keys naming a class that is neither built in nor what the user's own settings name."""
    return [key for key in named_classes(properties) if properties[key] != trusted.get(key)]


def origin(url: str) -> str:
    """``scheme://host:port`` of ``url`` (no user info, no path); empty when it cannot be read."""
    try:
        parts = urlsplit(url)
        return f"{parts.scheme}://{parts.hostname or ''}{f':{parts.port}' if parts.port else ''}"
    except ValueError:
        return ""


def check_configuration(given: Mapping[str, Any], merged: Mapping[str, Any]) -> None:
    """Refuse what a REST catalog's configuration changed of the user's ``given`` properties, if it may not.

    Raises:
        AddressMoved: ``uri`` or ``oauth2-server-uri`` now points to another origin than ``given["uri"]``.
        ImportRefused: The configuration names a class to import.
    """
    home = origin(str(given.get("uri", "")))
    for key in _MOVABLE:
        value = merged.get(key)
        if value is not None and value != given.get(key) and origin(str(value)) != home:
            raise AddressMoved(key, origin(str(value)) or "an address that cannot be read")
    refused = _untrusted(merged, given)
    if refused:
        raise ImportRefused(refused[0], "server")


def guard_file_io(catalog: Any) -> None:
    """Make ``catalog`` load its tables' FileIO without importing a class a table names.

    What the catalog's own properties name (the user's settings, and what a REST catalog's checked
    configuration added) may be imported. The catalog's ``_load_file_io`` (PyIceberg's one place a
    table's properties choose a FileIO) is wrapped on this instance only; no class of PyIceberg changes.
    """
    load = getattr(catalog, "_load_file_io", None)
    if load is None:  # a catalog class of the user's own (``py-catalog-impl``) loading its FileIO its own way
        return
    name = getattr(catalog, "name", "")

    def load_trusted(properties: Mapping[str, Any] | None = None, location: str | None = None) -> Any:
        properties = dict(properties or {})
        refused = _untrusted(properties, catalog.properties)
        if refused:
            log.warning(
                "Catalog %r: a table at %s names a class to import in %s, which is not imported (only the "
                "catalog's own settings choose one); the table is read with the catalog's FileIO.",
                name,
                location,
                ", ".join(refused),
            )
            properties = {key: value for key, value in properties.items() if key not in refused}
        return load(properties, location)

    catalog._load_file_io = load_trusted
