"""How lineage names an Iceberg table: the dataset identity OpenLineage-Spark gives it, without Airflow.

A table is named by its storage location (docs/lineage.md); :class:`TableLineage` is plain data about it.
"""

from __future__ import annotations

import posixpath
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any
from urllib.parse import parse_qsl, urlencode, urlsplit

from iceberg_ops_provider.catalogs.redact import is_secret_key, split_url

if TYPE_CHECKING:
    from pyiceberg.catalog import Catalog
    from pyiceberg.table import Table
    from pyiceberg.types import IcebergType, NestedField

    from iceberg_ops_provider.migration.touched import TouchedTable

__all__ = [
    "DatasetName",
    "SchemaField",
    "TableLineage",
    "catalog_namespace",
    "catalog_table_name",
    "catalog_type",
    "dropped_table_lineage",
    "public_uri",
    "table_dataset",
    "table_lineage",
    "touched_lineage",
    "written_statistics",
]

_SAME_SCHEME = {"s3a": "s3", "s3n": "s3", "gcs": "gs"}


@dataclass(frozen=True)
class DatasetName:
    """A lineage dataset identity.

    Attributes:
        namespace: Where the dataset lives (``s3://bucket``, ``file``, a catalog URI, ...).
        name: The dataset within that namespace (a path, or ``namespace.table`` for a symlink).
    """

    namespace: str
    name: str


def table_dataset(location: str) -> DatasetName:
    """The dataset identity of a table stored at ``location`` (its ``table.location()``; empty: ``ValueError``)."""
    if not location or not location.strip():
        raise ValueError("A table location is needed to name the table for lineage; the table reported none.")
    parts = urlsplit(location.strip())
    scheme = parts.scheme.lower()
    if scheme in ("", "file") or len(scheme) == 1:  # a local path (or a Windows drive letter)
        path = parts.path if scheme == "file" else location.strip()
        return DatasetName("file", posixpath.normpath(path) if path.startswith("/") else path.rstrip("/"))
    scheme = _SAME_SCHEME.get(scheme, scheme)
    # In abfss, container@account is the namespace itself; anywhere else user info is credentials.
    netloc = parts.netloc if scheme in ("abfs", "abfss", "wasb", "wasbs") else parts.netloc.rsplit("@", 1)[-1]
    path = parts.path.rstrip("/")
    if scheme == "hdfs":
        return DatasetName(f"hdfs://{netloc}", path or "/")
    return DatasetName(f"{scheme}://{netloc}", path.lstrip("/"))


def catalog_namespace(catalog_type: str, properties: Mapping[str, Any], catalog_name: str = "") -> str:
    """The symlink namespace of a table's catalog, as OpenLineage's naming specification names it.

    Hive ``hive://<host>:<port>`` (its first ``thrift://`` URI), Glue ``arn:aws:glue:<region>:<account>``
    (the account is ``glue.id``; without it ``arn:aws:glue:<region>``), REST and SQL catalogs their
    ``uri`` without credentials, any other ``<type>://<catalog name>``.
    """
    kind = catalog_type.lower()
    uri = str(properties.get("uri") or "")
    if kind == "glue":
        region = properties.get("glue.region") or properties.get("client.region") or properties.get("region_name")
        account = properties.get("glue.id")
        return ":".join(str(part) for part in ("arn:aws:glue", region, account) if part)
    if kind == "hive" and uri:
        first = urlsplit(uri.split(",")[0].strip())
        if first.scheme == "thrift" and first.hostname:
            return f"hive://{first.hostname}:{first.port}" if first.port else f"hive://{first.hostname}"
    if uri:
        return public_uri(uri) or uri
    return f"{kind}://{catalog_name}" if catalog_name else f"{kind}://"


def catalog_table_name(catalog_type: str, table: str) -> str:
    """The symlink name of ``namespace.table`` in a catalog: itself, or ``table/<database>/<table>`` in Glue."""
    if catalog_type.lower() == "glue":
        namespace, _, name = table.rpartition(".")
        return f"table/{namespace.replace('.', '/')}/{name}" if namespace else f"table/{name}"
    return table


def public_uri(uri: str | None) -> str | None:
    """``uri`` fit to publish: without user info, fragment, trailing ``/`` and query parameters naming a secret.

    Cut as the catalogs cut theirs (:func:`~iceberg_ops_provider.catalogs.redact.split_url`), so a password
    holding ``/``, ``#`` or ``@`` never reaches a lineage event.
    """
    if not uri:
        return None
    parts = split_url(str(uri))
    if parts is None:
        return str(uri).split("#", 1)[0].rstrip("/")
    base = f"{parts.scheme}://{parts.host}{parts.path}".rstrip("/")
    if parts.user is not None:  # a connection string: its options may hold more of the same
        return base
    kept = [(k, v) for k, v in parse_qsl(parts.query or "", keep_blank_values=True) if not is_secret_key(k)]
    return f"{base}?{urlencode(kept)}" if kept else base


# PyIceberg catalog classes and the type names OpenLineage's catalog facet uses for them.
_CATALOG_TYPES = {
    **{f"{name}Catalog": name.lower() for name in ("Sql", "Rest", "Glue", "Hive", "DynamoDb")},
    "BigQueryMetastoreCatalog": "bigquery",
    "InMemoryCatalog": "in-memory",
}


def catalog_type(catalog: Catalog) -> str:
    """The type of a PyIceberg catalog (``sql``, ``rest``, ``glue``, ``hive``, ...), subclasses included."""
    known = next((_CATALOG_TYPES[k.__name__] for k in type(catalog).__mro__ if k.__name__ in _CATALOG_TYPES), None)
    declared = getattr(catalog, "properties", {}).get("type")
    return known or (str(declared) if declared else type(catalog).__name__.lower())


@dataclass(frozen=True)
class SchemaField:
    """A column as lineage shows it: its name, Iceberg type, doc, and what a nested type holds.

    Attributes:
        name: The column name (``_element`` for a list's elements, ``key`` and ``value`` for a map's).
        type: The Iceberg type as text (``long``, ``decimal(18, 2)``); ``struct``, ``list`` or ``map`` for
            nested types, whose content is in :attr:`fields` (as OpenLineage-Spark nests them).
        fields: The fields of a struct, the element of a list, the key and value of a map.
    """

    name: str
    type: str
    doc: str | None = None
    fields: tuple[SchemaField, ...] = ()


def _schema_field(name: str, field_type: IcebergType, doc: str | None = None) -> SchemaField:
    from pyiceberg.types import ListType, MapType, StructType

    if isinstance(field_type, StructType):
        return SchemaField(name, "struct", doc, _schema_fields(field_type.fields))
    if isinstance(field_type, ListType):
        return SchemaField(name, "list", doc, (_schema_field("_element", field_type.element_type),))
    if isinstance(field_type, MapType):
        children = (_schema_field("key", field_type.key_type), _schema_field("value", field_type.value_type))
        return SchemaField(name, "map", doc, children)
    return SchemaField(name, str(field_type), doc)


def _schema_fields(fields: Iterable[NestedField]) -> tuple[SchemaField, ...]:
    return tuple(_schema_field(field.name, field.field_type, field.doc or None) for field in fields)


@dataclass(frozen=True)
class TableLineage:
    """What lineage says about one table at one snapshot.

    Attributes:
        catalog_type: See :func:`catalog_type`; ``catalog_namespace``: :func:`catalog_namespace`.
        catalog_uri: The catalog's URI without credentials, if it has one.
        warehouse: The catalog's warehouse (a location, or a warehouse name for REST catalogs).
        location: Where the table is stored (``None``: unknown, and the table cannot be named).
        schema: The columns at :attr:`snapshot_id` (empty for a dropped table).
        rows: Rows written (``bytes``, ``files``: bytes and data files), when the operation knows them.
        change: ``create``, ``alter``, ``drop``, ``rename``, ``overwrite`` (``None``: only data, or nothing, changed).
        previous_table: For a rename, the name it had.
        file_format: The format new data files are written in (``write.format.default``).
    """

    catalog_name: str
    catalog_type: str
    catalog_namespace: str
    catalog_uri: str | None
    warehouse: str | None
    table: str
    location: str | None
    schema: tuple[SchemaField, ...] = ()
    snapshot_id: int | None = None
    rows: int | None = None
    bytes: int | None = None
    files: int | None = None
    change: str | None = None
    previous_table: str | None = None
    file_format: str | None = None

    @property
    def dataset(self) -> DatasetName | None:
        """The table's dataset identity, from its location; ``None`` when the location is unknown."""
        return table_dataset(self.location) if self.location else None

    @property
    def symlink(self) -> DatasetName:
        """The catalog's name of the table: ``(catalog namespace, namespace.table)``; ``table/<db>/<table>`` in Glue."""
        return DatasetName(self.catalog_namespace, catalog_table_name(self.catalog_type, self.table))

    @property
    def previous_symlink(self) -> DatasetName | None:
        """For a rename, the catalog's name of the table before it."""
        if self.previous_table is None:
            return None
        return DatasetName(self.catalog_namespace, catalog_table_name(self.catalog_type, self.previous_table))


def _catalog_part(catalog: Catalog) -> dict[str, Any]:
    kind = catalog_type(catalog)
    properties = dict(getattr(catalog, "properties", {}) or {})
    name = str(getattr(catalog, "name", "") or kind)
    return {
        "catalog_name": name,
        "catalog_type": kind,
        "catalog_namespace": catalog_namespace(kind, properties, name),
        "catalog_uri": public_uri(properties.get("uri")),
        "warehouse": public_uri(properties.get("warehouse")),
    }


def table_lineage(
    catalog: Catalog,
    table: Table,
    *,
    snapshot_id: int | None = None,
    rows: int | None = None,
    bytes: int | None = None,
    files: int | None = None,
    change: str | None = None,
    previous_table: str | None = None,
) -> TableLineage:
    """The lineage of ``table`` at ``snapshot_id`` (default its current one), with that snapshot's schema.

    Reads only what the loaded table's metadata holds: no call to the catalog.
    """
    current_id = table.metadata.current_snapshot_id
    snapshot_id = current_id if snapshot_id is None else snapshot_id
    # The schema an older snapshot was written with (the current one when unknown).
    snapshot = table.snapshot_by_id(snapshot_id) if snapshot_id not in (None, current_id) else None
    schema = table.schemas().get(getattr(snapshot, "schema_id", None)) or table.schema()
    return TableLineage(
        **_catalog_part(catalog),
        table=".".join(table.name()),
        location=table.location(),
        schema=_schema_fields(schema.fields),
        snapshot_id=snapshot_id,
        rows=rows,
        bytes=bytes,
        files=files,
        change=change,
        previous_table=previous_table,
        file_format=str(table.properties.get("write.format.default", "parquet")).lower(),
    )


def dropped_table_lineage(catalog: Catalog, table: str, location: str | None) -> TableLineage:
    """The lineage of a table that is gone: its names and where it was stored, nothing else."""
    return TableLineage(**_catalog_part(catalog), table=table, location=location, change="drop")


def written_statistics(table: Table, snapshot_ids: Iterable[int]) -> tuple[int, int, int]:
    """Rows, bytes and data files the snapshots ``snapshot_ids`` added, from their summaries."""
    snapshots = (table.snapshot_by_id(snapshot_id) for snapshot_id in snapshot_ids)
    summaries = [snapshot.summary for snapshot in snapshots if snapshot is not None and snapshot.summary is not None]
    keys = ("added-records", "added-files-size", "added-data-files")
    rows, size, files = (sum(int(summary.get(key, 0) or 0) for summary in summaries) for key in keys)
    return rows, size, files


def touched_lineage(catalog: Catalog, touched: Iterable[TouchedTable]) -> list[TableLineage]:
    """The lineage of every table a migration run touched, each at its snapshot now (one load per table).

    A dropped table is named by the location noted before the drop; one dropped by someone else since is left out.
    """
    from pyiceberg.exceptions import NoSuchTableError

    found = []
    for item in touched:
        change = None if item.change == "write" else item.change
        if item.change == "drop":
            found.append(dropped_table_lineage(catalog, item.table, item.location))
            continue
        try:
            table = catalog.load_table(item.table)
        except NoSuchTableError:
            continue
        found.append(table_lineage(catalog, table, change=change, previous_table=item.previous))
    return found
