"""Source files copied byte for byte when nothing about their rows changes, and re-encoded whenever something does."""

from __future__ import annotations

import hashlib
import io
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from pyiceberg.partitioning import PartitionField, PartitionSpec
from pyiceberg.schema import Schema
from pyiceberg.transforms import DayTransform, IdentityTransform
from pyiceberg.types import DateType, LongType, NestedField, StringType

from iceberg_ops_provider.data_migration import DataMover
from iceberg_ops_provider.data_migration.verbatim import copy_stream, partition_as_is, schema_blocker
from iceberg_ops_provider.errors import InvalidMoveError
from tests.data_migration.support import ORDERS_SCHEMA, orders, row_multiset, source_table

BY_DAY = PartitionSpec(PartitionField(source_id=5, field_id=1000, transform=IdentityTransform(), name="day"))


def digests(table) -> dict[str, str]:
    """sha256 of every data file of the table's current snapshot, by path."""
    table.refresh()
    return {
        task.file.file_path: hashlib.sha256(Path(task.file.file_path.removeprefix("file://")).read_bytes()).hexdigest()
        for task in table.scan().plan_files()
    }


def copied_as_is(source, target) -> int:
    """How many of the target's files are byte-identical to a source file."""
    return len(set(digests(source).values()) & set(digests(target).values()))


def test_identical_schemas_copy_every_file_byte_for_byte(catalog):
    source = source_table(catalog, files=4)
    result = DataMover(catalog, "sales.orders", "archive.orders", create_target=True).run()

    target = catalog.load_table("archive.orders")
    assert copied_as_is(source, target) == 4 == len(digests(target))
    assert all(path.startswith(target.location()) for path in digests(target))
    assert row_multiset(target) == row_multiset(source)
    assert result.rows == 2000 and result.files_written == 4
    assert (
        result.bytes_written == result.bytes_read == sum(t.file.file_size_in_bytes for t in source.scan().plan_files())
    )
    # Statistics were read again from the copies: filters prune on the target as on the source.
    files = list(target.scan(row_filter="id >= 1500").plan_files())
    assert len(files) == 1 and target.scan(row_filter="id >= 1500").to_arrow().num_rows == 500


def test_rewrite_re_encodes_every_file(catalog):
    # Compressed otherwise than the target writes: a file re-encoded alone cannot match its source byte for byte.
    source = source_table(catalog, files=4, properties={"write.parquet.compression-codec": "gzip"})
    DataMover(catalog, "sales.orders", "archive.orders", create_target=True, rewrite=True).run()

    target = catalog.load_table("archive.orders")
    assert copied_as_is(source, target) == 0
    assert len(digests(target)) < 4  # the small files were packed together
    assert row_multiset(target) == row_multiset(source)


def test_a_partitioned_table_keeps_its_partitions(catalog):
    source = source_table(catalog, files=3, partition_spec=BY_DAY)
    DataMover(catalog, "sales.orders", "archive.orders", create_target=True).run()

    target = catalog.load_table("archive.orders")
    assert copied_as_is(source, target) == len(digests(source)) == 12  # 3 appends x 4 days
    assert all("/day=2026-11-0" in path for path in digests(target))
    assert row_multiset(target) == row_multiset(source)
    one_day = target.scan(row_filter="day = '2026-11-02'")
    assert len(list(one_day.plan_files())) == 3 and one_day.to_arrow().num_rows == 375


def test_a_target_partitioned_otherwise_gets_rows_routed(catalog):
    source = source_table(catalog, files=2)
    catalog.create_namespace("archive")
    catalog.create_table("archive.orders", schema=ORDERS_SCHEMA, partition_spec=BY_DAY)
    DataMover(catalog, "sales.orders", "archive.orders").run()

    target = catalog.load_table("archive.orders")
    assert copied_as_is(source, target) == 0
    days_2026_11_01_to_04 = {20758, 20759, 20760, 20761}
    assert {task.file.partition[0] for task in target.scan().plan_files()} == days_2026_11_01_to_04
    assert row_multiset(target) == row_multiset(source)


def test_a_filter_copies_only_files_it_keeps_whole(catalog):
    source = source_table(catalog, files=3, partition_spec=BY_DAY)
    # Whole partitions: every file matches in full (no residual) and is copied.
    DataMover(catalog, "sales.orders", "archive.days", where="day >= '2026-11-03'", create_target=True).run()
    days = catalog.load_table("archive.days")
    assert copied_as_is(source, days) == 6
    # A filter on a data column leaves a residual: those files are re-encoded, with the matching rows only.
    DataMover(catalog, "sales.orders", "archive.big", where="id < 100", create_target=True).run()
    big = catalog.load_table("archive.big")
    assert copied_as_is(source, big) == 0
    assert sorted(big.scan().to_arrow()["id"].to_pylist()) == list(range(100))


def test_files_of_an_older_schema_are_re_encoded_and_the_rest_copied(catalog):
    source = source_table(catalog, files=2)
    with source.update_schema() as update:
        update.add_column("channel", StringType())
    later = orders(1000, 300).append_column("channel", pa.array(["web"] * 300))
    source.append(later)
    DataMover(catalog, "sales.orders", "archive.orders", create_target=True).run()

    target = catalog.load_table("archive.orders")
    assert copied_as_is(source, target) == 1  # only the file written with the current schema
    assert row_multiset(target) == row_multiset(source)
    channels = target.scan(selected_fields=("channel",)).to_arrow()["channel"].to_pylist()
    assert channels.count("web") == 300 and channels.count(None) == 1000


def test_files_without_field_ids_are_re_encoded(catalog, tmp_path):
    catalog.create_namespace("sales")
    source = catalog.create_table("sales.orders", schema=ORDERS_SCHEMA)
    plain = tmp_path / "plain.parquet"
    pq.write_table(orders(0, 400), plain)  # no field ids: the table's name mapping reads it
    source.add_files([str(plain)])
    DataMover(catalog, "sales.orders", "archive.orders", create_target=True).run()

    target = catalog.load_table("archive.orders")
    assert copied_as_is(source, target) == 0
    assert row_multiset(target) == row_multiset(source)


def test_a_target_numbering_columns_differently_gets_rows_by_name(catalog):
    source = source_table(catalog, files=2)
    catalog.create_namespace("archive")
    reordered = Schema(
        NestedField(1, "day", DateType()),
        NestedField(2, "id", LongType(), required=True),
        *[
            NestedField(field_id, f.name, f.field_type, required=f.required)
            for field_id, f in zip(
                (3, 4, 5), [ORDERS_SCHEMA.find_field(n) for n in ("customer", "amount", "ts")], strict=True
            )
        ],
    )
    catalog.create_table("archive.orders", schema=reordered)
    DataMover(catalog, "sales.orders", "archive.orders").run()

    target = catalog.load_table("archive.orders")
    assert copied_as_is(source, target) == 0
    assert row_multiset(target, ["id", "day", "customer"]) == row_multiset(source, ["id", "day", "customer"])


@pytest.mark.parametrize(
    ("target", "rename", "all_columns", "blocker"),
    [
        (ORDERS_SCHEMA, {}, True, None),
        (ORDERS_SCHEMA, {"customer": "buyer"}, True, "renames columns"),
        (ORDERS_SCHEMA, {"customer": "customer"}, True, None),
        (ORDERS_SCHEMA, {}, False, "selects columns"),
        (Schema(*ORDERS_SCHEMA.fields[:4]), {}, True, "no field with id 5"),
        (
            Schema(*ORDERS_SCHEMA.fields[:4], NestedField(5, "day", StringType())),
            {},
            True,
            "is date in the source and string in the target",
        ),
        (
            Schema(*ORDERS_SCHEMA.fields[:4], NestedField(5, "date", DateType())),
            {},
            True,
            "is 'day' in the source and 'date' in the target",
        ),
        (
            Schema(*ORDERS_SCHEMA.fields[:4], NestedField(5, "day", DateType(), required=True)),
            {},
            True,
            "optional in the source and required",
        ),
        (Schema(*ORDERS_SCHEMA.fields, NestedField(6, "note", StringType())), {}, True, None),
        (
            Schema(*ORDERS_SCHEMA.fields, NestedField(6, "note", StringType(), required=True)),
            {},
            True,
            "requires column 'note'",
        ),
    ],
)
def test_schema_blocker_names_what_prevents_a_byte_copy(target, rename, all_columns, blocker):
    found = schema_blocker(ORDERS_SCHEMA, target, rename=rename, all_columns=all_columns)
    if blocker is None:
        assert found is None
    else:
        assert found is not None and blocker in found


def test_partition_as_is_needs_the_same_layout():
    from pyiceberg.typedef import Record

    value = Record(20758)
    assert partition_as_is(value, BY_DAY, PartitionSpec()) == Record()
    assert partition_as_is(value, BY_DAY, BY_DAY) == value
    by_ts_day = PartitionSpec(PartitionField(source_id=4, field_id=1000, transform=DayTransform(), name="ts_day"))
    assert partition_as_is(value, BY_DAY, by_ts_day) is None
    assert partition_as_is(value, None, BY_DAY) is None


def test_copy_stream_copies_in_chunks_and_stops_when_asked(tmp_path):
    from pyiceberg.io.pyarrow import PyArrowFileIO

    data = bytes(range(256)) * 1000
    seen: list[int] = []
    size = copy_stream(
        io.BytesIO(data), PyArrowFileIO().new_output(str(tmp_path / "a.bin")), on_bytes=seen.append, chunk_bytes=10_000
    )
    assert size == len(data) and (tmp_path / "a.bin").read_bytes() == data and sum(seen) == len(data)
    assert len(seen) == 26

    calls = iter([False, False, True])
    with pytest.raises(InterruptedError, match="stopped after 20000 bytes"):
        copy_stream(
            io.BytesIO(data),
            PyArrowFileIO().new_output(str(tmp_path / "b.bin")),
            stop=lambda: next(calls),
            chunk_bytes=10_000,
        )
    with pytest.raises(FileExistsError):  # names are never reused
        copy_stream(io.BytesIO(data), PyArrowFileIO().new_output(str(tmp_path / "a.bin")))


def test_rewrite_must_be_a_bool(catalog):
    source_table(catalog, files=1)
    with pytest.raises(InvalidMoveError, match="rewrite='yes' must be True or False"):
        DataMover(catalog, "sales.orders", "archive.orders", rewrite="yes")  # type: ignore[arg-type]
