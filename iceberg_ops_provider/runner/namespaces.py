"""Namespace names checked up front, before a catalog or a file system sees them.

A bad name otherwise fails late and obscurely: a very long part as a raw ``OSError: File name too
long`` from the warehouse, a ``/`` as an extra folder level in table locations, a dotted namespace
on a SQL catalog as a failed migration once its first table is created. :func:`check_namespace`
checks the shape of one name; :func:`check_runner_namespaces` checks the pair a migration runner is
given, against each other and against what the catalog can hold.
"""

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


def _has_shape(value: str) -> bool:
    """Whether ``value`` is dotted parts, each non-empty and without surrounding whitespace."""
    return all(part and part == part.strip() for part in value.split("."))


def _invalid(what: str, value: object, problem: str) -> CatalogConfigError:
    return CatalogConfigError(f"{what} {_shown(value)} is not a valid namespace: {problem}")


def check_namespace(what: str, value: object) -> None:
    r"""Check that ``value`` is a namespace name iceberg-ops can use, before anything uses it.

    The name is a non-empty string of dotted parts (``"sales"``, ``"lake.sales"``). Each part is
    non-empty, has no leading or trailing whitespace, is at most :data:`MAX_PART_LENGTH`
    characters long, and has no control characters and no ``/`` or ``\``, which would become path
    separators in warehouse locations.

    Args:
        what: What the value is, for the message (``"namespace"``, ``"meta_namespace"``).
        value: The value given.

    Raises:
        CatalogConfigError: The value breaks a rule; the message names ``what``, the value (shortened
            when very long) and how to fix it. It is a ``ValueError``.
    """
    if not isinstance(value, str) or not _has_shape(value):
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

    Both must pass :func:`check_namespace`. The namespace must be neither the meta-namespace nor
    inside it (that is where the history and the locks live), and must fit, percent-encoded, in a
    folder name of the history table (:data:`MAX_ENCODED_LENGTH`). Dotted (nested) names are
    refused on catalogs that cannot hold them, judged by the catalog's class without contacting it:

    * PyIceberg's metastore catalogs (``SqlCatalog``, which the ``sqlite`` and ``memory`` kinds
      build, ``GlueCatalog``, ``HiveCatalog``, ``DynamoDbCatalog``...) stage a new table with a
      two-level ``database.table`` identifier and refuse a table in a nested namespace, so a
      migration's first ``ctx.create_table`` would fail: a nested ``namespace`` is refused on them.
    * The history and lock tables are created without staging, which ``SqlCatalog`` allows in a
      nested namespace; the other metastore catalogs refuse even to create one, so a nested
      ``meta_namespace`` is refused on them and accepted on ``SqlCatalog``.

    Args:
        catalog: The catalog the runner will use; it is not contacted.
        namespace: The namespace to migrate.
        meta_namespace: The namespace holding the history and lock tables.

    Raises:
        CatalogConfigError: A name breaks one of these rules; the message says which and how to fix
            it. It is a ``ValueError``.
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
