"""``iceberg-ops tag create|list|drop`` and ``iceberg-ops restore``: real processes on a SQLite catalog."""

from __future__ import annotations

import json
import os
import pty
import select
import subprocess
import sys
import time

import pyarrow as pa
import pytest

from tests.cli.ops_support import run
from tests.support.lake import Lake

SCHEMA = pa.schema([pa.field("id", pa.int64())])


def _rows(start: int, count: int) -> pa.Table:
    return pa.table({"id": pa.array(range(start, start + count), pa.int64())})


@pytest.fixture
def events(lake: Lake):
    catalog = lake.catalog()
    catalog.create_namespace("sales")
    table = catalog.create_table("sales.events", SCHEMA)
    table.append(_rows(0, 5))
    return table


def _ops(lake: Lake, *args: str) -> subprocess.CompletedProcess[str]:
    return run(lake.root, *lake.flags, *args)


def test_tags_are_created_listed_and_dropped_and_bad_input_is_refused(lake, events):
    first = events.current_snapshot().snapshot_id
    created = _ops(lake, "tag", "create", "sales.events", "before-load", "--max-age", "7d")
    assert created.returncode == 0, created.stderr
    assert created.stdout.startswith(f"tagged snapshot {first} of sales.events as before-load (kept until ")
    location = lake.catalog().load_table("sales.events").metadata_location
    rerun = _ops(lake, "tag", "create", "sales.events", "before-load", "--max-age", "7d")  # e.g. after a crash
    assert rerun.returncode == 0, rerun.stderr
    assert rerun.stdout.startswith(f"tag before-load of sales.events is on snapshot {first} already (kept until ")
    assert rerun.stdout.rstrip().endswith("): nothing to do")
    assert lake.catalog().load_table("sales.events").metadata_location == location
    other_age = _ops(lake, "tag", "create", "sales.events", "before-load", "--max-age", "8d")
    assert other_age.returncode == 2 and "(the one asked for); it was not moved" in other_age.stderr
    events.append(_rows(5, 1))

    again = _ops(lake, "tag", "create", "sales.events", "before-load")
    assert again.returncode == 2
    assert f"already has a tag 'before-load', on snapshot {first}; it was not moved" in again.stderr
    unknown = _ops(lake, "tag", "create", "sales.events", "x", "--snapshot", "12")
    assert unknown.returncode == 2 and "has no snapshot 12" in unknown.stderr
    assert f"its current snapshot is {events.current_snapshot().snapshot_id}" in unknown.stderr
    assert "leave out --snapshot to tag the current one" in unknown.stderr  # the option, not the argument
    bad_age = _ops(lake, "tag", "create", "sales.events", "x", "--max-age", "soon")
    assert bad_age.returncode == 2 and "Invalid value for '--max-age': 'soon' is not an age" in bad_age.stderr
    _ops(lake, "tag", "create", "sales.events", "old", "--snapshot", str(first), "--max-age", "1")

    listed = _ops(lake, "tag", "list", "sales.events")
    assert listed.returncode == 0, listed.stderr
    lines = listed.stdout.splitlines()
    assert lines[0].split() == ["name", "kind", "snapshot", "snapshot", "time", "max", "age", "expiry", "drops", "it"]
    assert lines[2].split()[:2] == ["main", "branch"] and lines[2].split()[-1] == "never"
    assert lines[3].split()[:3] == ["before-load", "tag", str(first)] and "7d" in lines[3]
    assert lines[4].startswith("old") and lines[4].endswith("(soon)")
    document = json.loads(_ops(lake, "tag", "list", "sales.events", "--json").stdout)
    assert [(r["name"], r["kind"], r["expires_soon"]) for r in document["refs"]] == [
        ("main", "branch", False),
        ("before-load", "tag", False),
        ("old", "tag", True),
    ]
    assert document["refs"][1]["max_age_ms"] == 7 * 86400 * 1000

    missing = _ops(lake, "tag", "drop", "sales.events", "nope")
    assert (
        missing.returncode == 2
        and "has no tag 'nope'" in missing.stderr
        and "its tags: before-load, old" in (missing.stderr)
    )
    branch = _ops(lake, "tag", "drop", "sales.events", "main")
    assert branch.returncode == 2 and "is a branch, not a tag" in branch.stderr
    dropped = _ops(lake, "tag", "drop", "sales.events", "old")
    assert dropped.returncode == 0 and f"it pointed at snapshot {first}" in dropped.stdout
    assert "old" not in lake.catalog().load_table("sales.events").refs()
    no_table = _ops(lake, "tag", "list", "sales.nope")
    assert no_table.returncode == 2 and "table 'sales.nope' does not exist" in no_table.stderr


def test_restore_without_a_terminal_shows_the_preview_and_refuses_without_yes(lake, events):
    tagged = events.current_snapshot().snapshot_id
    _ops(lake, "tag", "create", "sales.events", "before-load")
    events.append(_rows(5, 3), snapshot_properties={"iceberg-ops.move-id": "backfill-1"})
    head = events.current_snapshot().snapshot_id

    refused = _ops(lake, "restore", "sales.events", "--to-tag", "before-load")

    assert refused.returncode == 2
    assert f"main of sales.events is at snapshot {head}; setting it back to tag before-load (snapshot {tagged}) " in (
        refused.stdout
    )
    assert "undoes 1 commit(s)" in refused.stdout and "move backfill-1" in refused.stdout and "+3/-0" in refused.stdout
    assert "Nothing is deleted" in refused.stdout
    assert "no terminal to ask at; nothing was changed. Run it again with --yes: iceberg-ops --catalog sqlite" in (
        refused.stderr
    )
    assert refused.stderr.rstrip().endswith("restore sales.events --to-tag before-load --yes")
    as_json = _ops(lake, "--json", "restore", "sales.events", "--to-tag", "before-load")
    document = json.loads(as_json.stdout)
    assert as_json.returncode == 2 and document["restored"] is None and document["exit_code"] == 2
    assert document["preview"]["undone"][0]["committed_by"] == "move"
    assert lake.catalog().load_table("sales.events").current_snapshot().snapshot_id == head

    done = _ops(lake, "--json", "restore", "sales.events", "--to-tag", "before-load", "--yes")
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["restored"]["to_snapshot_id"] == tagged
    table = lake.catalog().load_table("sales.events")
    assert table.current_snapshot().snapshot_id == tagged and table.scan().to_arrow().num_rows == 5
    assert table.snapshot_by_id(head) is not None  # nothing deleted

    unknown = _ops(lake, "restore", "sales.events", "--to-tag", "nope", "--yes")
    assert (
        unknown.returncode == 2
        and "has no tag 'nope'" in unknown.stderr
        and "its tags: before-load" in (unknown.stderr)
    )


def _at_a_terminal(lake: Lake, *args: str) -> tuple[subprocess.Popen[bytes], int]:
    """``iceberg-ops ARGS`` with a terminal as its stdin (the prompt reads it); the terminal's other end."""
    controller, terminal = pty.openpty()
    command = "from iceberg_ops_provider.cli import main; main()"
    process = subprocess.Popen(
        [sys.executable, "-c", command, *lake.flags, *args],
        stdin=terminal,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env={**os.environ},
    )
    os.close(terminal)
    return process, controller


def _wait_for_prompt(process: subprocess.Popen[bytes], deadline: float = 60) -> bytes:
    seen = b""
    end = time.monotonic() + deadline
    while b"[y/N]" not in seen:
        assert time.monotonic() < end, seen
        ready, _, _ = select.select([process.stderr], [], [], 1)
        if ready:
            chunk = os.read(process.stderr.fileno(), 4096)
            assert chunk, seen  # the process ended without asking
            seen += chunk
    return seen


def test_a_commit_landing_at_the_prompt_makes_the_restore_refuse_naming_it(lake, events):
    _ops(lake, "tag", "create", "sales.events", "before-load")
    events.append(_rows(5, 3))
    process, controller = _at_a_terminal(lake, "restore", "sales.events", "--to-tag", "before-load")
    try:
        _wait_for_prompt(process)
        lake.catalog().load_table("sales.events").append(_rows(100, 1))  # lands while the person reads
        landed = lake.catalog().load_table("sales.events").current_snapshot().snapshot_id
        os.write(controller, b"y\n")
        _, err = process.communicate(timeout=60)
    finally:
        os.close(controller)
    assert process.returncode == 1, err
    assert f"to {landed} after it was read; committed since: {landed} (append, at " in err.decode()
    assert lake.catalog().load_table("sales.events").current_snapshot().snapshot_id == landed


def test_a_yes_at_the_prompt_restores_and_a_no_changes_nothing(lake, events):
    tagged = events.current_snapshot().snapshot_id
    _ops(lake, "tag", "create", "sales.events", "before-load")
    events.append(_rows(5, 3))
    head = events.current_snapshot().snapshot_id

    for answer, code, expected in ((b"n\n", 1, head), (b"y\n", 0, tagged)):
        process, controller = _at_a_terminal(lake, "restore", "sales.events", "--to-tag", "before-load")
        try:
            _wait_for_prompt(process)
            os.write(controller, answer)
            out, err = process.communicate(timeout=60)
        finally:
            os.close(controller)
        assert process.returncode == code, err
        assert lake.catalog().load_table("sales.events").current_snapshot().snapshot_id == expected
    assert b"1 commit(s) undone, nothing deleted" in out


@pytest.mark.postgres
def test_tag_and_restore_on_a_postgresql_backed_catalog(new_postgres_database: str, tmp_path):
    from iceberg_ops_provider.catalogs import CatalogFactory

    warehouse = tmp_path / "warehouse"
    catalog = CatalogFactory.build("sql", uri=new_postgres_database, warehouse_dir=warehouse)
    catalog.create_namespace("sales")
    table = catalog.create_table("sales.events", SCHEMA)
    table.append(_rows(0, 5))
    tagged = table.current_snapshot().snapshot_id
    flags = ["--catalog", "sql", "--catalog-uri", new_postgres_database, "--warehouse", str(warehouse)]

    created = run(tmp_path, *flags, "tag", "create", "sales.events", "before-load", "--max-age", "7d")
    assert created.returncode == 0, created.stderr
    table.append(_rows(5, 5))
    listed = json.loads(run(tmp_path, *flags, "--json", "tag", "list", "sales.events").stdout)
    assert [(r["name"], r["snapshot_id"]) for r in listed["refs"]][1] == ("before-load", tagged)

    restored = run(tmp_path, *flags, "restore", "sales.events", "--to-tag", "before-load", "--yes")

    assert restored.returncode == 0, restored.stderr
    assert "undoes 1 commit(s)" in restored.stdout and "1 commit(s) undone, nothing deleted" in restored.stdout
    after = catalog.load_table("sales.events")
    assert after.current_snapshot().snapshot_id == tagged and after.scan().to_arrow().num_rows == 5
    assert run(tmp_path, *flags, "tag", "drop", "sales.events", "before-load").returncode == 0
    assert "before-load" not in catalog.load_table("sales.events").refs()
