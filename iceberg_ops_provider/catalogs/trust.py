"""Who may choose what a catalog imports, how it signs, and where it sends its requests.

Only the user's own settings may name a class for PyIceberg to import, set how this process signs or
move a catalog to another origin (docs/catalogs.md, "Who may name a class"; :func:`guard_file_io`).
"""

from __future__ import annotations

import logging
import re
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from iceberg_ops_provider.messages import message

if TYPE_CHECKING:
    from iceberg_ops_provider.catalogs.spec import CatalogSpec

__all__ = [
    "BUILT_IN",
    "AddressMoved",
    "ImportRefused",
    "SettingRefused",
    "check_configuration",
    "guard_file_io",
    "named_classes",
    "origin",
    "without_classes",
]

log = logging.getLogger(__name__)

LOCATION_PROVIDER = "write.py-location-provider.impl"

BUILT_IN: Mapping[str, frozenset[str]] = {
    "py-io-impl": frozenset({"pyiceberg.io.pyarrow.PyArrowFileIO", "pyiceberg.io.fsspec.FsspecFileIO"}),
    "s3.retry-strategy-impl": frozenset(
        {"pyarrow.fs.AwsDefaultS3RetryStrategy", "pyarrow.fs.AwsStandardS3RetryStrategy"}
    ),
    "py-catalog-impl": frozenset(),
    LOCATION_PROVIDER: frozenset(
        {"pyiceberg.table.locations.SimpleLocationProvider", "pyiceberg.table.locations.ObjectStoreLocationProvider"}
    ),
}
"""The properties naming a class PyIceberg imports, and the classes of its own (and PyArrow's) they may name."""

_MOVABLE = ("uri", "oauth2-server-uri")
# How this process authenticates and signs: a server setting these would choose what the credentials sign or reach.
_SIGNING = ("auth", "rest.sigv4-enabled", "rest.signing-name", "rest.signing-region")
# Text urllib.parse and urllib3 read differently (where a host ends), or that no address holds.
_ODD = re.compile(r"[\\\s\x00-\x1f\x7f]")


class ImportRefused(ValueError):
    """A class to import (in ``key``) named by a ``server`` or a ``table``, where only the user's may."""

    def __init__(self, key: str, source: str) -> None:
        self.key = key
        self.source = source
        super().__init__(f"the {source} named a class to import in {key!r}")


class SettingRefused(ValueError):
    """A REST catalog's configuration set how this process authenticates or signs its requests (``key``)."""

    def __init__(self, key: str) -> None:
        self.key = key
        super().__init__(f"the catalog's configuration sets {key!r}")


class AddressMoved(ValueError):
    """A REST catalog's configuration moved ``key`` (its address or token endpoint) to another ``origin``."""

    def __init__(self, key: str, origin: str) -> None:
        self.key = key
        self.origin = origin
        super().__init__(f"the catalog's configuration moves {key!r} to another origin ({origin})")


def named_classes(properties: Mapping[str, Any]) -> list[str]:
    """The keys of ``properties`` naming a class to import (a custom ``auth`` too) other than :data:`BUILT_IN` ones."""
    found = [key for key, allowed in BUILT_IN.items() if properties.get(key) and properties[key] not in allowed]
    auth = properties.get("auth")
    if isinstance(auth, Mapping) and auth.get("impl"):
        found.append("auth")
    return found


def without_classes(spec: CatalogSpec) -> CatalogSpec:
    """``spec``, with a problem for each setting naming a class to import other than :data:`BUILT_IN` ones."""
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
    return [key for key in named_classes(properties) if properties[key] != trusted.get(key)]


def origin(url: str) -> str:
    """``scheme://host:port`` of ``url`` as the HTTP client reads it (a default port left out); empty if unreadable."""
    from urllib3.util import parse_url

    try:
        parts = parse_url(url.strip())
    except ValueError:
        return ""
    scheme = (parts.scheme or "").lower()
    port = None if parts.port == {"http": 80, "https": 443}.get(scheme) else parts.port
    return f"{scheme}://{(parts.host or '').lower().rstrip('.')}{f':{port}' if port else ''}"


def check_configuration(given: Mapping[str, Any], merged: Mapping[str, Any]) -> None:
    """Refuse what a REST catalog's configuration changed of the user's ``given`` properties, if it may not.

    Raises:
        AddressMoved: ``uri`` or ``oauth2-server-uri`` moved to another origin (or holds text clients read apart).
        SettingRefused: The configuration set how requests are authenticated or signed.
        ImportRefused: The configuration names a class to import.
    """
    home = origin(str(given.get("uri", "")))
    for key in _MOVABLE:
        value = merged.get(key)
        if value is None or value == given.get(key):
            continue
        moved = origin(str(value))
        if _ODD.search(str(value)) or not moved or moved != home:
            raise AddressMoved(key, moved if moved and not _ODD.search(moved) else "an address that cannot be read")
    for key in merged:
        signing = key in _SIGNING or (isinstance(key, str) and key.lower() == "header.host")
        if signing and merged.get(key) != given.get(key):
            raise SettingRefused(str(key))
    refused = _untrusted(merged, given)
    if refused:
        raise ImportRefused(refused[0], "server")


def guard_file_io(catalog: Any, *, writes: bool) -> None:
    """Make ``catalog`` open its tables without importing a class a table names.

    A table's FileIO class is left out (the catalog's FileIO reads it); its location provider class is refused
    when ``writes``, before a commit writes anything (SQL, Glue, Hive) or after a REST commit answer named it.
    Only this instance's ``_load_file_io`` and ``commit_table`` are wrapped; no class of PyIceberg changes.
    """
    kind = type(catalog)
    if not hasattr(kind, "_load_file_io"):  # a catalog class of the user's own loading its FileIO its own way
        return
    name = getattr(catalog, "name", "")

    def load_trusted(properties: Mapping[str, Any] | None = None, location: str | None = None) -> Any:
        properties = dict(properties or {})
        refused = _untrusted(properties, catalog.properties)
        if LOCATION_PROVIDER in refused:
            if writes:
                raise ImportRefused(LOCATION_PROVIDER, "table")
            refused.remove(LOCATION_PROVIDER)  # read only: no data file is written, the provider never loaded
            properties.pop(LOCATION_PROVIDER)
        if refused:
            log.warning(
                "Catalog %r: a table at %s names a class to import in %s, which is not imported (only the "
                "catalog's own settings choose one); the table is read with the catalog's FileIO.",
                name,
                location,
                ", ".join(refused),
            )
            properties = {key: value for key, value in properties.items() if key not in refused}
        return kind._load_file_io(catalog, properties, location)  # the class's, as it is when called

    catalog._load_file_io = load_trusted
    if not writes or not hasattr(kind, "commit_table"):
        return

    def commit_trusted(table: Any, requirements: Any, updates: Any) -> Any:
        response = kind.commit_table(catalog, table, requirements, updates)
        if LOCATION_PROVIDER in _untrusted(response.metadata.properties, catalog.properties):
            raise ImportRefused(LOCATION_PROVIDER, "server")  # the commit stands; nothing more is written through it
        return response

    catalog.commit_table = commit_trusted
