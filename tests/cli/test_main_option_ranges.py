"""Global options with a range are refused by the command line itself, in its words, before a catalog opens."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from iceberg_ops_provider.cli import cli


@pytest.mark.parametrize("value", ["0.5", "604801", "nan"])
def test_stale_after_outside_one_second_to_a_week_is_a_usage_error(tmp_path: Path, value: str):
    missing = tmp_path / "not-there.db"
    result = CliRunner().invoke(
        cli,
        ["--catalog", "sqlite", "--db-path", str(missing), "--namespace", "sales", "--stale-after", value, "status"],
    )
    assert result.exit_code == 2, result.output
    assert "Invalid value for '--stale-after'" in result.output and "ValueError" not in result.output
    assert not missing.exists()
