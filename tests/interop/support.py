"""Rows as both engines read them, compared without order; the Spark tables the suite starts from."""

from __future__ import annotations

import datetime as dt
import hashlib
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from tests.interop.spark_session import CATALOG_NAME


def normalized(value: Any) -> Any:
    """One value as both engines' Python values compare: UTC-naive timestamps, bytes, tuples for structs and lists.

    Spark shows a ``timestamp`` (Iceberg ``timestamptz``) in the session time zone (UTC here)
    without an offset; PyArrow gives an aware datetime. Spark gives structs as ``Row`` and binaries
    as ``bytearray``; PyArrow gives dicts and ``bytes``.
    """
    if isinstance(value, dt.datetime) and value.tzinfo is not None:
        return value.astimezone(dt.UTC).replace(tzinfo=None)
    if isinstance(value, bytearray | memoryview):
        return bytes(value)
    if hasattr(value, "asDict"):  # pyspark.sql.Row (a tuple: check before tuples)
        value = value.asDict(recursive=False)
    if isinstance(value, dict):
        return tuple((key, normalized(item)) for key, item in value.items())
    if isinstance(value, list | tuple):
        return tuple(normalized(item) for item in value)
    if isinstance(value, float) and value == 0.0:
        return 0.0
    return value


@dataclass(frozen=True)
class Rows:
    """A multiset of rows (tuples of normalized values) with the column names they came with."""

    columns: tuple[str, ...]
    counts: Counter[tuple[Any, ...]]

    @classmethod
    def of(cls, columns: Sequence[str], rows: Iterable[Sequence[Any]]) -> Rows:
        return cls(tuple(columns), Counter(tuple(normalized(value) for value in row) for row in rows))

    def __len__(self) -> int:
        return sum(self.counts.values())

    def digest(self) -> str:
        """An order-free digest: SHA-256 of the sorted rows' reprs with their counts."""
        lines = sorted(f"{row!r}*{count}" for row, count in self.counts.items())
        return hashlib.sha256("\n".join([repr(self.columns), *lines]).encode()).hexdigest()[:16]

    def project(self, columns: Sequence[str]) -> Rows:
        index = [self.columns.index(name) for name in columns]
        projected: Counter[tuple[Any, ...]] = Counter()
        for row, count in self.counts.items():
            projected[tuple(row[i] for i in index)] += count
        return Rows(tuple(columns), projected)

    def difference(self, other: Rows) -> str:
        """What tells two multisets apart, for an assertion message."""
        missing = self.counts - other.counts
        extra = other.counts - self.counts
        return (
            f"columns {self.columns} vs {other.columns}; {len(self)} vs {len(other)} rows; "
            f"only in the first: {list(missing.items())[:5]}; only in the second: {list(extra.items())[:5]}"
        )


def spark_rows(spark: Any, table: str, columns: Sequence[str] | None = None) -> Rows:
    """Every row of ``lake.<table>`` as Spark reads it (deletes applied)."""
    frame = spark.table(f"{CATALOG_NAME}.{table}")
    if columns is not None:
        frame = frame.select(*columns)
    return Rows.of(frame.columns, (tuple(row) for row in frame.collect()))


def our_rows(catalog: Any, table: str, columns: Sequence[str] | None = None) -> Rows:
    """Every row of ``table`` as PyIceberg reads it (deletes applied)."""
    scan = catalog.load_table(table).scan(selected_fields=tuple(columns) if columns else ("*",))
    arrow = scan.to_arrow()
    names = arrow.column_names
    return Rows.of(names, (tuple(row[name] for name in names) for row in arrow.to_pylist()))


def assert_same_rows(expected: Rows, actual: Rows, what: str) -> None:
    assert expected.digest() == actual.digest(), f"{what}: {expected.difference(actual)}"


def sql(spark: Any, *statements: str) -> None:
    """Run Spark SQL statements in order (results dropped)."""
    for statement in statements:
        spark.sql(statement).collect()


def scalar(spark: Any, query: str) -> Any:
    return spark.sql(query).collect()[0][0]


def live_file_paths(table: Any) -> set[str]:
    """The data and delete files the current snapshot of a PyIceberg table lists."""
    table.refresh()
    paths: set[str] = set()
    for task in table.scan().plan_files():
        paths.add(task.file.file_path)
        paths.update(delete.file_path for delete in task.delete_files)
    return paths


# ---------------------------------------------------------------------------------------------------
# The tables Spark creates and fills: each a few hundred rows in many small files, one per INSERT.


def _values(start: int, count: int, row: Any) -> str:
    return ", ".join(row(i) for i in range(start, start + count))


def _event(i: int) -> str:
    region = ("eu", "us", "apac")[i % 3]
    day = 1 + i % 4
    amount = "NULL" if i % 11 == 0 else f"{(i * 37) % 10_000 / 100:.2f}"
    name = "NULL" if i % 13 == 0 else f"'name-{i % 17:02d}'"
    return (
        f"({i}, '{region}', {name}, timestamp'2026-03-0{day} {i % 24:02d}:{i % 60:02d}:00', "
        f"CAST({amount} AS DECIMAL(10,2)), {i % 7}, {float(i) / 8})"
    )


EVENT_COLUMNS = "id bigint, region string, name string, ts timestamp, amount decimal(10,2), qty int, score double"


def fill(spark: Any, table: str, inserts: int, rows: int, start: int = 0) -> int:
    """``inserts`` INSERTs of ``rows`` events each into ``lake.<table>``; the next id."""
    for n in range(inserts):
        first = start + n * rows
        sql(spark, f"INSERT INTO {CATALOG_NAME}.{table} VALUES {_values(first, rows, _event)}")
    return start + inserts * rows


def create_v1_identity(spark: Any, table: str) -> None:
    """Format v1, partitioned by ``region`` (identity)."""
    sql(
        spark,
        f"CREATE TABLE {CATALOG_NAME}.{table} ({EVENT_COLUMNS}) USING iceberg PARTITIONED BY (region) "
        "TBLPROPERTIES ('format-version'='1')",
    )
    fill(spark, table, inserts=4, rows=45)


def create_v2_days_sorted(spark: Any, table: str) -> None:
    """Format v2, partitioned by ``days(ts)``, with a sort order (``WRITE ORDERED BY``)."""
    sql(
        spark,
        f"CREATE TABLE {CATALOG_NAME}.{table} ({EVENT_COLUMNS}) USING iceberg PARTITIONED BY (days(ts)) "
        "TBLPROPERTIES ('format-version'='2')",
        f"ALTER TABLE {CATALOG_NAME}.{table} WRITE ORDERED BY region ASC NULLS FIRST, amount DESC NULLS LAST, "
        "truncate(7, name) DESC NULLS FIRST, bucket(4, id) ASC NULLS LAST, id",
    )
    fill(spark, table, inserts=4, rows=45)


def create_v2_bucket_truncate_deletes(spark: Any, table: str) -> None:
    """Format v2, ``bucket(4, id)`` and ``truncate(6, name)``; merge-on-read DELETE and UPDATE (position deletes)."""
    sql(
        spark,
        f"CREATE TABLE {CATALOG_NAME}.{table} ({EVENT_COLUMNS}) USING iceberg "
        "PARTITIONED BY (bucket(4, id), truncate(6, name)) "
        "TBLPROPERTIES ('format-version'='2', 'write.delete.mode'='merge-on-read', "
        "'write.update.mode'='merge-on-read', 'write.merge.mode'='merge-on-read')",
    )
    fill(spark, table, inserts=4, rows=45)
    sql(
        spark,
        f"DELETE FROM {CATALOG_NAME}.{table} WHERE id % 10 = 3",
        f"UPDATE {CATALOG_NAME}.{table} SET score = -score, name = 'name-upd' WHERE id % 10 = 5",
    )


def create_v2_evolved_by_spark(spark: Any, table: str) -> None:
    """Format v2 whose schema and partition spec Spark changed between INSERTs (files under 3 schemas, 2 specs)."""
    sql(
        spark,
        f"CREATE TABLE {CATALOG_NAME}.{table} ({EVENT_COLUMNS}) USING iceberg PARTITIONED BY (region) "
        "TBLPROPERTIES ('format-version'='2')",
    )
    next_id = fill(spark, table, inserts=3, rows=30)
    sql(
        spark,
        f"ALTER TABLE {CATALOG_NAME}.{table} ADD COLUMN note string",
        f"ALTER TABLE {CATALOG_NAME}.{table} RENAME COLUMN score TO rating",
        f"ALTER TABLE {CATALOG_NAME}.{table} ALTER COLUMN qty TYPE bigint",
        f"ALTER TABLE {CATALOG_NAME}.{table} DROP COLUMN name",
        f"ALTER TABLE {CATALOG_NAME}.{table} ADD PARTITION FIELD days(ts)",
    )
    for n in range(3):
        first = next_id + n * 30
        values = ", ".join(
            f"({i}, '{('eu', 'us')[i % 2]}', timestamp'2026-03-0{1 + i % 3} 10:00:00', "
            f"CAST({i % 50}.25 AS DECIMAL(10,2)), {i % 7}, {i / 4}, {'NULL' if i % 3 else repr(f'n{i}')})"
            for i in range(first, first + 30)
        )
        sql(spark, f"INSERT INTO {CATALOG_NAME}.{table} (id, region, ts, amount, qty, rating, note) VALUES {values}")


SHAPES = {
    "v1-identity": create_v1_identity,
    "v2-days-sorted": create_v2_days_sorted,
    "v2-bucket-truncate-position-deletes": create_v2_bucket_truncate_deletes,
    "v2-schema-and-spec-changed-by-spark": create_v2_evolved_by_spark,
}


def assert_summary_totals(table: Any, what: str) -> None:
    """The current snapshot's ``total-*`` summary counts agree with the files it lists.

    Java's snapshot producers compute each new total from the previous snapshot's, so a wrong total
    that one engine writes is carried on by every later commit of the other.
    """
    table.refresh()
    snapshot = table.current_snapshot()
    data_files = delete_files = records = position_deletes = 0
    seen: set[str] = set()
    for task in table.scan().plan_files():
        data_files += 1
        records += task.file.record_count
        for delete in task.delete_files:
            if delete.file_path not in seen:
                seen.add(delete.file_path)
                delete_files += 1
                position_deletes += delete.record_count
    summary = snapshot.summary.additional_properties if snapshot.summary else {}
    actual = {
        "total-data-files": data_files,
        "total-records": records,
        "total-delete-files": delete_files,
        "total-position-deletes": position_deletes,
    }
    # A delete file that applies to no live data file any more is not seen by a scan; the summary still counts it.
    recorded = {key: int(summary[key]) for key in actual if key in summary}
    assert recorded["total-data-files"] == data_files and recorded["total-records"] == records, (
        f"{what}: summary {recorded} vs files {actual} (operation {snapshot.summary.operation})"
    )
    assert recorded.get("total-delete-files", 0) >= delete_files, f"{what}: summary {recorded} vs files {actual}"


FILTERS = (
    "id < 40",
    "id BETWEEN 50 AND 120",
    "region = 'us'",
    "amount >= 50",
    "ts >= TIMESTAMP '2026-03-02 00:00:00' AND ts < TIMESTAMP '2026-03-03 00:00:00'",
    "qty = 3",
)


def filtered_counts(spark: Any, table: str, filters: Sequence[str] = FILTERS) -> dict[str, int]:
    """Row counts of Spark's filtered reads: each prunes files by partition values and column bounds.

    One query, a ``UNION ALL`` of one filtered count per predicate: Spark plans each branch's scan with
    its own filter pushed down, as it would plan each query alone.
    """
    names = set(spark.table(f"{CATALOG_NAME}.{table}").columns)
    usable = [predicate for predicate in filters if predicate.split()[0] in names]
    if not usable:
        return {}
    query = " UNION ALL ".join(
        f"SELECT {n} AS k, count(*) AS c FROM {CATALOG_NAME}.{table} WHERE {predicate}"
        for n, predicate in enumerate(usable)
    )
    return {usable[row.k]: row.c for row in spark.sql(query).collect()}


def read_metadata_tables(spark: Any, table: str) -> dict[str, int]:
    """Row counts of Spark's metadata tables of ``table`` (each read in full: manifests, lists and entries parsed)."""
    counts = {}
    for kind in ("snapshots", "history", "manifests", "all_manifests", "files", "entries", "partitions", "refs"):
        counts[kind] = len(spark.sql(f"SELECT * FROM {CATALOG_NAME}.{table}.{kind}").collect())
    return counts


def _nested(i: int) -> str:
    tags = "NULL" if i % 5 == 0 else f"array('t{i % 3}', 'u{i % 4}')"
    attrs = "NULL" if i % 6 == 0 else f"map('a', {i}, 'b{i % 2}', {i * 2})"
    lines = f"array(named_struct('sku', 'sku-{i % 9}', 'qty', {i % 4}), named_struct('sku', 'x', 'qty', NULL))"
    return (
        f"({i}, named_struct('city', 'c{i % 5}', 'geo', named_struct('lat', {i / 100}, 'lon', -{i / 50})),"
        f" {tags}, {attrs}, {lines}, timestamp_ntz'2026-02-0{1 + i % 3} 0{i % 10}:00:00', date'2026-02-1{i % 10}',"
        f" X'{i % 256:02X}FF', {'true' if i % 2 else 'false'}, CAST({i / 3} AS FLOAT), '{('eu', 'us')[i % 2]}')"
    )


def create_v2_nested(spark: Any, table: str) -> None:
    """Format v2 with nested and less common types (struct, list of structs, map, timestamp_ntz, binary)."""
    sql(
        spark,
        f"CREATE TABLE {CATALOG_NAME}.{table} (id bigint, address struct<city: string, geo: struct<lat: double, "
        "lon: double>>, tags array<string>, attrs map<string, bigint>, lines array<struct<sku: string, qty: int>>, "
        "local timestamp_ntz, day date, raw binary, flag boolean, ratio float, region string) USING iceberg "
        "PARTITIONED BY (region) TBLPROPERTIES ('format-version'='2')",
        f"ALTER TABLE {CATALOG_NAME}.{table} WRITE ORDERED BY local DESC, id",
    )
    for n in range(5):
        sql(spark, f"INSERT INTO {CATALOG_NAME}.{table} VALUES {_values(n * 20, 20, _nested)}")


SHAPES["v2-nested-types"] = create_v2_nested


def spark_sort_terms(table: Any) -> list[tuple[str, str]]:
    """The table's sort order as Spark terms (transforms as Iceberg's functions) and their directions."""
    from pyiceberg.table.sorting import NullOrder, SortDirection
    from pyiceberg.transforms import (
        BucketTransform,
        DayTransform,
        HourTransform,
        IdentityTransform,
        MonthTransform,
        TruncateTransform,
        YearTransform,
    )

    functions = {YearTransform: "years", MonthTransform: "months", DayTransform: "days", HourTransform: "hours"}
    schema = table.schema()
    terms = []
    for field in table.sort_order().fields:
        column = schema.find_column_name(field.source_id)
        transform = field.transform
        if isinstance(transform, IdentityTransform):
            term = column
        elif isinstance(transform, BucketTransform):
            term = f"{CATALOG_NAME}.system.bucket({transform.num_buckets}, {column})"
        elif isinstance(transform, TruncateTransform):
            term = f"{CATALOG_NAME}.system.truncate({transform.width}, {column})"
        else:
            term = f"{CATALOG_NAME}.system.{functions[type(transform)]}({column})"
        direction = "ASC" if field.direction == SortDirection.ASC else "DESC"
        nulls = "NULLS FIRST" if field.null_order == NullOrder.NULLS_FIRST else "NULLS LAST"
        terms.append((term, f"{direction} {nulls}"))
    return terms


def assert_files_sorted_as_spark_sorts(spark: Any, table: Any, name: str, files: Iterable[str]) -> int:
    """Each of ``files`` holds its rows in the order Spark's ``ORDER BY`` of the table's sort order gives.

    Compares the sort keys of the rows in file order (``_pos``) with the same keys as Spark sorts them.
    Returns how many files were checked.
    """
    terms = spark_sort_terms(table)
    keys = ", ".join(term for term, _ in terms)
    order = ", ".join(f"{term} {how}" for term, how in terms)
    checked = 0
    for path in files:
        rows = f"SELECT *, _pos FROM {CATALOG_NAME}.{name} WHERE _file = '{path}'"
        in_file = [tuple(row) for row in spark.sql(f"SELECT {keys} FROM ({rows}) ORDER BY _pos").collect()]
        by_spark = [tuple(row) for row in spark.sql(f"SELECT {keys} FROM ({rows}) ORDER BY {order}").collect()]
        assert in_file == by_spark, f"{path} does not hold its rows in Spark's order ({order})"
        checked += 1
    return checked
