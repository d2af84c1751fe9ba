"""Documents read back: JSON the project wrote, checked field by field, every refusal in one sentence."""

from __future__ import annotations

import pytest

from iceberg_ops_provider.data_migration.results import MoveUnit
from iceberg_ops_provider.maintenance.compaction_units import CompactionUnit

UNIT = {
    "table": "shop.visits",
    "index": 1,
    "partition": "day=2026-11-03",
    "spec_id": 0,
    "data_files": ["s3://b/2.parquet", "s3://b/1.parquet"],
    "bytes": 10,
    "expected_output_files": 1,
    "strategy": "binpack",
    "target_file_size_bytes": 512,
    "planned_snapshot_id": 7,
    "unit_id": "ignored",
}
FIX = "pass units as plan_compaction_units() returned them (CompactionUnit.to_json())."


def test_a_unit_reads_back_its_own_json_with_text_numbers_and_files_sorted():
    unit = CompactionUnit.from_json({**UNIT, "index": "1"})
    assert unit.index == 1 and unit.data_files == ("s3://b/1.parquet", "s3://b/2.parquet")
    assert CompactionUnit.from_json(unit.to_json()) == unit
    move = MoveUnit("m", "p", 3, 0, 2, ("a", "b"), 10, 5)
    assert MoveUnit.from_json(move.to_json()) == move


def test_an_unpartitioned_unit_rendered_by_airflow_as_a_native_object_reads_back():
    # Airflow's native template rendering turns the empty partition text of an unpartitioned unit into None.
    assert CompactionUnit.from_json({**UNIT, "partition": None}).partition == ""


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ({"table": "shop.visits"}, "A compaction unit lacks index, partition, spec_id, data_files, bytes,"),
        (
            {**UNIT, "index": "first"},
            "A compaction unit's index must be a valid integer, unable to parse string as an integer, got 'first'",
        ),
        ({**UNIT, "data_files": "one.parquet"}, "A compaction unit's data_files must be a valid tuple, got 'one."),
        ({**UNIT, "data_files": ["a", 5]}, "A compaction unit's data_files.1 must be a valid string, got 5: "),
        ({**UNIT, "data_files": []}, "A compaction unit's data_files must be a non-empty list of paths: "),
        ([1, 2], "A compaction unit must be a mapping, got [1, 2]: "),
    ],
)
def test_a_bad_unit_is_refused_naming_the_field_and_the_fix(data, message):
    with pytest.raises(ValueError) as refused:
        CompactionUnit.from_json(data)
    text = str(refused.value)
    assert text.startswith(message) and text.endswith(FIX)
    assert "validation error" not in text and "pydantic" not in text


def test_a_bad_move_unit_names_what_is_missing_or_wrong():
    good = MoveUnit("m", "p", 3, 0, 2, ("a",), 10, 5).to_json()
    with pytest.raises(ValueError, match=r"^A move unit lacks records: pass units as DataMover.plan\(\) returned"):
        MoveUnit.from_json({key: value for key, value in good.items() if key != "records"})
    with pytest.raises(ValueError, match=r"^A move unit's records must be a valid integer, got None: pass units"):
        MoveUnit.from_json({**good, "records": None})
