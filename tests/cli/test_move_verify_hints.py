"""``move verify`` of a move whose target does not exist: the command it advises can be pasted as it is.

The advice repeats the options that named the source's catalog, the options that define the move
(so it is the same move, with the same id) and the ``--target-*`` options; a ``--target-db-path``
that does not exist yet is not created by verify (nor by ``move plan``). Pasting the advised command
runs the move, after which the same verify passes. Real subprocesses on SQLite files in ``tmp_path``.
"""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import pytest

from tests.cli.ops_support import run, sqlite_flags
from tests.support.lake import Lake
from tests.support.tables import small_files_table

DEFINITION = ["--where", "id >= 100", "--columns", "id,amount", "--rename", "amount=total", "--mode", "incremental"]


@pytest.fixture
def lake(lake: Lake) -> Path:
    """``sales.events``: 4 appends of 50 rows."""
    small_files_table(lake.catalog(), "sales.events", appends=4, rows=50)
    return lake.root


def _advised(stderr: str) -> str:
    found = re.search(r"run `(iceberg-ops [^`]+)` first", " ".join(stderr.split()))
    assert found, stderr
    return found.group(1)


def test_the_advice_repeats_every_option_and_pasting_it_makes_verify_pass(lake: Path):
    target = ["--target-db-path", "archive/archive.db"]

    verify = run(lake, *sqlite_flags(lake), "move", "verify", "sales.events", "archive.events", *DEFINITION, *target)

    assert verify.returncode == 2
    assert "its target archive.events does not exist, so nothing was moved there yet" in verify.stderr
    command = _advised(verify.stderr)
    assert command == (
        f"iceberg-ops {' '.join(sqlite_flags(lake))} move sales.events archive.events --where 'id >= 100' "
        "--columns id,amount --rename amount=total --mode incremental --target-db-path archive/archive.db "
        "--create-target"
    )
    assert not (lake / "archive").exists()  # verify created no target database (nor its folder)

    words = shlex.split(command)
    moved = run(lake, *words[1:])  # the advice, pasted
    assert moved.returncode == 0, moved.stderr
    assert (lake / "archive" / "archive.db").is_file()

    again = run(lake, *sqlite_flags(lake), "move", "verify", "sales.events", "archive.events", *DEFINITION, *target)
    assert again.returncode == 0, again.stderr
    assert "verify (count): ok, 100 source rows, 100 rows of this move in the target" in again.stdout


def test_the_advice_without_other_options_and_with_a_project_file(lake: Path):
    (lake / "iceberg-ops.yaml").write_text(
        f"catalog:\n  kind: sqlite\n  db_path: {lake / 'catalog.db'}\n  warehouse_dir: {lake / 'warehouse'}\n"
    )

    verify = run(lake, "move", "verify", "sales.events", "archive.events")

    assert verify.returncode == 2
    assert _advised(verify.stderr) == "iceberg-ops move sales.events archive.events --create-target"


def test_move_plan_into_a_new_target_database_creates_nothing(lake: Path):
    plan = run(
        lake,
        *sqlite_flags(lake),
        "move",
        "plan",
        "sales.events",
        "archive.events",
        "--create-target",
        "--target-db-path",
        "archive/archive.db",
    )

    assert plan.returncode == 0, plan.stderr
    assert "the target is created when the move runs" in plan.stdout
    assert not (lake / "archive").exists()
