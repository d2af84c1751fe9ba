"""Model files: valid ones load, bad ones name the file and the key."""

from __future__ import annotations

import pytest
from pyiceberg.types import DecimalType, LongType

from iceberg_ops_provider.autogen.models import load_model, load_models, model_from_dict
from iceberg_ops_provider.errors import ModelError

VALID = """
name: orders
columns:
  - {name: id, type: long, required: true, doc: "order id"}
  - {name: ts, type: timestamptz}
  - {name: amount, type: "decimal(12,2)"}
  - {name: customer_email, type: string, renamed_from: email}
partition_by: ["day(ts)", "bucket(16, id)"]
sort_by: ["ts desc"]
properties: {write.target-file-size-bytes: "134217728", old.key: null, flag: true}
identifier_fields: [id]
"""


def test_valid_model(tmp_path):
    (tmp_path / "orders.yaml").write_text(VALID)
    model = load_model(tmp_path / "orders.yaml")
    assert model.name == "orders"
    assert [c.name for c in model.columns] == ["id", "ts", "amount", "customer_email"]
    assert model.columns[0].type == LongType() and model.columns[0].required and model.columns[0].doc == "order id"
    assert model.columns[2].type == DecimalType(12, 2)
    assert model.columns[3].renamed_from == "email"
    assert model.properties == {"write.target-file-size-bytes": "134217728", "old.key": None, "flag": "true"}
    assert model.schema().find_field("id").required
    assert [m.name for m in load_models(tmp_path)] == ["orders"]


@pytest.mark.parametrize(
    ("document", "message"),
    [
        ("name: orders\ncolumns: [\n", "not valid YAML"),
        ("- just a list", "must be a mapping"),
        ("name: orders\ncolumns: []\n", "'columns' must be a non-empty list"),
        ("name: sales.orders\ncolumns: [{name: id, type: long}]\n", "bare table name"),
        ("name: orders\ncolums: []\n", "unknown key 'colums' (did you mean 'columns'?)"),
        ("name: orders\ncolumns: [{name: id, type: long}]\npartiton_by: []\n", "did you mean 'partition_by'?"),
        ("name: orders\ncolumns: [{name: id, type: longg}]\n", "unknown type name 'longg'"),
        ("name: orders\ncolumns: [{name: id}]\n", "needs a 'type'"),
        ("name: orders\ncolumns: [{name: id, type: long, nullable: true}]\n", "unknown key 'nullable'; valid keys: "),
        ("name: orders\ncolumns: [{name: id, type: long, required: maybe}]\n", "'required' must be true or false"),
        ("name: orders\ncolumns: [{name: id, type: long}, {name: id, type: int}]\n", "declared more than once"),
        ("name: orders\ncolumns: [{name: id, type: long}]\npartition_by: [weekly(id)]\n", "unknown transform"),
        ("name: orders\ncolumns: [{name: id, type: long}]\npartition_by: [day(ts)]\n", "uses column 'ts'"),
        ("name: orders\ncolumns: [{name: id, type: long}]\nsort_by: [nope desc]\n", "uses column 'nope'"),
        ("name: orders\ncolumns: [{name: id, type: long}]\nidentifier_fields: [id]\n", "required: true"),
        ("name: orders\ncolumns: [{name: x, type: double, required: true}]\nidentifier_fields: [x]\n", "float, double"),
        ("name: orders\ncolumns: [{name: id, type: long}]\nproperties: {a: [1]}\n", "single value"),
    ],
)
def test_bad_models_name_the_file_and_problem(tmp_path, document, message):
    path = tmp_path / "orders.yaml"
    path.write_text(document)
    with pytest.raises(ModelError) as info:
        load_model(path)
    assert str(path) in str(info.value) and message in str(info.value)


def test_duplicate_tables_and_missing_folder(tmp_path):
    (tmp_path / "a.yaml").write_text("name: orders\ncolumns: [{name: id, type: long}]\n")
    (tmp_path / "b.yml").write_text("name: orders\ncolumns: [{name: id, type: long}]\n")
    with pytest.raises(ModelError, match="declares table 'orders', as does"):
        load_models(tmp_path)
    with pytest.raises(ModelError, match="models folder not found"):
        load_models(tmp_path / "nope")


def test_dropped_model_needs_no_columns():
    assert model_from_dict({"name": "old", "dropped": True}).dropped
