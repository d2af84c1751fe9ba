"""The streaming file copier on real tables: rows land in the right target columns and partitions, the
files' statistics are PyIceberg's own, deletes and filters apply, failures leave no open writer and
every created file listed."""

from __future__ import annotations

import itertools
import os
import threading
from collections import Counter
from collections.abc import Callable
from datetime import date
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest
from pyiceberg.catalog.sql import SqlCatalog
from pyiceberg.expressions import AlwaysTrue, EqualTo, GreaterThanOrEqual
from pyiceberg.io.pyarrow import (
    _determine_partitions,
    compute_statistics_plan,
    data_file_statistics_from_parquet_metadata,
    parquet_file_to_data_file,
    parquet_path_to_id_mapping,
    schema_to_pyarrow,
)
from pyiceberg.manifest import DataFile, FileFormat
from pyiceberg.partitioning import PartitionField, PartitionSpec
from pyiceberg.schema import Schema, sanitize_column_names
from pyiceberg.transforms import BucketTransform, DayTransform, IdentityTransform
from pyiceberg.types import (
    DateType,
    DecimalType,
    DoubleType,
    LongType,
    NestedField,
    StringType,
    TimestamptzType,
)

from iceberg_ops_provider.core.parquet_output import split_by_partition
from iceberg_ops_provider.data_migration.copy import MAX_OPEN_FILES, CopyOutcome, FileCopier
from iceberg_ops_provider.data_migration.source_pieces import SourcePiece, split_into_pieces
from tests.data_migration.support import ORDERS, orders, source_table
from tests.support.tables import commit_delete_files, position_delete_file

EPOCH = date(1970, 1, 1)
ALL = AlwaysTrue()
_ICEBERG = {
    "id": LongType(),
    "customer": StringType(),
    "amount": DecimalType(12, 2),
    "ts": TimestamptzType(),
    "day": DateType(),
}

# The target lists the columns in another order, so its field ids differ from the source's: a copy
# matching columns by id instead of by name would put values in the wrong columns.
TARGET_ORDER = ["day", "ts", "customer", "amount", "id"]


def converter(target: Any, rename: dict[str, str] | None = None) -> Callable[[pa.RecordBatch], pa.RecordBatch]:
    """A batch of source rows as the target's file columns: renamed, the target's field ids attached, types kept.

    Target columns the batch lacks are filled with nulls.
    """
    schema = target.schema()
    file_fields = dict(
        zip((c.field_id for c in schema.columns), schema_to_pyarrow(sanitize_column_names(schema)), strict=True)
    )
    rename = rename or {}

    def convert(batch: pa.RecordBatch) -> pa.RecordBatch:
        by_name = {rename.get(name, name): batch.column(name) for name in batch.schema.names}
        arrays, fields = [], []
        for column in schema.columns:
            file_field = file_fields[column.field_id]
            if column.name in by_name:
                values = by_name[column.name]
                arrays.append(values)
                fields.append(pa.field(file_field.name, values.type, file_field.nullable, file_field.metadata))
            else:
                arrays.append(pa.nulls(batch.num_rows, file_field.type))
                fields.append(file_field)
        return pa.RecordBatch.from_arrays(arrays, schema=pa.schema(fields))

    return convert


def failing_converter(target: Any, on_call: int, error: Exception) -> Callable[[pa.RecordBatch], pa.RecordBatch]:
    """The target's converter, raising ``error`` on its ``on_call``-th call (counted across lanes)."""
    plain = converter(target)
    calls = []
    lock = threading.Lock()

    def convert(batch: pa.RecordBatch) -> pa.RecordBatch:
        with lock:
            calls.append(1)
            if len(calls) == on_call:
                raise error
        return plain(batch)

    return convert


def target_table(catalog: Any, name: str, columns: list[str] = TARGET_ORDER, partition: Any = None, **properties: str):
    """An empty table with the orders columns in ``columns``' order, partitioned by ``partition(update)``."""
    schema = pa.schema([ORDERS.field(column) for column in columns])
    catalog.create_namespace_if_not_exists(name.split(".")[0])
    with catalog.create_table_transaction(name, schema, properties=properties) as transaction:
        if partition is not None:
            with transaction.update_spec() as update:
                partition(update)
    return catalog.load_table(name)


def copier(source: Any, target: Any, **kwargs: Any) -> FileCopier:
    kwargs.setdefault("convert", converter(target))
    return FileCopier(
        source_metadata=source.metadata,
        source_io=source.io,
        target_metadata=target.metadata,
        target_io=target.io,
        **kwargs,
    )


def commit(target: Any, data_files: list[Any]) -> None:
    with target.transaction() as transaction, transaction.update_snapshot().fast_append() as append:
        for data_file in data_files:
            append.append_data_file(data_file)
    target.refresh()


def copy_all(source: Any, target: Any, row_filter: Any = ALL, **kwargs: Any) -> tuple[CopyOutcome, list[str]]:
    tasks = list(source.scan(row_filter=row_filter).plan_files())
    written: list[str] = []
    outcome = copier(source, target, row_filter=row_filter, **kwargs).copy(tasks, written)
    commit(target, outcome.data_files)
    return outcome, written


def multiset(table: Any, columns: list[str] = ORDERS.names, row_filter: Any = ALL) -> Counter:
    data = table.scan(row_filter=row_filter, selected_fields=tuple(columns)).to_arrow()
    return Counter(zip(*(data.column(name).to_pylist() for name in columns), strict=True))


def data_files_on_disk(table: Any) -> set[str]:
    root = table.location().removeprefix("file://") + "/data"
    return {os.path.join(folder, name) for folder, _, names in os.walk(root) for name in names}


def open_paths(root: str) -> list[str]:
    """Files under ``root`` this process holds open."""
    paths = []
    for fd in os.listdir("/proc/self/fd"):
        try:
            target = os.readlink(f"/proc/self/fd/{fd}")
        except OSError:
            continue
        if target.startswith(root):
            paths.append(target)
    return paths


def read_back(target: Any, path: str) -> Any:
    """What PyIceberg derives from the file's footer on storage.

    ``parquet_file_to_data_file`` itself where it can; it cannot infer a ``bucket`` partition value
    and does not know sanitized column names, so there the same statistics code runs on the file's
    footer read back from storage.
    """
    schema = target.schema()
    sanitized = sanitize_column_names(schema) != schema
    if not sanitized and all(f.transform.preserves_order for f in target.spec().fields):
        return parquet_file_to_data_file(target.io, target.metadata, path)
    with target.io.new_input(path).open() as stream:
        footer = pq.read_metadata(stream)
    file_schema = sanitize_column_names(schema)
    statistics = data_file_statistics_from_parquet_metadata(
        footer,
        compute_statistics_plan(file_schema, target.metadata.properties),
        parquet_path_to_id_mapping(file_schema),
    )
    return DataFile.from_args(
        file_path=path,
        file_format=FileFormat.PARQUET,
        file_size_in_bytes=len(target.io.new_input(path)),
        **statistics.to_serialized_dict(),
    )


def assert_stats_match_pyiceberg(target: Any, data_files: list[Any]) -> None:
    for data_file in data_files:
        expected = read_back(target, data_file.file_path)
        for name in (
            "record_count",
            "file_size_in_bytes",
            "column_sizes",
            "value_counts",
            "null_value_counts",
            "nan_value_counts",
            "lower_bounds",
            "upper_bounds",
            "split_offsets",
            "file_format",
        ):
            assert getattr(data_file, name) == getattr(expected, name), (name, data_file.file_path)
        assert data_file.spec_id == target.metadata.default_spec_id


def test_unpartitioned_copy_puts_values_in_the_target_columns_with_pyiceberg_stats(catalog) -> None:
    source = source_table(catalog, files=5, rows_per_file=400)
    target = target_table(catalog, "sales.copy")
    seen: list[tuple[int, int, str]] = []
    outcome, written = copy_all(
        source,
        target,
        parallelism=2,
        file_name_prefix="move-x-",
        on_progress=lambda rows, size: seen.append((rows, size, threading.current_thread().name)),
    )
    assert multiset(target) == multiset(source)
    source_bytes = sum(task.file.file_size_in_bytes for task in source.scan().plan_files())
    assert outcome.rows == 2000
    assert outcome.bytes_read == source_bytes
    assert outcome.bytes_written == sum(f.file_size_in_bytes for f in outcome.data_files)
    assert sorted(written) == sorted(f.file_path for f in outcome.data_files)
    assert {p.removeprefix("file://") for p in written} == data_files_on_disk(target)
    assert len(outcome.data_files) == 2  # one file per lane under the default target size
    for path in written:
        assert os.path.basename(path).startswith("move-x-")
        assert os.path.basename(path).rsplit("-", 2)[1] in {"0", "1"}  # {prefix}{uuid}-{lane}-{counter}
    assert_stats_match_pyiceberg(target, outcome.data_files)
    # Progress: every row once, the source bytes summing to the files' sizes, from both lanes.
    assert sum(rows for rows, _, _ in seen) == 2000
    assert sum(size for _, size, _ in seen) == source_bytes
    assert len({name for _, _, name in seen}) == 2


def test_written_files_carry_the_target_names_and_field_ids(catalog) -> None:
    source = source_table(catalog, files=2, rows_per_file=100)
    target = target_table(catalog, "sales.copy")
    outcome, _ = copy_all(source, target)
    for data_file in outcome.data_files:
        arrow_schema = pq.read_schema(data_file.file_path.removeprefix("file://"))
        assert arrow_schema.names == TARGET_ORDER
        for column in target.schema().columns:
            assert arrow_schema.field(column.name).metadata[b"PARQUET:field_id"] == str(column.field_id).encode()


def test_identity_partitioned_target_gets_one_partition_value_per_file(catalog) -> None:
    source = source_table(catalog, files=4, rows_per_file=300)
    target = target_table(catalog, "sales.by_day", partition=lambda u: u.add_identity("day"))
    outcome, _ = copy_all(source, target, parallelism=2)
    assert multiset(target) == multiset(source)
    # One file per day in each lane that took work (which lanes do depends on who takes the source files first).
    lanes = {os.path.basename(f.file_path).rsplit("-", 2)[1] for f in outcome.data_files}
    assert lanes <= {"0", "1"}
    assert len(outcome.data_files) == 4 * len(lanes)
    written = set()
    for data_file in outcome.data_files:
        days = set(pq.read_table(data_file.file_path.removeprefix("file://"), columns=["day"])["day"].to_pylist())
        assert len(days) == 1
        (day,) = days
        assert data_file.partition[0] == (day - EPOCH).days
        assert f"/day={day.isoformat()}/" in data_file.file_path
        written.add((os.path.basename(data_file.file_path).rsplit("-", 2)[1], day))
    assert len(written) == len(outcome.data_files)  # no lane wrote a day twice
    assert_stats_match_pyiceberg(target, outcome.data_files)


def test_day_and_bucket_partitioned_target(catalog) -> None:
    source = source_table(catalog, files=3, rows_per_file=1000)
    target = target_table(
        catalog,
        "sales.by_ts",
        partition=lambda u: u.add_field("ts", DayTransform(), "ts_day").add_field("id", BucketTransform(2), "id_b"),
    )
    outcome, _ = copy_all(source, target, parallelism=1)
    assert multiset(target) == multiset(source)
    partitions = {tuple(f.partition) for f in outcome.data_files}
    assert len(partitions) == len(outcome.data_files) == 6  # three days, two buckets; one lane
    # Each file holds only rows of its partition (the table's own filter on the partition value reads them back).
    for data_file in outcome.data_files:
        rows = pq.read_table(data_file.file_path.removeprefix("file://"), columns=["ts", "id"])
        days = {DayTransform().transform(target.schema().find_type("ts"))(v) for v in rows["ts"].to_pylist()}
        buckets = {BucketTransform(2).transform(LongType())(v) for v in rows["id"].to_pylist()}
        assert (days, buckets) == ({data_file.partition[0]}, {data_file.partition[1]})
    assert_stats_match_pyiceberg(target, outcome.data_files)


def test_partitioned_source_to_unpartitioned_target(catalog) -> None:
    source = target_table(catalog, "sales.parted", columns=ORDERS.names, partition=lambda u: u.add_identity("day"))
    for number in range(3):
        source.append(orders(number * 200, 200))
    target = target_table(catalog, "sales.flat")
    outcome, _ = copy_all(source, target, parallelism=2)
    assert multiset(target) == multiset(source)
    assert {tuple(f.partition) for f in outcome.data_files} == {()}
    assert_stats_match_pyiceberg(target, outcome.data_files)


def test_more_partitions_than_open_files_keeps_at_most_eight_open_per_lane(catalog) -> None:
    source = source_table(catalog, files=6, rows_per_file=1000)
    target = target_table(
        catalog,
        "sales.buckets",
        partition=lambda u: u.add_field("id", BucketTransform(20), "id_b"),
        **{"write.parquet.row-group-limit": "10"},  # every partition's rows are written (its file open) at once
    )
    root = target.location().removeprefix("file://")
    most_open = []
    plain = converter(target)

    def convert(batch: pa.RecordBatch) -> pa.RecordBatch:
        most_open.append(len(open_paths(root)))
        return plain(batch)

    outcome, _ = copy_all(source, target, parallelism=1, convert=convert)
    assert multiset(target) == multiset(source)
    assert max(most_open) == MAX_OPEN_FILES  # every batch holds all 20 buckets
    assert len({tuple(f.partition) for f in outcome.data_files}) == 20
    assert len(outcome.data_files) > 20  # partitions rolled to make room came back in new files


def _spec(schema: Schema, *fields: tuple[str, Any]) -> PartitionSpec:
    return PartitionSpec(
        *(
            PartitionField(schema.find_field(name).field_id, 1000 + position, transform, f"p{position}")
            for position, (name, transform) in enumerate(fields)
        )
    )


@pytest.mark.parametrize(
    "fields",
    [
        [("customer", IdentityTransform())],
        [("customer", IdentityTransform()), ("id", BucketTransform(3)), ("ts", DayTransform())],
        [("day", IdentityTransform())],
    ],
    ids=["identity-with-nulls", "three-fields", "one-value-per-batch"],
)
def test_split_by_partition_groups_rows_as_pyiceberg_does(fields) -> None:
    schema = Schema(*(NestedField(i + 1, f.name, _ICEBERG[f.name], required=False) for i, f in enumerate(ORDERS)))
    spec = _spec(schema, *fields)
    data = orders(0, 3000).cast(schema_to_pyarrow(schema, include_field_ids=False))
    if fields[0][0] == "day":
        data = data.filter(pc.equal(data["day"], data["day"][0]))
    batch = data.combine_chunks().to_batches()[0]
    pieces = split_by_partition(batch, spec, schema)
    expected = {
        part.partition_key.partition: part.arrow_table_partition.to_pylist()
        for part in _determine_partitions(spec, schema, data)
    }
    assert {key.partition: piece.to_pylist() for key, piece in pieces} == expected  # same keys, rows in order
    assert sum(piece.num_rows for _, piece in pieces) == batch.num_rows
    if fields[0][0] == "day":
        assert pieces[0][1] is batch


def test_split_by_partition_keeps_nan_and_null_rows_together() -> None:
    schema = Schema(NestedField(1, "x", DoubleType()), NestedField(2, "n", LongType()))
    batch = pa.RecordBatch.from_pydict(
        {"x": [1.5, float("nan"), None, 1.5, float("nan"), None, 2.0], "n": list(range(7))},
        schema=schema_to_pyarrow(schema, include_field_ids=False),
    )
    pieces = split_by_partition(batch, _spec(schema, ("x", IdentityTransform())), schema)
    rows = sorted(piece.column("n").to_pylist() for _, piece in pieces)
    assert rows == [[0, 3], [1, 4], [2, 5], [6]]
    assert split_by_partition(batch, PartitionSpec(), schema) == [(None, batch)]


def test_position_deletes_are_applied(catalog) -> None:
    source = source_table(catalog, files=3, rows_per_file=100)
    files = [task.file for task in source.scan().plan_files()]
    commit_delete_files(
        source, [position_delete_file(source, {files[0].file_path: [0, 5, 99], files[2].file_path: [7]})]
    )
    source.refresh()
    assert sum(1 for task in source.scan().plan_files() if task.delete_files) >= 2
    target = target_table(catalog, "sales.copy")
    outcome, _ = copy_all(source, target, parallelism=2)
    assert outcome.rows == 296
    assert outcome.bytes_read == sum(f.file_size_in_bytes for f in files)
    assert multiset(target) == multiset(source)
    assert sum(multiset(target).values()) == 296


@pytest.mark.parametrize("row_filter", [ALL, GreaterThanOrEqual("id", 120)], ids=["all", "filtered"])
def test_position_deletes_across_row_groups(catalog, row_filter) -> None:
    source = source_table(catalog, files=2, rows_per_file=500, properties={"write.parquet.row-group-limit": "100"})
    files = [task.file for task in source.scan().plan_files()]
    path = files[0].file_path
    assert pq.ParquetFile(path.removeprefix("file://")).num_row_groups == 5
    first_id = pq.read_table(path.removeprefix("file://"), columns=["id"])["id"][0].as_py()
    deleted = [0, 99, 100, 101, 250, 399, 499]  # row-group edges of a file read one row group at a time
    commit_delete_files(source, [position_delete_file(source, {path: deleted}, of=files[0])])
    source.refresh()
    target = target_table(catalog, "sales.copy")
    outcome, _ = copy_all(source, target, row_filter=row_filter, parallelism=1)
    expected = multiset(source, row_filter=row_filter)
    assert multiset(target) == expected
    assert not {first_id + position for position in deleted} & {row[0] for row in multiset(target)}
    assert outcome.rows == sum(expected.values())


def test_row_filter_applies_on_both_read_paths(catalog) -> None:
    source = target_table(catalog, "sales.parted", columns=ORDERS.names, partition=lambda u: u.add_identity("customer"))
    source.append(orders(0, 600))
    # Partition-only filter: every planned file matches whole (residual always true: the PyArrow-only path).
    by_partition = EqualTo("customer", "customer-5")
    tasks = list(source.scan(row_filter=by_partition).plan_files())
    assert tasks and all(task.residual == AlwaysTrue() for task in tasks)
    target = target_table(catalog, "sales.one")
    copy_all(source, target, row_filter=by_partition)
    assert multiset(target) == multiset(source, row_filter=by_partition)
    # A filter on a data column leaves a residual: rows are filtered while reading.
    by_value = GreaterThanOrEqual("id", 450)
    target = target_table(catalog, "sales.two")
    outcome, _ = copy_all(source, target, row_filter=by_value, parallelism=2)
    assert outcome.rows == 150
    assert multiset(target) == multiset(source, row_filter=by_value)


def test_column_subset_and_rename(catalog) -> None:
    source = source_table(catalog, files=2, rows_per_file=200)
    target = target_table(catalog, "sales.thin", columns=["customer"])
    with target.update_schema() as update:
        update.add_column("order_id", LongType())
        update.add_column("note", StringType())
    target = catalog.load_table("sales.thin")
    convert = converter(target, rename={"id": "order_id"})
    outcome, _ = copy_all(source, target, source_columns=["customer", "id"], convert=convert, parallelism=2)
    source_rows = multiset(source, ["customer", "id"])
    expected = Counter({(customer, order_id, None): n for (customer, order_id), n in source_rows.items()})
    assert multiset(target, ["customer", "order_id", "note"]) == expected
    assert_stats_match_pyiceberg(target, outcome.data_files)


def test_files_of_an_older_schema_read_through_the_projection(catalog) -> None:
    source = source_table(catalog, files=2, rows_per_file=100)
    with source.update_schema() as update:
        update.add_column("channel", StringType())
    source = catalog.load_table("sales.orders")
    newer = orders(1000, 100).append_column("channel", pa.array(["web"] * 100, pa.string()))
    source.append(newer)
    target = target_table(catalog, "sales.copy", columns=[*TARGET_ORDER])
    with target.update_schema() as update:
        update.add_column("channel", StringType())
    target = catalog.load_table("sales.copy")
    copy_all(source, target, parallelism=1)
    assert multiset(target, [*ORDERS.names, "channel"]) == multiset(source, [*ORDERS.names, "channel"])


def test_batches_with_different_arrow_types_share_one_file_schema(catalog) -> None:
    source = source_table(catalog, files=4, rows_per_file=100)
    target = target_table(catalog, "sales.copy")
    plain = converter(target)
    calls = []

    def convert(batch: pa.RecordBatch) -> pa.RecordBatch:
        calls.append(1)
        converted = plain(batch)
        if len(calls) % 2 == 0:  # as two source files written by different writers read back
            index = converted.schema.get_field_index("customer")
            field = converted.schema.field(index)
            converted = converted.set_column(
                index, field.with_type(pa.large_string()), converted.column(index).cast(pa.large_string())
            )
        return converted

    outcome, _ = copy_all(source, target, parallelism=1, convert=convert)
    assert len(calls) == 4 and len(outcome.data_files) == 1
    assert pq.read_schema(outcome.data_files[0].file_path.removeprefix("file://")).field("customer").type == pa.string()
    assert multiset(target) == multiset(source)


def test_files_roll_near_the_target_size_and_row_groups_respect_the_limit(catalog) -> None:
    source = source_table(catalog, files=4, rows_per_file=5000)
    target = target_table(catalog, "sales.copy", **{"write.parquet.row-group-limit": "1000"})
    outcome, _ = copy_all(source, target, parallelism=2, target_file_size_bytes=40_000)
    assert multiset(target) == multiset(source)
    sizes = [f.file_size_in_bytes for f in outcome.data_files]
    assert len(sizes) >= 4
    for data_file in outcome.data_files:
        metadata = pq.read_metadata(data_file.file_path.removeprefix("file://"))
        assert all(metadata.row_group(i).num_rows <= 1000 for i in range(metadata.num_row_groups))
        assert data_file.split_offsets and len(data_file.split_offsets) == metadata.num_row_groups
    # Every file but each lane's last reaches the target and overshoots it by at most a row group or so.
    full = sorted(sizes)[2:]
    assert all(40_000 <= size <= 80_000 for size in full), sizes
    assert_stats_match_pyiceberg(target, outcome.data_files)


def test_a_failure_mid_copy_closes_every_writer_and_lists_every_file(catalog) -> None:
    source = source_table(catalog, files=6, rows_per_file=2000)
    target = target_table(catalog, "sales.copy", **{"write.parquet.row-group-limit": "500"})
    root = target.location().removeprefix("file://")
    convert = failing_converter(target, on_call=5, error=RuntimeError("conversion failed"))
    written: list[str] = []
    tasks = list(source.scan().plan_files())
    with pytest.raises(RuntimeError, match="conversion failed"):
        copier(source, target, convert=convert, parallelism=2, target_file_size_bytes=20_000).copy(tasks, written)
    assert written  # files were created before the failure
    assert data_files_on_disk(target) == {path.removeprefix("file://") for path in written}
    assert open_paths(root) == []
    assert not any(thread.name.startswith("iceberg-ops-copy") for thread in threading.enumerate())


def test_a_failure_in_another_lane_stops_every_lane(catalog) -> None:
    source = source_table(catalog, files=8, rows_per_file=1000, properties={"write.parquet.row-group-limit": "100"})
    target = target_table(catalog, "sales.copy", **{"write.parquet.row-group-limit": "100"})
    plain = converter(target)
    converted: Counter[str] = Counter()
    failing = threading.Event()

    def convert(batch: pa.RecordBatch) -> pa.RecordBatch:
        name = threading.current_thread().name
        converted[name] += 1
        if name == "iceberg-ops-copy-1" and converted[name] == 2:
            failing.set()
            raise OSError("storage went away")
        if name == "iceberg-ops-copy-0" and converted[name] == 3:
            assert failing.wait(timeout=30)
        return plain(batch)

    written: list[str] = []
    with pytest.raises(OSError, match="storage went away"):
        copier(source, target, convert=convert, parallelism=2).copy(list(source.scan().plan_files()), written)
    assert converted["iceberg-ops-copy-0"] < 40  # lane 0 stopped long before reading half of the 80 row groups
    assert data_files_on_disk(target) == {path.removeprefix("file://") for path in written}
    assert open_paths(target.location().removeprefix("file://")) == []


def test_a_source_file_that_cannot_be_read_fails_the_copy(catalog) -> None:
    source = source_table(catalog, files=3, rows_per_file=100)
    target = target_table(catalog, "sales.copy")
    tasks = list(source.scan().plan_files())
    Path(tasks[1].file.file_path.removeprefix("file://")).write_bytes(b"not parquet")
    written: list[str] = []
    with pytest.raises(Exception, match=r"(?i)parquet|magic"):
        copier(source, target, parallelism=1).copy(tasks, written)
    assert open_paths(target.location().removeprefix("file://")) == []
    assert data_files_on_disk(target) <= {path.removeprefix("file://") for path in written}


def test_sanitized_source_column_names(catalog) -> None:
    schema = Schema(NestedField(1, "order id", LongType(), required=True), NestedField(2, "x-y", StringType()))
    catalog.create_namespace("odd")
    source = catalog.create_table("odd.source", schema)
    source.append(
        pa.table(
            {"order id": pa.array([1, 2, 3], pa.int64()), "x-y": ["a", None, "c"]}, schema=source.schema().as_arrow()
        )
    )
    target = catalog.create_table(
        "odd.target", Schema(NestedField(1, "x-y", StringType()), NestedField(2, "order id", LongType(), required=True))
    )
    outcome, _ = copy_all(source, target)
    assert multiset(target, ["order id", "x-y"]) == multiset(source, ["order id", "x-y"])
    (data_file,) = outcome.data_files
    assert pq.read_schema(data_file.file_path.removeprefix("file://")).names == ["x_x2Dy", "order_x20id"]
    assert_stats_match_pyiceberg(target, outcome.data_files)


def test_no_tasks_write_nothing(catalog) -> None:
    source = source_table(catalog, files=0)
    target = target_table(catalog, "sales.copy")
    written: list[str] = []
    outcome = copier(source, target).copy([], written)
    assert outcome == CopyOutcome([], 0, 0, 0) and written == []


def test_rows_all_filtered_out_write_no_file(catalog) -> None:
    source = source_table(catalog, files=2, rows_per_file=100)
    target = target_table(catalog, "sales.copy")
    outcome, written = copy_all(source, target, row_filter=GreaterThanOrEqual("id", 10**9))
    assert outcome.rows == 0 and outcome.data_files == [] and written == []


def test_files_are_cut_into_pieces_of_whole_row_groups_that_cover_each_file_once(catalog) -> None:
    source = source_table(catalog, files=3, rows_per_file=1000, properties={"write.parquet.row-group-limit": "100"})
    files = [task.file for task in source.scan().plan_files()]
    commit_delete_files(source, [position_delete_file(source, {files[2].file_path: [3]}, of=files[2])])
    source.refresh()
    tasks = list(source.scan().plan_files())
    size = tasks[0].file.file_size_in_bytes
    assert len(tasks[0].file.split_offsets) == 10
    pieces = split_into_pieces(tasks, piece_bytes=size // 4)
    by_file: dict[str, list[SourcePiece]] = {}
    for piece in pieces:
        by_file.setdefault(piece.task.file.file_path, []).append(piece)
    assert list(by_file) == [task.file.file_path for task in tasks]  # the tasks' order
    for task in tasks:
        cut = by_file[task.file.file_path]
        assert sum(piece.size for piece in cut) == task.file.file_size_in_bytes
        if task.delete_files:
            assert [piece.whole_file for piece in cut] == [True]
            continue
        assert 3 <= len(cut) <= 4
        assert cut[0].first_group == 0 and cut[-1].stop_group is None
        assert all(a.stop_group == b.first_group for a, b in itertools.pairwise(cut))
        assert all(piece.size >= size // 4 for piece in cut)
    # Small files, and files without row-group offsets, stay whole.
    assert all(piece.whole_file for piece in split_into_pieces(tasks, piece_bytes=size))
    file = tasks[0].file
    unknown_groups = SimpleNamespace(
        file=SimpleNamespace(file_format=file.file_format, file_size_in_bytes=size, split_offsets=None), delete_files=()
    )
    assert split_into_pieces([unknown_groups], piece_bytes=size // 4)[0].whole_file


@pytest.mark.parametrize("row_filter", [ALL, GreaterThanOrEqual("id", 250)], ids=["all", "filtered"])
def test_one_large_file_is_shared_by_every_lane(catalog, row_filter) -> None:
    source = source_table(catalog, files=1, rows_per_file=2000, properties={"write.parquet.row-group-limit": "100"})
    target = target_table(catalog, "sales.copy")
    (task,) = source.scan(row_filter=row_filter).plan_files()
    plain = converter(target)
    both_lanes = threading.Barrier(2, timeout=30)
    lanes_seen: set[str] = set()
    progress: list[tuple[int, int]] = []

    def convert(batch: pa.RecordBatch) -> pa.RecordBatch:
        name = threading.current_thread().name
        if name not in lanes_seen:
            lanes_seen.add(name)
            both_lanes.wait()  # breaks (and fails the copy) unless a second lane reads the same file
        return plain(batch)

    written: list[str] = []
    outcome = copier(
        source,
        target,
        convert=convert,
        row_filter=row_filter,
        parallelism=2,
        piece_bytes=task.file.file_size_in_bytes // 5,
        on_progress=lambda rows, size: progress.append((rows, size)),
    ).copy([task], written)
    commit(target, outcome.data_files)
    assert len(lanes_seen) == 2
    assert multiset(target) == multiset(source, row_filter=row_filter)
    assert outcome.bytes_read == sum(size for _, size in progress) == task.file.file_size_in_bytes
    assert outcome.rows == sum(rows for rows, _ in progress) == sum(multiset(target).values())


def test_parallelism_defaults_to_the_cpu_count(catalog) -> None:
    source = source_table(catalog, files=1, rows_per_file=10)
    target = target_table(catalog, "sales.copy")
    assert copier(source, target, parallelism=None).parallelism == (os.cpu_count() or 1)


def test_a_filter_on_a_missing_column_is_refused_before_anything_is_read(catalog) -> None:
    source = source_table(catalog, files=1, rows_per_file=10)
    target = target_table(catalog, "sales.copy")
    with pytest.raises(ValueError, match="missing"):
        copier(source, target, row_filter=EqualTo("missing", 1))


def test_column_names_match_case_insensitively_when_asked(catalog) -> None:
    source = source_table(catalog, files=1, rows_per_file=50)
    target = target_table(catalog, "sales.thin", columns=["id", "customer"])
    copy_all(source, target, source_columns=["ID", "Customer"], case_sensitive=False)
    assert multiset(target, ["id", "customer"]) == multiset(source, ["id", "customer"])
    with pytest.raises(ValueError):
        copier(source, target, source_columns=["ID"])


@pytest.mark.backends
def test_copy_between_tables_on_s3(moto_server, tmp_path: Path, unique_name: str) -> None:
    moto_server.create_bucket(unique_name)
    s3 = SqlCatalog(
        "s3",
        uri=f"sqlite:///{tmp_path / 'catalog.db'}",
        warehouse=f"s3://{unique_name}/warehouse",
        **moto_server.s3_properties(),
    )
    try:
        source = source_table(s3, files=3, rows_per_file=400, properties={"write.parquet.row-group-limit": "100"})
        files = [task.file for task in source.scan().plan_files()]
        commit_delete_files(source, [position_delete_file(source, {files[0].file_path: [3, 150]}, of=files[0])])
        source.refresh()
        target = target_table(s3, "sales.copy", partition=lambda u: u.add_identity("day"))
        outcome, written = copy_all(source, target, parallelism=2)
        assert multiset(target) == multiset(source)
        assert sum(multiset(target).values()) == 1198
        assert all(path.startswith(f"s3://{unique_name}/") for path in written)
        assert_stats_match_pyiceberg(target, outcome.data_files)
    finally:
        s3.close()
