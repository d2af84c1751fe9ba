"""A step's recorded state: written and read back, refused when unreadable or from another version."""

from __future__ import annotations

import json

import pytest

from iceberg_ops_provider.data_steps.state import STATE_KEY, STEP_KEY, StepState, mirror_property, property_key
from iceberg_ops_provider.errors import DataStepStateError

STATE = StepState("s/1", "def", 42, "plan", units_total=5, unit_bytes=1024, done=frozenset({0, 1, 3}), rows=7)


def test_a_state_reads_back_from_its_summary_and_its_property():
    summary = STATE.summary()
    assert summary[STEP_KEY] == "s/1" and json.loads(summary[STATE_KEY])["done"] == "0-1,3"
    assert StepState.from_json(summary[STATE_KEY], "here") == STATE
    mirrored = mirror_property(STATE, 99)[property_key("s/1")]
    assert json.loads(mirrored)["snapshot"] == 99 and StepState.from_json(mirrored, "there") == STATE
    assert STATE.units_done == 3 and not STATE.complete
    assert STATE.with_unit(2, 1).with_unit(4, 2).complete and STATE.with_unit(2, 1).rows == 8


@pytest.mark.parametrize("text", ["{not json", json.dumps({"v": 1, "step_id": "s/1"})])
def test_an_unreadable_state_is_refused(text):
    with pytest.raises(DataStepStateError, match="cannot be read"):
        StepState.from_json(text, "snapshot 7")


def test_a_state_of_another_version_is_refused():
    payload = json.loads(STATE.to_json())
    payload["v"] = 2
    with pytest.raises(DataStepStateError, match="version 2"):
        StepState.from_json(json.dumps(payload), "snapshot 7")
