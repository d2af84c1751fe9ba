"""A bad ``--where`` is one usage error for ``move`` and ``maintain``, checked before anything else is printed.

A filter that does not parse and a filter naming a column the table lacks are both click's usage
error of ``--where`` (``Error: Invalid value for '--where': ...`` after the usage line, exit 2, the
JSON error object with ``--json``), for ``move``, ``move plan``, ``move verify`` and ``maintain
compact``; no note (a move's notes about earlier moves) and no progress comes first. Real
subprocesses on a SQLite catalog in ``tmp_path``.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.cli.ops_support import run, sqlite_flags
from tests.support.lake import Lake
from tests.support.tables import small_files_table

COMMANDS = {
    "move": ["move", "sales.events", "archive.events"],
    "move plan": ["move", "plan", "sales.events", "archive.events"],
    "move verify": ["move", "verify", "sales.events", "archive.events"],
    "maintain compact": ["maintain", "compact", "sales.events"],
}
FILTERS = {"does not parse": ("id >", "does not parse as a filter"), "no such column": ("nope > 1", "does not fit")}


@pytest.fixture(scope="module")
def lake(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """``sales.events`` (4 appends of 50 rows), and ``archive.events`` holding an earlier move from it."""
    root = (shared := Lake(tmp_path_factory.mktemp("lake"))).root
    small_files_table(shared.catalog(), "sales.events", appends=4, rows=50)
    earlier = run(root, *sqlite_flags(root), "move", *COMMANDS["move"][1:], "--where", "id < 50", "--create-target")
    assert earlier.returncode == 0, earlier.stderr
    return root


@pytest.mark.parametrize("command", sorted(COMMANDS))
@pytest.mark.parametrize("case", sorted(FILTERS))
def test_a_bad_where_is_a_usage_error_before_anything_is_printed(lake: Path, command: str, case: str):
    where, says = FILTERS[case]

    result = run(lake, *sqlite_flags(lake), *COMMANDS[command], "--where", where, "--json")

    assert result.returncode == 2, result.stderr
    assert result.stderr.startswith("Usage: iceberg-ops "), result.stderr  # nothing (no note:) before it
    assert "note:" not in result.stderr and "error:" not in result.stderr
    assert "Error: Invalid value for '--where': " in result.stderr and says in result.stderr
    document = json.loads(result.stdout)
    assert (document["type"], document["exit_code"]) == ("UsageError", 2)
    assert says in document["error"]
    if case == "no such column":
        assert "Columns: id, category, amount, note." in document["error"]  # what it could have named
