"""The mover's verification: count, checksum and sample over real Arrow data and a real SQLite-backed catalog."""

from __future__ import annotations

import datetime as dt
import json
import random
import uuid
from collections.abc import Callable, Iterator, Sequence
from decimal import Decimal

import pyarrow as pa
import pyarrow.compute as pc
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from iceberg_ops_provider.data_migration.results import VerifyReport
from iceberg_ops_provider.data_migration.row_hash import NAN, NULL_HASH, canonical_values, value_hashes
from iceberg_ops_provider.data_migration.verify import MISSING_REPORTED, ContentChecksum, row_hashes, verify_rows

UTC = dt.UTC
METHODS = ("count", "checksum", "sample")


def rows_table() -> pa.Table:
    """Twelve rows of mixed types, with nulls and one duplicated row."""
    rows = [
        (1, "ann", Decimal("10.50"), 1.5, dt.datetime(2024, 1, 1, tzinfo=UTC), True),
        (2, "bob", Decimal("-3.25"), -0.5, dt.datetime(2024, 1, 2, 12, 30, tzinfo=UTC), False),
        (3, None, Decimal("0.00"), 0.0, dt.datetime(1969, 12, 31, 23, 59, 59, 999999, tzinfo=UTC), None),
        (4, "dan", None, None, None, True),
        (5, "eve", Decimal("99999999.99"), 1e300, dt.datetime(9999, 12, 31, tzinfo=UTC), False),
        (6, "", Decimal("0.01"), -1e-300, dt.datetime(1900, 1, 1, tzinfo=UTC), True),
        (7, "fay", Decimal("7.00"), 7.0, dt.datetime(2024, 7, 7, 7, 7, 7, 7, tzinfo=UTC), False),
        (7, "fay", Decimal("7.00"), 7.0, dt.datetime(2024, 7, 7, 7, 7, 7, 7, tzinfo=UTC), False),
        (None, "gus", Decimal("1.00"), 2.0, dt.datetime(2000, 2, 29, tzinfo=UTC), None),
        (10, "hal", Decimal("-0.01"), float("inf"), dt.datetime(2030, 1, 1, tzinfo=UTC), True),
        (11, "ivy ünïcode ✓", Decimal("12.34"), 3.25, dt.datetime(2024, 3, 3, tzinfo=UTC), False),
        (12, "jon", Decimal("5.55"), -7.75, dt.datetime(2024, 4, 4, tzinfo=UTC), True),
    ]
    schema = pa.schema(
        [
            ("id", pa.int64()),
            ("name", pa.string()),
            ("amount", pa.decimal128(12, 2)),
            ("score", pa.float64()),
            ("ts", pa.timestamp("us", tz="UTC")),
            ("flag", pa.bool_()),
        ]
    )
    return pa.Table.from_pylist([dict(zip(schema.names, row, strict=True)) for row in rows], schema=schema)


COLUMNS = rows_table().column_names


def stream(table: pa.Table, *, batch_rows: int | Sequence[int] = 5, shuffle_seed: int | None = None):
    """A re-callable stream of ``table``'s rows, optionally shuffled, cut at the given batch sizes."""
    if shuffle_seed is not None:
        order = list(range(table.num_rows))
        random.Random(shuffle_seed).shuffle(order)
        table = pa.concat_tables([table.slice(0, 0)] + [table.slice(i, 1) for i in order])  # no take() for views
    sizes = [batch_rows] if isinstance(batch_rows, int) else list(batch_rows)

    def batches() -> Iterator[pa.RecordBatch]:
        start, i = 0, 0
        while start < table.num_rows:
            size = sizes[min(i, len(sizes) - 1)]
            part = table.slice(start, size)
            yield from part.to_batches() if size else [pa.RecordBatch.from_pylist([], schema=table.schema)]
            start, i = start + size, i + 1

    return batches


def with_value(table: pa.Table, column: str, row: int, value: object) -> pa.Table:
    values = table.column(column).to_pylist()
    values[row] = value
    index = table.schema.get_field_index(column)
    return table.set_column(index, table.schema.field(index), pa.array(values, table.schema.field(index).type))


def verify(method: str, source: pa.Table, target: pa.Table, **kwargs) -> VerifyReport:
    kwargs.setdefault("columns", source.column_names)
    kwargs.setdefault("sample_size", 1000)
    kwargs.setdefault("seed", 7)
    return verify_rows(method, stream(source, batch_rows=4), stream(target, batch_rows=3, shuffle_seed=1), **kwargs)


# Equal multisets.


@pytest.mark.parametrize("method", METHODS)
@pytest.mark.parametrize(("batch_rows", "shuffle_seed"), [(5, None), (1, 3), ([0, 7, 0, 2, 100], 4), (100, 5)], ids=str)
def test_equal_rows_in_any_order_and_batching_are_ok(method: str, batch_rows, shuffle_seed: int) -> None:
    table = rows_table()
    report = verify_rows(
        method,
        stream(table, batch_rows=4),
        stream(table, batch_rows=batch_rows, shuffle_seed=shuffle_seed),
        columns=COLUMNS,
        sample_size=1000,
        seed=1,
    )
    assert report.ok, report
    assert (report.method, report.source_rows, report.target_rows) == (method, 12, 12)
    assert report.details["difference"] == 0
    json.dumps(report.to_json())


def test_small_sample_of_equal_rows_is_ok() -> None:
    table = rows_table()
    report = verify("sample", table, table, sample_size=3)
    assert report.ok
    assert (report.details["sampled"], report.details["matched"], report.details["missing"]) == (3, 3, [])


def test_checksum_is_the_same_for_a_table_a_batch_and_any_cut() -> None:
    table = rows_table()
    whole = ContentChecksum(COLUMNS)
    whole.update(table)
    pieces = ContentChecksum(COLUMNS)
    for batch in stream(table, batch_rows=[1, 0, 5, 2, 100], shuffle_seed=9)():
        pieces.update(batch)
    assert whole.rows == pieces.rows == 12
    assert whole.digest() == pieces.digest()
    assert whole.digest() == f"12-{whole.value:016x}"
    assert whole.value == sum(row_hashes(table, COLUMNS).to_pylist()) % 2**64


def test_row_hashes_do_not_depend_on_slicing() -> None:
    table = rows_table()
    struct = pa.StructArray.from_arrays([table.column("id").chunk(0), table.column("name").chunk(0)], ["i", "n"])
    batch = pa.RecordBatch.from_arrays([*table.combine_chunks().to_batches()[0].columns, struct], [*COLUMNS, "s"])
    full = row_hashes(batch, batch.schema.names).to_pylist()
    for offset in (1, 5, 11):
        assert row_hashes(batch.slice(offset), batch.schema.names).to_pylist() == full[offset:]
    assert len(set(full)) == 11  # one duplicated row


# Differences the checksum must see (counts equal where possible, so the count cannot be what tells).


def swap(table: pa.Table, column_a: str, row_a: int, column_b: str, row_b: int) -> pa.Table:
    value_a = table.column(column_a)[row_a].as_py()
    value_b = table.column(column_b)[row_b].as_py()
    return with_value(with_value(table, column_a, row_a, value_b), column_b, row_b, value_a)


def two_int_columns() -> pa.Table:
    return pa.table({"a": pa.array([1, 2, 3, 4], pa.int64()), "b": pa.array([10, 20, 30, 40], pa.int64())})


CHANGES: dict[str, Callable[[], tuple[pa.Table, pa.Table]]] = {
    "changed int": lambda: (rows_table(), with_value(rows_table(), "id", 0, 100)),
    "changed string, same length": lambda: (rows_table(), with_value(rows_table(), "name", 0, "anx")),
    "changed decimal": lambda: (rows_table(), with_value(rows_table(), "amount", 1, Decimal("-3.26"))),
    "changed float": lambda: (rows_table(), with_value(rows_table(), "score", 0, 1.5000000000000002)),
    "changed timestamp by 1 us": lambda: (
        rows_table(),
        with_value(rows_table(), "ts", 0, dt.datetime(2024, 1, 1, 0, 0, 0, 1, tzinfo=UTC)),
    ),
    "changed bool": lambda: (rows_table(), with_value(rows_table(), "flag", 0, False)),
    "value became null": lambda: (rows_table(), with_value(rows_table(), "name", 1, None)),
    "missing row": lambda: (rows_table(), rows_table().slice(1)),
    "duplicated row": lambda: (rows_table(), pa.concat_tables([rows_table(), rows_table().slice(0, 1)])),
    "one row duplicated, another missing": lambda: (
        rows_table(),
        pa.concat_tables([rows_table().slice(1), rows_table().slice(2, 1)]),
    ),
    "duplicate collapsed, another row doubled": lambda: (
        rows_table(),
        pa.concat_tables([rows_table().slice(0, 7), rows_table().slice(8), rows_table().slice(0, 1)]),
    ),
    "names swapped between rows": lambda: (rows_table(), swap(rows_table(), "name", 0, "name", 1)),
    "values swapped between columns": lambda: (two_int_columns(), swap(two_int_columns(), "a", 0, "b", 0)),
    "values swapped diagonally": lambda: (two_int_columns(), swap(two_int_columns(), "a", 0, "b", 1)),
    "columns swapped": lambda: (
        two_int_columns(),
        pa.table({"a": two_int_columns().column("b"), "b": two_int_columns().column("a")}),
    ),
}


@pytest.mark.parametrize("change", CHANGES)
def test_checksum_sees_every_kind_of_difference(change: str) -> None:
    source, target = CHANGES[change]()
    report = verify("checksum", source, target)
    assert not report.ok
    assert report.details["source_checksum"] != report.details["target_checksum"]
    assert report.details["columns"] == source.column_names


@pytest.mark.parametrize("change", CHANGES)
def test_full_sample_sees_every_kind_of_difference(change: str) -> None:
    source, target = CHANGES[change]()
    assert not verify("sample", source, target, sample_size=source.num_rows).ok


def test_count_sees_only_counts() -> None:
    source, target = CHANGES["names swapped between rows"]()
    assert verify("count", source, target).ok
    report = verify("count", *CHANGES["missing row"]())
    assert not report.ok
    assert (report.source_rows, report.target_rows, report.details) == (12, 11, {"difference": -1})


def test_sample_reports_the_changed_row_with_its_values() -> None:
    source = rows_table()
    target = with_value(source, "amount", 4, Decimal("99999999.98"))
    report = verify("sample", source, target, sample_size=len(source))
    assert not report.ok
    assert (report.details["sampled"], report.details["matched"], report.details["missing_count"]) == (12, 11, 1)
    (missing,) = report.details["missing"]
    assert missing["position"] == 4
    assert missing["values"] == {
        "id": 5,
        "name": "eve",
        "amount": "99999999.99",
        "score": 1e300,
        "ts": "9999-12-31 00:00:00.000000Z",
        "flag": False,
    }
    json.dumps(report.to_json(), allow_nan=False)


def test_sample_of_duplicates_needs_as_many_matches() -> None:
    source = pa.table({"k": pa.array([1, 1, 2], pa.int64())})
    target = pa.table({"k": pa.array([1, 2, 2], pa.int64())})
    report = verify("sample", source, target, sample_size=10)
    assert not report.ok
    assert report.details["missing"] == [{"position": 1, "values": {"k": 1}}]


def test_sample_cannot_see_extra_rows_but_the_counts_fail_it() -> None:
    source = rows_table()
    target = pa.concat_tables([source, source.slice(3, 1)])
    report = verify("sample", source, target, sample_size=100)
    assert report.details["missing"] == []
    assert not report.ok
    assert report.details["difference"] == 1


def test_sample_lists_at_most_a_bounded_number_of_missing_rows() -> None:
    source = pa.table({"k": pa.array(range(MISSING_REPORTED + 50), pa.int64())})
    target = pa.table({"k": pa.array(range(-1, -MISSING_REPORTED - 51, -1), pa.int64())})
    report = verify("sample", source, target, sample_size=10_000)
    assert report.details["missing_count"] == MISSING_REPORTED + 50
    assert len(report.details["missing"]) == MISSING_REPORTED
    assert [row["position"] for row in report.details["missing"]] == list(range(MISSING_REPORTED))


def test_shown_values_are_json_for_every_type() -> None:
    table = pa.table(
        {
            "b": pa.array([b"\x00\xff"], pa.binary()),
            "u": pa.array([uuid.UUID(int=1).bytes], pa.uuid()),
            "ns": pa.array([1_500], pa.timestamp("ns")),
            "f": pa.array([float("nan")], pa.float64()),
            "l": pa.array([[Decimal("1.5")]], pa.list_(pa.decimal128(5, 1))),
            "m": pa.array([[("k", dt.date(2024, 1, 2))]], pa.map_(pa.string(), pa.date32())),
            "s": pa.array([{"t": 1_500}], pa.struct([("t", pa.timestamp("ns"))])),
        }
    )
    report = verify_rows(
        "sample", stream(table), stream(table.slice(0, 0)), columns=table.column_names, sample_size=5, seed=1
    )
    (missing,) = report.details["missing"]
    values = missing["values"]
    assert values["b"] == str(b"\x00\xff")
    assert values["u"] == str(uuid.UUID(int=1))
    assert values["ns"] == "1970-01-01 00:00:00.000001500"
    assert values["f"] == "nan"
    assert values["l"] == ["1.5"]
    assert values["m"] == [["k", "2024-01-02"]]
    assert isinstance(values["s"], str)
    json.dumps(report.to_json(), allow_nan=False)


# Sampling.


def test_sample_is_seeded_and_blind_to_batch_boundaries() -> None:
    source = pa.table({"k": pa.array(range(1000), pa.int64())})
    target = source.slice(0, 990)  # the ten last rows are missing

    def missing(batch_rows, seed: int | None) -> tuple[int, list[int]]:
        report = verify_rows(
            "sample",
            stream(source, batch_rows=batch_rows),
            stream(target),
            columns=["k"],
            sample_size=200,
            seed=seed,
        )
        return report.details["seed"], [row["position"] for row in report.details["missing"]]

    seed, positions = missing(7, 11)
    assert seed == 11
    assert positions
    assert all(990 <= position < 1000 for position in positions)
    assert missing(1000, 11) == missing([1, 2, 300, 5], 11) == (11, positions)
    recorded, _ = missing(7, None)
    assert isinstance(recorded, int)
    assert missing(13, recorded) == missing(7, recorded)


def test_sample_picks_rows_uniformly() -> None:
    source = pa.table({"k": pa.array(range(1000), pa.int64())})
    empty = source.slice(0, 0)
    hits = [0] * 10
    for seed in range(200):
        report = verify_rows(
            "sample", stream(source, batch_rows=97), stream(empty), columns=["k"], sample_size=50, seed=seed
        )
        assert report.details["sampled"] == 50
        positions = [row["position"] for row in report.details["missing"]]
        assert len(set(positions)) == len(positions)
        for position in positions:
            hits[position // 100] += 1
    # 10,000 picks over ten deciles: 1,000 each, standard deviation 30.
    assert all(850 < count < 1150 for count in hits), hits


# Types: equal values typed differently are equal, different values are not.


def typed(values: list, kind: pa.DataType) -> pa.Table:
    return pa.table({"v": pa.array(values, kind), "k": pa.array(range(len(values)), pa.int64())})


EQUAL_TYPES = {
    "int32 vs int64": ([1, -2, None, 2**31 - 1, -(2**31)], pa.int32(), pa.int64()),
    "int8 vs int64": ([1, -128, None, 127], pa.int8(), pa.int64()),
    "uint32 vs int64": ([0, 2**32 - 1, None], pa.uint32(), pa.int64()),
    "float32 vs float64": ([1.5, -0.125, None, 2.0**100, float("inf"), 2.0**-149], pa.float32(), pa.float64()),
    "decimal(10,2) vs decimal(12,2)": (
        [Decimal("12345678.90"), Decimal("-0.01"), None],
        pa.decimal128(10, 2),
        pa.decimal128(12, 2),
    ),
    "decimal(12,2) vs decimal(38,2)": (
        [Decimal("1234567890.12"), Decimal("-1"), None, Decimal(0)],
        pa.decimal128(12, 2),
        pa.decimal128(38, 2),
    ),
    "decimal(38,2) vs decimal256(50,2)": (
        [Decimal("123456789012345678901234567890.12"), Decimal("-98765432109876543210987.65"), None],
        pa.decimal128(38, 2),
        pa.decimal256(50, 2),
    ),
    "string vs large_string": (["a", "", None, "ünï", "x" * 1000], pa.string(), pa.large_string()),
    "string vs string_view": (["a", "", None, "ünï"], pa.string(), pa.string_view()),
    "binary vs large_binary": ([b"a", b"", None, b"\x00\x01"], pa.binary(), pa.large_binary()),
    "timestamp us vs ns": (
        [dt.datetime(2024, 1, 1, 1, 2, 3, 456789), dt.datetime(1969, 1, 1, 0, 0, 0, 1), None],
        pa.timestamp("us"),
        pa.timestamp("ns"),
    ),
    "timestamptz us vs ns": (
        [dt.datetime(2024, 1, 1, 1, 2, 3, 456789, tzinfo=UTC), None],
        pa.timestamp("us", tz="UTC"),
        pa.timestamp("ns", tz="+00:00"),
    ),
    "timestamp s vs us": ([dt.datetime(2024, 1, 1, 1, 2, 3), None], pa.timestamp("s"), pa.timestamp("us")),
    "date32 vs date64": ([dt.date(2024, 2, 29), dt.date(1900, 1, 1), None], pa.date32(), pa.date64()),
    "time32 vs time64": ([dt.time(1, 2, 3), None], pa.time32("s"), pa.time64("us")),
    "time64 us vs ns": ([dt.time(1, 2, 3, 4), None], pa.time64("us"), pa.time64("ns")),
    "list<int32> vs large_list<int64>": (
        [[1, None, 3], [], None],
        pa.list_(pa.int32()),
        pa.large_list(pa.int64()),
    ),
    "struct<int32,string> vs struct<int64,large_string>": (
        [{"a": 1, "b": "x"}, {"a": None, "b": None}, None],
        pa.struct([("a", pa.int32()), ("b", pa.string())]),
        pa.struct([("a", pa.int64()), ("b", pa.large_string())]),
    ),
    "map<string,float32> vs map<large_string,float64>": (
        [[("a", 1.5), ("b", None)], [], None],
        pa.map_(pa.string(), pa.float32()),
        pa.map_(pa.large_string(), pa.float64()),
    ),
}


@pytest.mark.parametrize("case", EQUAL_TYPES)
def test_promoted_or_differently_typed_equal_values_are_equal(case: str) -> None:
    values, source_type, target_type = EQUAL_TYPES[case]
    source, target = typed(values, source_type), typed(values, target_type)
    assert value_hashes(source.column("v")).to_pylist() == value_hashes(target.column("v")).to_pylist()
    assert canonical_values(source.column("v")) == canonical_values(target.column("v"))
    for method in ("checksum", "sample"):
        assert verify(method, source, target).ok, method


@pytest.mark.parametrize("case", EQUAL_TYPES)
@pytest.mark.parametrize("side", [1, 2])
def test_sliced_arrays_hash_and_compare_like_their_rows(case: str, side: int) -> None:
    values, *types = EQUAL_TYPES[case]
    array = pa.array(values + values[::-1], types[side - 1])
    hashes, canonical = value_hashes(array).to_pylist(), canonical_values(array)
    for offset, length in ((1, None), (2, 2), (len(values), None)):
        part = array.slice(offset, length)
        end = None if length is None else offset + length
        assert value_hashes(part).to_pylist() == hashes[offset:end]
        assert canonical_values(part) == canonical[offset:end]


def test_dictionary_encoded_and_extension_values_hash_as_their_values() -> None:
    plain = pa.array(["x", "y", None, "x"])
    encoded = plain.dictionary_encode()
    assert value_hashes(encoded).to_pylist() == value_hashes(plain).to_pylist()
    ids = [uuid.UUID(int=i).bytes for i in range(3)]
    assert value_hashes(pa.array(ids, pa.uuid())).to_pylist() == value_hashes(pa.array(ids, pa.binary(16))).to_pylist()


def test_sub_microsecond_nanoseconds_differ_from_the_truncated_microseconds() -> None:
    micros = typed([dt.datetime(2024, 1, 1, 0, 0, 0, 1)], pa.timestamp("us"))
    nanos = pa.table({"v": pa.array([1_704_067_200_000_001_500], pa.timestamp("ns")), "k": pa.array([0], pa.int64())})
    assert canonical_values(nanos.column("v")) == [("ns", 1_704_067_200_000_001_500)]
    for method in ("checksum", "sample"):
        assert not verify(method, micros, nanos).ok, method


@pytest.mark.parametrize(
    ("first", "second", "kind"),
    [
        (-0.0, 0.0, pa.float64()),
        (-0.0, 0.0, pa.float32()),
        (float("nan"), -float("nan"), pa.float64()),
        (float("nan"), float("nan"), pa.float32()),
    ],
    ids=["-0.0 double", "-0.0 float", "NaN sign", "NaN float"],
)
def test_zero_signs_and_nan_payloads_compare_by_value(first: float, second: float, kind: pa.DataType) -> None:
    assert verify("checksum", typed([first], kind), typed([second], pa.float64())).ok
    assert verify("sample", typed([first], kind), typed([second], pa.float64())).ok


def test_nan_payload_bits_are_ignored() -> None:
    payloads = pa.array([0x7FF8000000000000, 0x7FF0000000000001, 0xFFF8000000000123 - 2**64], pa.int64())
    nans = payloads.view(pa.float64())
    assert len(set(value_hashes(nans).to_pylist())) == 1
    assert canonical_values(nans) == [NAN, NAN, NAN]


@pytest.mark.parametrize(
    ("value", "kind"),
    [(0, pa.int64()), (0.0, pa.float64()), (float("nan"), pa.float64()), ("", pa.string()), (b"", pa.binary())],
)
def test_null_differs_from_every_zero_like_value(value: object, kind: pa.DataType) -> None:
    hashes = value_hashes(pa.array([value, None], kind)).to_pylist()
    assert hashes[1] == NULL_HASH != hashes[0]
    assert not verify("checksum", typed([value], kind), typed([None], kind)).ok


def test_nulls_in_different_columns_differ() -> None:
    source = pa.table({"a": pa.array([None, 2], pa.int64()), "b": pa.array([1, 2], pa.int64())})
    target = pa.table({"a": pa.array([1, 2], pa.int64()), "b": pa.array([None, 2], pa.int64())})
    assert verify("count", source, target).ok
    assert not verify("checksum", source, target).ok
    assert not verify("sample", source, target).ok
    both_null = pa.table({"a": pa.array([None], pa.int64()), "b": pa.array([None], pa.int64())})
    null_a, null_b = row_hashes(source.slice(0, 1), ["a", "b"])[0], row_hashes(target.slice(0, 1), ["a", "b"])[0]
    assert len({null_a.as_py(), null_b.as_py(), row_hashes(both_null, ["a", "b"])[0].as_py()}) == 3


def test_nulls_and_zero_hashed_values_trading_columns_differ() -> None:
    # 0, 0.0, "" and False hash to 0; a chain h * K + v would let them trade places with a null (2**63).
    source = pa.table({"s": pa.array([None], pa.string()), "f": pa.array([0.0]), "b": pa.array([None], pa.bool_())})
    target = pa.table({"s": pa.array([""]), "f": pa.array([None], pa.float64()), "b": pa.array([False])})
    for columns in (["s", "f"], ["f", "b"], ["s", "f", "b"]):
        assert not verify("checksum", source.select(columns), target.select(columns)).ok, columns
        assert not verify("sample", source.select(columns), target.select(columns)).ok, columns


def test_a_null_struct_differs_from_a_struct_of_nulls() -> None:
    kind = pa.struct([("a", pa.int64())])
    assert not verify("checksum", typed([None], kind), typed([{"a": None}], kind)).ok
    assert not verify("sample", typed([None], kind), typed([{"a": None}], kind)).ok


@pytest.mark.parametrize(
    ("source_values", "target_values", "kind"),
    [
        ([[1, 2]], [[2, 1]], pa.list_(pa.int64())),
        ([[1, 2]], [[1, 2, None]], pa.list_(pa.int64())),
        ([[]], [None], pa.list_(pa.int64())),
        ([{"a": 1, "b": 2}], [{"a": 2, "b": 1}], pa.struct([("a", pa.int64()), ("b", pa.int64())])),
        ([[("a", 1)]], [[("a", 2)]], pa.map_(pa.string(), pa.int64())),
    ],
    ids=["list order", "list length", "empty list vs null", "struct fields swapped", "map value"],
)
def test_nested_differences_are_seen(source_values: list, target_values: list, kind: pa.DataType) -> None:
    for method in ("checksum", "sample"):
        assert not verify(method, typed(source_values, kind), typed(target_values, kind)).ok, method


def test_map_entries_compare_in_any_order() -> None:
    kind = pa.map_(pa.string(), pa.int64())
    assert verify("checksum", typed([[("a", 1), ("b", 2)]], kind), typed([[("b", 2), ("a", 1)]], kind)).ok


# Empty streams and bad input.


@pytest.mark.parametrize("method", METHODS)
def test_empty_streams(method: str) -> None:
    empty = rows_table().slice(0, 0)
    report = verify(method, empty, empty)
    assert report.ok
    assert (report.source_rows, report.target_rows) == (0, 0)
    only_empty_batches = verify_rows(
        method, lambda: iter(empty.to_batches() * 2), lambda: iter([]), columns=COLUMNS, seed=1
    )
    assert only_empty_batches.ok
    assert not verify(method, empty, rows_table()).ok
    assert not verify(method, rows_table(), empty).ok


def test_empty_checksums_are_equal_and_zero() -> None:
    checksum = ContentChecksum(["a"])
    checksum.update(pa.table({"a": pa.array([], pa.int64())}))
    assert (checksum.rows, checksum.digest()) == (0, "0-0000000000000000")


@pytest.mark.parametrize("method", METHODS)
def test_a_missing_column_is_named_with_its_side(method: str) -> None:
    table = rows_table()
    with pytest.raises(ValueError, match=r"Column 'nope' is missing from the source rows .*id, name"):
        verify(method, table, table, columns=["id", "nope"])
    with pytest.raises(ValueError, match=r"Column 'score' is missing from the target rows"):
        verify(method, table, table.drop_columns(["score"]))


def test_row_hashes_bad_input() -> None:
    with pytest.raises(ValueError, match="Column 'x' is missing"):
        row_hashes(rows_table(), ["x"])
    duplicated = pa.table([pa.array([1]), pa.array([2])], names=["a", "a"])
    with pytest.raises(ValueError, match="Column 'a' appears more than once"):
        row_hashes(duplicated, ["a"])


# Real tables: what PyIceberg reads back from Parquet files, after a type promotion.


def test_checksum_and_sample_between_real_iceberg_tables(catalog) -> None:
    from pyiceberg.schema import Schema
    from pyiceberg.types import DecimalType, DoubleType, FloatType, IntegerType, LongType, NestedField, StringType

    catalog.create_namespace("v")
    source_schema = Schema(
        NestedField(1, "id", IntegerType(), required=False),
        NestedField(2, "name", StringType(), required=False),
        NestedField(3, "amount", DecimalType(10, 2), required=False),
        NestedField(4, "score", FloatType(), required=False),
    )
    target_schema = Schema(
        NestedField(1, "amount", DecimalType(12, 2), required=False),
        NestedField(2, "score", DoubleType(), required=False),
        NestedField(3, "name", StringType(), required=False),
        NestedField(4, "id", LongType(), required=False),
    )
    source_table = catalog.create_table("v.source", source_schema)
    target_table = catalog.create_table("v.target", target_schema)
    rows = pa.table(
        {
            "id": pa.array([i if i % 7 else None for i in range(300)], pa.int32()),
            "name": pa.array([f"n{i % 50}" if i % 5 else None for i in range(300)], pa.string()),
            "amount": pa.array([Decimal(i) / 4 for i in range(300)], pa.decimal128(10, 2)),
            "score": pa.array([i / 8 - 10 for i in range(300)], pa.float32()),
        }
    )
    for part in (rows.slice(0, 120), rows.slice(120)):
        source_table.append(part)
    order = pa.array(random.Random(2).sample(range(300), 300), pa.int64())
    shuffled = rows.take(order)
    target_arrow = pa.table(
        {field.name: shuffled.column(field.name).cast(field.type) for field in target_table.schema().as_arrow()}
    )
    for part in (target_arrow.slice(0, 50), target_arrow.slice(50, 200), target_arrow.slice(250)):
        target_table.append(part)

    def scan(table, columns):
        return lambda: table.scan(selected_fields=tuple(columns)).to_arrow_batch_reader()

    columns = ["id", "name", "amount", "score"]
    source_arrow = source_table.scan().to_arrow()
    assert source_arrow.schema.field("id").type == pa.int32()  # the types really differ
    assert target_table.scan().to_arrow().schema.field("id").type == pa.int64()
    for method in METHODS:
        report = verify_rows(method, scan(source_table, columns), scan(target_table, columns), columns=columns, seed=3)
        assert report.ok, report
        assert (report.source_rows, report.target_rows) == (300, 300)

    target_table.delete("id = 43")
    target_table.append(
        pa.table(
            {
                "amount": pa.array([Decimal("10.70")], pa.decimal128(12, 2)),  # was 10.75
                "score": pa.array([43 / 8 - 10], pa.float64()),
                "name": pa.array(["n43"], pa.string()),
                "id": pa.array([43], pa.int64()),
            }
        )
    )
    report = verify_rows("checksum", scan(source_table, columns), scan(target_table, columns), columns=columns, seed=3)
    assert not report.ok
    assert report.details["difference"] == 0
    report = verify_rows(
        "sample", scan(source_table, columns), scan(target_table, columns), columns=columns, sample_size=300, seed=3
    )
    assert [row["values"] for row in report.details["missing"]] == [
        {"id": 43, "name": "n43", "amount": "10.75", "score": 43 / 8 - 10}
    ]


# Properties.


ROWS = st.lists(
    st.tuples(
        st.one_of(st.none(), st.integers(-(2**63), 2**63 - 1)),
        st.one_of(st.none(), st.text(max_size=8)),
        st.one_of(st.none(), st.floats(allow_nan=True, allow_infinity=True)),
        st.one_of(st.none(), st.lists(st.integers(-5, 5), max_size=3)),
    ),
    max_size=40,
)


def as_table(rows: list[tuple]) -> pa.Table:
    columns = list(zip(*rows, strict=True)) if rows else [[], [], [], []]
    return pa.table(
        {
            "i": pa.array(columns[0], pa.int64()),
            "s": pa.array(columns[1], pa.string()),
            "f": pa.array(columns[2], pa.float64()),
            "l": pa.array(columns[3], pa.list_(pa.int64())),
        }
    )


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(rows=ROWS, seed=st.integers(0, 2**32), cut=st.integers(1, 50), data=st.data())
def test_checksum_is_invariant_under_permutation_and_batching(rows: list[tuple], seed: int, cut: int, data) -> None:
    permuted = data.draw(st.permutations(rows))
    source, target = as_table(rows), as_table(permuted)
    first, second = ContentChecksum(source.column_names), ContentChecksum(source.column_names)
    for batch in stream(source, batch_rows=cut)():
        first.update(batch)
    for batch in stream(target, batch_rows=max(1, 51 - cut))():
        second.update(batch)
    assert first.digest() == second.digest()
    report = verify_rows(
        "sample", stream(source), stream(target, batch_rows=cut), columns=source.column_names, seed=seed
    )
    assert report.ok, report.details


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(rows=ROWS.filter(bool), data=st.data())
def test_checksum_changes_when_one_row_is_replaced_by_a_different_one(rows: list[tuple], data) -> None:
    index = data.draw(st.integers(0, len(rows) - 1))
    replacement = data.draw(ROWS.filter(bool))[0]
    canonical = as_table([rows[index], replacement])
    if len(set(row_hashes(canonical, canonical.column_names).to_pylist())) == 1:
        # Only equal values (-0.0 vs 0.0, NaN vs NaN) may hash alike; check they really are equal.
        assert all(len(set(canonical_values(canonical.column(name)))) == 1 for name in canonical.column_names), (
            canonical.to_pylist()
        )
        return
    changed = [*rows[:index], replacement, *rows[index + 1 :]]
    assert not verify("checksum", as_table(rows), as_table(changed)).ok
    assert not verify("sample", as_table(rows), as_table(changed), sample_size=len(rows)).ok


def test_sampling_a_large_stream_keeps_the_sample_size() -> None:
    source = pa.table({"k": pc.cast(pa.array(range(200_000)), pa.int64())})
    report = verify_rows(
        "sample", stream(source, batch_rows=65_536), stream(source, batch_rows=10_000), columns=["k"], seed=5
    )
    assert report.ok
    assert (report.details["sampled"], report.details["matched"]) == (100, 100)
