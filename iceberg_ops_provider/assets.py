"""Airflow Assets for Iceberg tables: one consistent name and URI per table, and back again.

DAGs that produce and consume a table agree on its asset by building it the same way. The ``iceberg``
URI scheme is not registered with Airflow (docs/assets.md): only its basic URI normalisation applies.
:func:`asset_table` tells the operators which table an outlet names, for their asset event metadata.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from airflow.sdk import Asset

__all__ = ["SCHEME", "asset_table", "iceberg_asset"]

SCHEME = "iceberg"
# Characters a URI cannot carry as they are, or that would change what it means (RFC 3986's gen-delims and
# the characters it leaves out); whitespace and control characters are refused too.
_RESERVED = frozenset('/:@?#%<>"\\^`{}|[]')
_RULE = (
    "letters (of any script), digits and punctuation such as '_', '-', '+', '$' are fine; whitespace, control "
    'characters and / : @ ? # % < > " \\ ^ ` { } | [ ] are not'
)


def _refused(text: str, also: str = "") -> list[str]:
    bad = (c for c in text if c in _RESERVED or c in also or c.isspace() or not c.isprintable())
    return list(dict.fromkeys(bad))


def _shown(chars: list[str]) -> str:
    return " ".join(repr(char) for char in chars)


def _check_catalog(catalog_name: object) -> str:
    if not isinstance(catalog_name, str) or not catalog_name:
        raise ValueError(
            f"catalog_name={catalog_name!r}: give the catalog's name as a non-empty string, e.g. iceberg_asset("
            "'lake', 'sales.orders')."
        )
    if bad := _refused(catalog_name, also="."):
        raise ValueError(
            f"catalog_name={catalog_name!r} contains {_shown(bad)}; a catalog name here is one word without '.', "
            f"as it appears in the asset's URI host: {_RULE}."
        )
    return catalog_name


def _split_table(table: object) -> tuple[str, str]:
    """``("ns", "table")`` of ``"ns.table"`` (``("a.b", "t")`` for a nested namespace)."""
    parts = table.split(".") if isinstance(table, str) else []
    if len(parts) < 2:
        raise ValueError(
            f"table={table!r}: give the table with its namespace, as 'namespace.table' (e.g. 'sales.orders'); "
            "an asset without its namespace would name a different table in every namespace."
        )
    for part in parts:
        if (bad := _refused(part)) or not part:
            what = f"contains {_shown(bad)}" if bad else "is empty"
            raise ValueError(
                f"table={table!r} has a malformed part {part!r}: it {what}. Use 'namespace.table' whose parts are "
                f"not empty: {_RULE}."
            )
    return ".".join(parts[:-1]), parts[-1]


def iceberg_asset(catalog_name: str, table: str, **asset_options: Any) -> Asset:
    """The Airflow Asset of an Iceberg table.

    Args:
        catalog_name: The catalog, as the DAGs call it (one word: it is the URI's host).
        table: ``namespace.table`` (``a.b.table`` for a nested namespace).
        **asset_options: More :class:`airflow.sdk.Asset` arguments (``group``, ``extra``, ``watchers``).

    Returns:
        ``Asset(name=f"{catalog}.{namespace}.{table}", uri=f"iceberg://{catalog}/{namespace}/{table}")``.

    Raises:
        ValueError: An empty or malformed catalog name, or a table without its namespace.
    """
    from airflow.sdk import Asset

    catalog = _check_catalog(catalog_name)
    namespace, name = _split_table(table)
    for reserved in ("name", "uri"):
        if reserved in asset_options:
            raise ValueError(f"iceberg_asset builds the asset's {reserved} itself; do not pass {reserved}=.")
    return Asset(name=f"{catalog}.{namespace}.{name}", uri=f"{SCHEME}://{catalog}/{namespace}/{name}", **asset_options)


def asset_table(asset: object) -> tuple[str, str] | None:
    """``(catalog, "namespace.table")`` of an asset :func:`iceberg_asset` built; ``None`` for any other asset."""
    uri = getattr(asset, "uri", None)
    parts = uri.removeprefix(f"{SCHEME}://").split("/") if isinstance(uri, str) else []
    if len(parts) != 3 or not all(parts) or not uri.startswith(f"{SCHEME}://"):
        return None
    return parts[0], f"{parts[1]}.{parts[2]}"
