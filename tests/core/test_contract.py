"""Schema contracts between Arrow data and a real table."""

from __future__ import annotations

import decimal

import pyarrow as pa
import pytest

from iceberg_ops_provider.core.contract import check_contract, conform_to_table, enforce_contract
from iceberg_ops_provider.errors import SchemaContractError


@pytest.fixture
def orders(catalog, namespace, orders_schema):
    return catalog.create_table(f"{namespace}.orders", orders_schema)


def test_matching_data_passes_and_conforms_for_append(orders):
    data = pa.table(
        {
            "id": pa.array([1, 2], pa.int32()),  # int data into a long column is a safe widening
            "amount": pa.array([decimal.Decimal("1.50"), None], pa.decimal128(10, 2)),
            "customer": ["a", "b"],
        }
    )
    report = check_contract(data, orders)
    assert report.ok and bool(report)
    conformed = conform_to_table(data, orders)
    assert conformed.column_names == ["id", "customer", "amount"]  # the table's order
    assert conformed.schema.field("id").type == pa.int64()
    assert not conformed.schema.field("id").nullable
    orders.append(conformed)
    assert orders.scan().to_arrow().num_rows == 2


def test_every_violation_is_listed_at_once(orders):
    data = pa.table(
        {
            "customer": pa.array([1, 2], pa.int64()),
            "amount": pa.array([1.0, 2.0]),
            "ts": pa.array([1, 2], pa.timestamp("us")),  # no time zone: timestamp, not timestamptz
            "surprise": ["x", "y"],
        }
    )
    report = check_contract(data, orders)
    kinds = sorted((v.kind, v.column) for v in report.violations)
    assert kinds == [
        ("extra_column", "surprise"),
        ("missing_required", "id"),
        ("type_mismatch", "amount"),
        ("type_mismatch", "customer"),
        ("type_mismatch", "ts"),
    ]
    with pytest.raises(SchemaContractError, match=r"sales\.orders \(5 problem\(s\)\)") as info:
        enforce_contract(data, orders)
    assert len(info.value.violations) == 5
    assert "column 'ts' is timestamp[us] in the data but timestamptz in the table" in str(info.value)


def test_nulls_in_a_required_column_are_counted_from_the_data(orders):
    data = pa.table({"id": pa.array([1, None, None], pa.int64())})
    (violation,) = check_contract(data, orders).violations
    assert violation.kind == "nulls_in_required"
    assert "2 null value(s)" in violation.message
    # With only a schema, a nullable field bound for a required column is reported.
    (schema_only,) = check_contract(pa.schema([pa.field("id", pa.int64())]), orders).violations
    assert schema_only.kind == "nulls_in_required" and "nullable=False" in schema_only.message
    assert check_contract(pa.table({"id": pa.array([1], pa.int64())}), orders).ok


def test_extra_columns_allowed_on_request_and_unsupported_types_reported(orders):
    data = pa.table({"id": pa.array([1], pa.int64()), "note": ["x"], "customer": pa.array([1], pa.uint8())})
    report = check_contract(data, orders, allow_extra_columns=True)
    (violation,) = report.violations
    assert violation.kind == "unsupported_type" and "unsigned" in violation.message


def test_nested_fields_are_checked(catalog, namespace):
    schema = pa.schema(
        [
            pa.field("id", pa.int64(), nullable=False),
            pa.field("addr", pa.struct([pa.field("city", pa.string(), nullable=False), pa.field("zip", pa.int32())])),
            pa.field("tags", pa.list_(pa.string())),
        ]
    )
    table = catalog.create_table(f"{namespace}.nested", schema)
    data = pa.table(
        {
            "id": pa.array([1], pa.int64()),
            "addr": pa.array([{"zip": "x"}], pa.struct([pa.field("zip", pa.string())])),
            "tags": pa.array([[1]], pa.list_(pa.int64())),
        }
    )
    kinds = sorted((v.kind, v.column) for v in check_contract(data, table).violations)
    assert kinds == [
        ("missing_required", "addr.city"),
        ("type_mismatch", "addr.zip"),
        ("type_mismatch", "tags.element"),
    ]


def test_all_null_columns_fit_optional_columns(orders):
    data = pa.table({"id": pa.array([1, 2], pa.int64()), "amount": [None, None], "customer": pa.nulls(2)})
    assert data.schema.field("amount").type == pa.null()
    assert check_contract(data, orders).ok
    orders.append(conform_to_table(data, orders))
    assert orders.scan().to_arrow().column("amount").null_count == 2
    (violation,) = check_contract(pa.table({"id": pa.nulls(1)}), orders).violations
    assert violation.kind == "nulls_in_required"
