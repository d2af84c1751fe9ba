"""Pure planning logic, without a catalog."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pytest

from iceberg_ops_provider.errors import MigrationIntegrityError, MigrationTargetError
from iceberg_ops_provider.history import HistoryRow
from iceberg_ops_provider.migration import BaseMigration
from iceberg_ops_provider.migration.discovery import MigrationScript
from iceberg_ops_provider.runner.planning import (
    check_integrity,
    classify,
    downgrade_steps,
    infer_direction,
    stamp_changes,
    upgrade_steps,
)


def _script(version: str, checksum: str = "c") -> MigrationScript:
    return MigrationScript(version, "step", f"step {version}", Path(f"{version}_step.py"), checksum, BaseMigration())


def _row(version: str, status: str = "applied", checksum: str = "c") -> HistoryRow:
    return HistoryRow(version, "ns", f"step {version}", datetime.now(UTC), status, checksum=checksum)  # type: ignore[arg-type]


SCRIPTS = [_script("0001"), _script("0002"), _script("0003"), _script("0010")]


def test_classify_applied_pending_failed_and_odd():
    rows = [_row("0001"), _row("0002", "failed"), _row("0003", checksum="other"), _row("0005")]
    state = classify(SCRIPTS, rows)
    assert state.applied == ("0001", "0003", "0005") and state.current == "0005"
    assert state.pending == ("0002", "0010") and state.failed == ("0002",)
    assert state.changed == ("0003",) and state.missing == ("0005",) and state.out_of_order == ("0002",)
    assert len(state.problems()) == 3
    with pytest.raises(MigrationIntegrityError) as info:
        check_integrity(state, "ns")
    assert len(info.value.problems) == 3
    check_integrity(state, "ns", allow_changed=True, allow_missing=True, allow_out_of_order=True)


def test_versions_match_by_number():
    state = classify([_script("0003")], [_row("3")])
    assert state.pending == () and state.applied == ("3",)


def test_targets_from_base():
    state = classify(SCRIPTS, [])
    assert [s.version for s in upgrade_steps(state, "head")] == ["0001", "0002", "0003", "0010"]
    assert [s.version for s in upgrade_steps(state, "+2")] == ["0001", "0002"]
    assert [s.version for s in upgrade_steps(state, "3")] == ["0001", "0002", "0003"]
    assert downgrade_steps(state, "base") == []
    assert infer_direction(state, "0003") == "upgrade"


def test_targets_from_the_middle():
    state = classify(SCRIPTS, [_row("0001"), _row("0002"), _row("0003")])
    assert [s.version for s in downgrade_steps(state, "0001")] == ["0003", "0002"]
    assert [s.version for s in downgrade_steps(state, "-1")] == ["0003"]
    assert [s.version for s in downgrade_steps(state, "base")] == ["0003", "0002", "0001"]
    assert all(s.direction == "downgrade" for s in downgrade_steps(state, "base"))
    assert infer_direction(state, "0001") == "downgrade"
    assert infer_direction(state, "0003") == "upgrade"
    assert upgrade_steps(state, "0003") == []
    with pytest.raises(MigrationTargetError, match="below the current version"):
        upgrade_steps(state, "0002")


def test_stamp_changes():
    state = classify(SCRIPTS, [_row("0001"), _row("0002"), _row("0003")])
    assert stamp_changes(state, "0010") == (["0010"], [])
    assert stamp_changes(state, "0001") == ([], ["0003", "0002"])
    assert stamp_changes(state, "base") == ([], ["0003", "0002", "0001"])
    assert stamp_changes(state, "head") == (["0010"], [])


@pytest.mark.parametrize("target", ["", "up", "+x", "1.0", "--1"])
def test_bad_target_syntax(target):
    state = classify(SCRIPTS, [])
    with pytest.raises(MigrationTargetError, match="is not valid"):
        upgrade_steps(state, target)
