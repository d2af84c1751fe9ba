"""``maintain compact --commit-every SIZE`` and ``--concurrent-groups N``: how many snapshots a compaction
makes, and the bad values, each refused naming the option as typed, with nothing written."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from iceberg_ops_provider.cli import cli
from tests.cli.ops_support import sqlite_catalog, sqlite_flags
from tests.support.lake import Lake
from tests.support.tables import rows, small_files_table


@pytest.fixture
def lake(lake: Lake) -> Path:
    """``sales.events``: 8 small files in each of its two partitions (``category``)."""
    small_files_table(lake.catalog(), "sales.events", appends=8, rows=20, partitioned=True)
    return lake.root


def _invoke(lake: Path, *args: str):
    return CliRunner().invoke(cli, [*sqlite_flags(lake), "maintain", "compact", "sales.events", *args])


def _compactions(lake: Path) -> list[str]:
    table = sqlite_catalog(lake).load_table("sales.events")
    return [
        s.summary.get("iceberg-ops.compaction.group")
        for s in table.snapshots()
        if s.summary.get("iceberg-ops.compaction.group")
    ]


@pytest.mark.parametrize(
    ("options", "snapshots"),
    [((), ["1-2/2"]), (("--commit-every", "0"), ["1/2", "2/2"]), (("--concurrent-groups", "1"), ["1-2/2"])],
)
def test_the_groups_commit_together_unless_told_otherwise(lake, options, snapshots):
    before = rows(sqlite_catalog(lake).load_table("sales.events"))
    result = _invoke(lake, *options)
    assert result.exit_code == 0, result.output
    assert _compactions(lake) == snapshots
    assert rows(sqlite_catalog(lake).load_table("sales.events")) == before


@pytest.mark.parametrize(
    ("options", "expected"),
    [
        (("--commit-every", "-5"), "--commit-every"),
        (("--commit-every", "lots"), "'lots' is not a size"),
        (("--commit-every", "0.5"), "'0.5' is not a whole number of bytes"),
        (("--commit-every", "2TiB"), "more than 1 TiB"),
        (("--concurrent-groups", "0"), "--concurrent-groups"),
        (("--plan", "--commit-every", "0"), "--commit-every with --plan"),
        (("--unit", "1", "--concurrent-groups", "2"), "--concurrent-groups with --units/--unit"),
    ],
)
def test_bad_values_are_refused_naming_the_option(lake, options, expected):
    location = sqlite_catalog(lake).load_table("sales.events").metadata_location
    result = _invoke(lake, *options)
    assert result.exit_code == 2 and expected in result.output, result.output
    assert sqlite_catalog(lake).load_table("sales.events").metadata_location == location
