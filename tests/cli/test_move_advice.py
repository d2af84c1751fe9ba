"""What ``iceberg-ops move`` advises, in the command line's words: options as typed (``--mode
incremental``, ``--move-id``, ``--create-target``, ``--rename``, ``--columns``), never Python's
``mode='incremental'``; ``move verify`` on a missing target says what fits verify. Subprocesses against
a real SQLite catalog in ``tmp_path``; the same refusals from Python keep the argument names."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pyarrow as pa
import pytest

from iceberg_ops_provider.data_migration import DataMover
from iceberg_ops_provider.errors import InvalidMoveError, MoveStateError, ReconciliationError
from tests.cli.ops_support import run, sqlite_catalog, sqlite_flags
from tests.support.lake import Lake
from tests.support.tables import batch, small_files_table

PYTHON_WORDS = re.compile(r"\b(mode|move_id|create_target|columns|rename|where)=")


@pytest.fixture
def lake(lake: Lake) -> Path:
    """``sales.events``: 4 appends of 50 rows."""
    small_files_table(lake.catalog(), "sales.events", appends=4, rows=50)
    return lake.root


def _error(result) -> str:
    """The one ``error:`` line on stderr, whitespace folded, checked free of Python's ``name=`` wording."""
    text = " ".join(result.stderr.split())
    assert not PYTHON_WORDS.search(text), text
    assert "--mode='" not in text and "--move-id='" not in text, text
    return text


def _move(lake: Path, *arguments: str):
    return run(lake, *sqlite_flags(lake), "move", "sales.events", "archive.events", *arguments, "--no-progress")


def test_a_finished_move_over_a_changed_source_advises_mode_incremental_as_typed(lake: Path):
    assert _move(lake, "--create-target").returncode == 0
    sqlite_catalog(lake).load_table("sales.events").append(batch(1000, 10))

    again = _move(lake, "--create-target")

    assert again.returncode == 2
    text = _error(again)
    assert "Copying again would duplicate rows: use --mode incremental (same arguments otherwise" in text
    assert "or another --move-id to copy anew" in text

    followed = _move(lake, "--create-target", "--mode", "incremental")  # doing what it says works
    assert followed.returncode == 0, followed.stderr
    assert sqlite_catalog(lake).load_table("archive.events").scan().count() == 210

    with pytest.raises(MoveStateError) as raised:  # Python: the argument names
        sqlite_catalog(lake).load_table("sales.events").append(batch(2000, 10))
        DataMover(sqlite_catalog(lake), "sales.events", "archive.events").run()
    assert "use mode='incremental'" in str(raised.value) and "another move_id to copy anew" in str(raised.value)


def test_a_finished_overwrite_over_a_changed_source_advises_another_move_id(lake: Path):
    assert _move(lake, "--create-target", "--mode", "overwrite").returncode == 0
    sqlite_catalog(lake).load_table("sales.events").append(batch(1000, 10))

    again = _move(lake, "--mode", "overwrite")

    assert again.returncode == 2
    assert "run --mode overwrite again under another --move-id." in _error(again)


def test_a_move_id_started_with_other_options_names_them_as_typed(lake: Path):
    assert _move(lake, "--create-target", "--move-id", "weekly", "--where", "id < 100").returncode == 0

    other = _move(lake, "--move-id", "weekly", "--where", "id >= 100")

    assert other.returncode == 2
    text = _error(other)
    assert "--move-id weekly was started with another filter, column list, renames or mode" in text
    assert "(--where, --columns, --rename, --mode)" in text and "or use another --move-id." in text


def test_a_missing_target_advises_create_target(lake: Path):
    missing = _move(lake)

    assert missing.returncode == 2
    assert "Create it first, or pass --create-target to create it" in _error(missing)
    with pytest.raises(InvalidMoveError, match=r"or pass create_target=True to create it"):
        DataMover(sqlite_catalog(lake), "sales.events", "archive.events").plan()


@pytest.mark.parametrize("create_target", [False, True])
def test_verify_of_a_missing_target_says_nothing_was_moved_and_the_command_that_moves(lake: Path, create_target):
    flags = ["--create-target"] if create_target else []
    result = run(lake, *sqlite_flags(lake), "--json", "move", "verify", "sales.events", "archive.events", *flags)

    assert result.returncode == 2  # as documented for verify of a move that has not finished
    text = _error(result)
    assert "its target archive.events does not exist, so nothing was moved there yet" in text
    catalog_flags = " ".join(sqlite_flags(lake))  # the command to paste repeats the options that named the catalog
    assert f"run `iceberg-ops {catalog_flags} move sales.events archive.events --create-target` first" in text
    assert "Create it first" not in text and "pass --create-target" not in text
    document = json.loads(result.stdout)
    assert document["type"] == "MoveStateError" and document["exit_code"] == 2

    with pytest.raises(MoveStateError) as raised:  # Python: the call to make
        DataMover(sqlite_catalog(lake), "sales.events", "archive.events").verify()
    assert "run the move first (DataMover.run(); with create_target=True it creates the target)" in str(raised.value)


def test_columns_that_do_not_pair_name_rename_and_columns_as_typed(lake: Path):
    catalog = sqlite_catalog(lake)
    catalog.create_namespace("archive")
    catalog.create_table("archive.events", pa.schema([pa.field("id", pa.int64(), nullable=False)]))

    result = _move(lake)

    assert result.returncode == 2
    text = _error(result)
    assert "Fix: map it to a target column with --rename 'category=<target column>', leave it out with --columns" in (
        text
    )

    with pytest.raises(ReconciliationError) as raised:
        DataMover(catalog, "sales.events", "archive.events").plan()
    assert "rename={'category': '<target column>'}, leave it out with columns=" in str(raised.value)


def test_the_same_table_twice_points_at_the_compaction_command(lake: Path):
    result = run(lake, *sqlite_flags(lake), "move", "sales.events", "sales.events")

    assert result.returncode == 2
    assert "use compaction (`iceberg-ops maintain compact sales.events`)" in _error(result)
