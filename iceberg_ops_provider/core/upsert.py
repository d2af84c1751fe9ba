"""Upsert with the checks PyIceberg leaves to the caller.

:func:`upsert` does what :meth:`pyiceberg.table.Table.upsert` does, in one atomic commit, once sure
the request makes sense: key columns that exist and identify rows (no nulls or duplicates in the
data), every column, the table's schema satisfied. The data is cast to the table's column types.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import pyarrow as pa
import pyarrow.compute as pc
from pyiceberg.table import DataScan, Table, UpsertResult, upsert_util

from iceberg_ops_provider.core.contract import conform_to_table
from iceberg_ops_provider.errors import UpsertError

__all__ = ["key_columns", "upsert"]


def key_columns(table: Table, join_cols: Sequence[str] | None = None) -> list[str]:
    """The columns that identify a row: ``join_cols`` if given, else the table's identifier fields.

    Raises:
        UpsertError: No key columns at all, or a key column the table does not have.
    """
    schema = table.schema()
    name = ".".join(table.name())
    if join_cols is None:
        keys = [schema.find_column_name(field_id) for field_id in schema.identifier_field_ids]
        if not keys:
            raise UpsertError(
                f"Table {name} has no identifier fields, so an upsert does not know which rows match. "
                "Pass join_cols=[...] or set identifier fields on the table "
                "(with table.update_schema() as u: u.set_identifier_fields('id'))."
            )
        return [key for key in keys if key is not None]
    keys = list(join_cols)
    if not keys:
        raise UpsertError("join_cols is empty; name at least one column that identifies a row.")
    missing = [key for key in keys if key not in schema.column_names]
    if missing:
        raise UpsertError(f"Key column(s) {missing} are not in table {name}; its columns are {schema.column_names}.")
    return keys


def _check_keys(data: pa.Table, keys: list[str]) -> None:
    absent = [key for key in keys if key not in data.column_names]
    if absent:
        raise UpsertError(f"Key column(s) {absent} are missing from the data; the data has {data.column_names}.")
    for key in keys:
        nulls = data.column(key).null_count
        if nulls:
            raise UpsertError(f"Key column {key!r} has {nulls} null value(s) in the data; a null key matches no row.")
    counts = data.group_by(keys).aggregate([([], "count_all")])
    duplicated = counts.filter(pc.greater(counts.column("count_all"), 1))
    if duplicated.num_rows:
        example = {key: duplicated.column(key)[0].as_py() for key in keys}
        raise UpsertError(
            f"The data has {duplicated.num_rows} key(s) that occur more than once (for example {example}); "
            "an upsert needs one row per key. Deduplicate the data first."
        )


def upsert(
    table: Table,
    data: pa.Table,
    *,
    join_cols: Sequence[str] | None = None,
    update_matched: bool = True,
    insert_unmatched: bool = True,
    snapshot_properties: Mapping[str, str] | None = None,
) -> UpsertResult:
    """Update rows whose key matches and insert the rest, in one commit; returns PyIceberg's ``UpsertResult``.

    ``data`` has every column of the table (by name; extra columns are an error); ``join_cols``
    default to the table's identifier fields. Empty data commits nothing.

    Raises:
        UpsertError: No usable key, null or duplicate keys in the data.
        SchemaContractError: The data does not match the table's schema (every problem listed).
    """
    if not isinstance(data, pa.Table):
        raise UpsertError(f"upsert takes a pyarrow.Table, got {type(data).__name__}; use pa.Table.from_batches(...).")
    keys = key_columns(table, join_cols)
    _check_keys(data, keys)
    missing = [f.name for f in table.schema().fields if f.name not in data.column_names]
    if missing:
        raise UpsertError(
            f"The data lacks column(s) {missing} of table {'.'.join(table.name())}; an upsert replaces whole "
            "rows, so it needs every column. Add them (pa.nulls(n, type) for unknown values) or use append."
        )
    prepared = conform_to_table(data, table)
    if prepared.num_rows == 0 or not (update_matched or insert_unmatched):
        return UpsertResult(rows_updated=0, rows_inserted=0)
    properties = dict(snapshot_properties or {})
    with table.transaction() as transaction:
        # The rows to match, read with the current schema: PyIceberg 0.12's own upsert reads them with
        # the last *snapshot*'s, failing after a schema change no data commit has followed yet.
        scan = DataScan(transaction.table_metadata, table.io, upsert_util.create_match_filter(prepared, keys))
        existing = scan.to_arrow().cast(prepared.schema)
        to_update = to_insert = prepared.slice(0, 0)
        if update_matched and existing.num_rows:
            to_update = upsert_util.get_rows_to_update(prepared, existing, keys).cast(prepared.schema)
        if insert_unmatched:  # cast back: joins drop NOT NULL
            unmatched = prepared.join(existing.select(keys), keys=keys, join_type="left anti")
            to_insert = unmatched.select(prepared.column_names).cast(prepared.schema)
        if to_update.num_rows:
            match = upsert_util.create_match_filter(to_update, keys)
            transaction.overwrite(to_update, overwrite_filter=match, snapshot_properties=properties)
        if to_insert.num_rows:
            transaction.append(to_insert, snapshot_properties=properties)
    return UpsertResult(rows_updated=to_update.num_rows, rows_inserted=to_insert.num_rows)
