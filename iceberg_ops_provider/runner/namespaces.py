"""Namespace names checked up front, before a catalog or a file system sees them (else they fail late and obscurely)."""

from __future__ import annotations

import unicodedata
from typing import TYPE_CHECKING
from urllib.parse import quote_plus

from iceberg_ops_provider.errors import CatalogConfigError

if TYPE_CHECKING:
    from pyiceberg.catalog import Catalog

__all__ = ["MAX_ENCODED_LENGTH", "MAX_PART_LENGTH", "check_namespace", "check_runner_namespaces"]

MAX_PART_LENGTH = 128
"""Most characters in one dotted part of a namespace: parts become folder names in warehouses."""

MAX_ENCODED_LENGTH = 245
"""Most characters of a migrated namespace once percent-encoded: the history table is partitioned by
namespace, so its rows live in a folder named ``namespace=<encoded name>`` (255 bytes at most)."""

_SHAPE = "use a name such as 'sales' or dotted parts such as 'lake.sales'"
_SEPARATORS = ("/", "\\")
_SHOWN_LENGTH = 60


def _shown(value: object) -> str:
    """``value`` for a message: its repr, shortened when very long."""
    if isinstance(value, str) and len(value) > _SHOWN_LENGTH:
        return f"{value[: _SHOWN_LENGTH - 10]!r}..."
    return repr(value)


def _invalid(what: str, value: object, problem: str) -> CatalogConfigError:
    return CatalogConfigError(f"{what} {_shown(value)} is not a valid namespace: {problem}")


def check_namespace(what: str, value: object) -> None:
    r"""Check that ``value`` (named ``what`` in the message) is a namespace name iceberg-ops can use.

    Dotted parts (``"lake.sales"``), each non-empty, unpadded, at most :data:`MAX_PART_LENGTH`
    characters, without control characters, ``/`` or ``\``.

    Raises:
        CatalogConfigError: The value breaks a rule (a ``ValueError``).
    """
    if not isinstance(value, str) or not all(part and part == part.strip() for part in value.split(".")):
        raise _invalid(what, value, f"{_SHAPE}.")
    for char in value:
        if unicodedata.category(char) == "Cc":
            raise _invalid(what, value, f"it contains the control character {char!r}; remove it ({_SHAPE}).")
        if char in _SEPARATORS:
            raise _invalid(
                what,
                value,
                f"it contains {char!r}, which would become a path separator in warehouse locations; "
                "use '_' within a name (such as 'lake_sales') or '.' between the parts of a nested namespace.",
            )
    parts = value.split(".")
    for part in parts:
        if len(part) > MAX_PART_LENGTH:
            subject = "it" if len(parts) == 1 else f"its part {_shown(part)}"
            raise _invalid(
                what,
                value,
                f"{subject} is {len(part)} characters long; use at most {MAX_PART_LENGTH} characters per part "
                "(each part becomes a folder name in the warehouse).",
            )


def check_runner_namespaces(catalog: Catalog, namespace: str, meta_namespace: str) -> None:
    """Check the namespace a runner migrates and its meta-namespace, before the runner touches anything.

    Both must pass :func:`check_namespace`; the namespace must be outside the meta-namespace and fit,
    percent-encoded, in a folder name (:data:`MAX_ENCODED_LENGTH`). Judged by the catalog's class
    without contacting it: PyIceberg's metastore catalogs stage new tables as ``database.table``, so
    refuse a nested ``namespace``; all but ``SqlCatalog`` cannot create a nested ``meta_namespace``.

    Raises:
        CatalogConfigError: A name breaks one of these rules (a ``ValueError``).
    """
    check_namespace("namespace", namespace)
    check_namespace("meta_namespace", meta_namespace)
    if namespace == meta_namespace:
        raise CatalogConfigError(
            f"namespace {namespace!r} is the meta-namespace that holds the history; migrate another "
            "(or keep the history in another meta_namespace)."
        )
    if namespace.startswith(meta_namespace + "."):
        raise CatalogConfigError(
            f"namespace {namespace!r} is inside the meta-namespace {meta_namespace!r}, where the migration "
            "history and locks live; migrate a namespace outside it (or keep the history in another meta_namespace)."
        )
    _check_encoded_length(namespace)
    _check_nesting(catalog, "namespace", namespace, refuse_on_sql=True)
    _check_nesting(catalog, "meta_namespace", meta_namespace, refuse_on_sql=False)


def _check_encoded_length(namespace: str) -> None:
    """Refuse a namespace whose history partition folder ``namespace=<encoded>`` would not fit."""
    encoded = quote_plus(namespace, safe="")
    if len(encoded) > MAX_ENCODED_LENGTH:
        raise CatalogConfigError(
            f"namespace {_shown(namespace)} is too long for the migration history: its rows are kept in a "
            f"folder named 'namespace=<name>' with the name percent-encoded, {len(encoded)} characters here "
            f"(ASCII letters, digits and '_.-~' count 1, every other character 3 per UTF-8 byte), and at most "
            f"{MAX_ENCODED_LENGTH} fit in a folder name; use a shorter name, ideally of ASCII letters, digits and '_'."
        )


def _check_nesting(catalog: Catalog, what: str, value: str, *, refuse_on_sql: bool) -> None:
    """Refuse a dotted ``value`` on a catalog whose class cannot hold what iceberg-ops puts there."""
    if "." not in value:
        return
    from pyiceberg.catalog import MetastoreCatalog
    from pyiceberg.catalog.sql import SqlCatalog

    if not isinstance(catalog, MetastoreCatalog):
        return
    if isinstance(catalog, SqlCatalog):
        if not refuse_on_sql:
            return
        kind = f"{type(catalog).__name__}, the SQL catalog of the 'sqlite' and 'memory' kinds"
        cannot = "create tables in nested namespaces"
    else:
        kind, cannot = type(catalog).__name__, "create nested namespaces"
    raise CatalogConfigError(
        f"{what} {value!r} is nested (it has dots), and the catalog {catalog.name!r} ({kind}) cannot {cannot}; "
        f"use a name without dots, such as {value.replace('.', '_')!r}, or a REST catalog, which can hold "
        "nested namespaces."
    )
