"""What ``iceberg-ops move`` says: what a rerun resumes, the plan of a finished move, the errors about
the target's catalog (naming the ``--target-*`` options), and refusals of options that cannot work.
Subprocesses and CliRunner against real SQLite catalogs; a REST catalog refusing credentials is a
real HTTP server on loopback."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from click.testing import CliRunner

from iceberg_ops_provider.cli import cli
from iceberg_ops_provider.data_migration import DataMover
from tests.cli.ops_support import run, sqlite_catalog, sqlite_flags
from tests.support.lake import Lake
from tests.support.tables import small_files_table


@pytest.fixture
def lake(lake: Lake) -> Path:
    """A SQLite catalog with ``sales.events``: 8 appends of 50 rows (one small file each)."""
    small_files_table(lake.catalog(), "sales.events", appends=8, rows=50)
    return lake.root


def test_a_rerun_says_what_it_resumes_on_stderr_and_in_its_json(lake: Path):
    DataMover(sqlite_catalog(lake), "sales.events", "archive.e", create_target=True, commit_every_bytes=1).run(
        units=[0, 1, 2]
    )

    done = run(lake, *sqlite_flags(lake), "move", "sales.events", "archive.e", "--commit-every-bytes", "1", "--json")

    assert done.returncode == 0, done.stderr
    assert "note: resuming: 3 of 8 units committed" in done.stderr
    result = json.loads(done.stdout)
    assert result["notes"] == ["resuming: 3 of 8 units committed"] and result["units_committed"] == 5

    again = run(lake, *sqlite_flags(lake), "move", "sales.events", "archive.e", "--commit-every-bytes", "1", "--json")
    assert again.returncode == 0 and json.loads(again.stdout)["notes"] == [] and "resuming" not in again.stderr


def test_a_resumed_move_with_another_unit_size_says_it_keeps_the_first(lake: Path):
    DataMover(sqlite_catalog(lake), "sales.events", "archive.e", create_target=True, commit_every_bytes=1).run(
        units=[0]
    )

    done = run(lake, *sqlite_flags(lake), "move", "sales.events", "archive.e", "--no-progress")

    assert done.returncode == 0, done.stderr
    assert "note: resuming: 1 of 8 units committed" in done.stderr
    assert "note: units of 1 B each, as the move started with" in done.stderr


def test_plan_of_a_finished_move_shows_the_units_it_committed(lake: Path):
    moved = run(
        lake, *sqlite_flags(lake), "move", "sales.events", "archive.e", "--create-target", "--commit-every-bytes", "1"
    )
    assert moved.returncode == 0, moved.stderr

    plan = run(lake, *sqlite_flags(lake), "move", "plan", "sales.events", "archive.e", "--json")

    document = json.loads(plan.stdout)
    assert len(document["units"]) == 8 and len(document["done"]) == 8, document
    assert "already complete: nothing to do" in document["notes"]


def test_source_snapshot_id_of_a_new_move_that_does_not_exist_says_so_without_resuming(lake: Path):
    result = CliRunner().invoke(
        cli,
        [*sqlite_flags(lake), "move", "sales.events", "archive.x", "--create-target", "--source-snapshot-id", "12345"],
    )

    assert result.exit_code == 2, result.output
    assert "--source-snapshot-id" in result.output and "12345 is not a snapshot of sales.events" in result.output
    assert "resum" not in result.output and "already committed" not in result.output


def test_an_interrupted_move_that_committed_nothing_does_not_claim_whole_units(capsys):
    from iceberg_ops_provider.cli.move import _interrupted

    settings = SimpleNamespace(as_json=False)
    mover: Any = SimpleNamespace(move_id="m1")
    with pytest.raises(SystemExit) as stopped:
        _interrupted(settings, mover, None, None, [])  # type: ignore[arg-type]
    message = capsys.readouterr().err
    assert stopped.value.code == 130
    assert "no unit committed before the stop" in message and "whole units committed" not in message

    last = SimpleNamespace(units_done=0, units_total=4)
    with pytest.raises(SystemExit):
        _interrupted(settings, mover, last, None, [])  # type: ignore[arg-type]
    assert "0 of 4" not in capsys.readouterr().err

    with pytest.raises(SystemExit):
        _interrupted(settings, mover, None, None, ["resuming: 2 of 4 units committed"])  # type: ignore[arg-type]
    assert "2 of 4 units committed before this run, none by it" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("arguments", "wanted", "unwanted"),
    [
        (["--target-conn-id", "nosuch"], "--target-conn-id", "airflow_conn_id:"),
        (["--target-catalog", "rest"], "--target-catalog-uri", "`uri:` under `catalog:`"),
        (
            ["--target-catalog-name", "foo", "--target-catalog", "sqlite"],
            "--target-catalog and --target-catalog-name",
            "--catalog and",
        ),
    ],
)
def test_errors_about_the_target_catalog_name_the_target_options(
    lake: Path, arguments: list[str], wanted: str, unwanted: str
):
    (lake / "iceberg-ops.yaml").write_text(
        f"catalog: {{kind: sqlite, db_path: {lake / 'catalog.db'}, warehouse_dir: {lake / 'warehouse'}}}\n"
        "namespace: sales\n"
    )

    result = run(lake, "move", "sales.events", "archive.q", "--create-target", *arguments)

    assert result.returncode == 2, result.stderr
    # Airflow may log a line of its own first (its unit-test configuration, inherited from other tests).
    (error,) = [line for line in result.stderr.splitlines() if line.startswith("error: ")]
    assert error.startswith("error: The target catalog"), result.stderr
    assert wanted in result.stderr and unwanted not in result.stderr


class _Refusing(BaseHTTPRequestHandler):
    """A REST catalog that refuses every request's credentials."""

    def do_GET(self) -> None:
        body = json.dumps({"error": {"message": "bad token", "type": "NotAuthorizedException", "code": 401}})
        self.send_response(401)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body.encode())

    do_POST = do_GET

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture
def refusing_catalog() -> Iterator[str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Refusing)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


def test_a_target_refusing_credentials_is_called_the_target_with_its_endpoint(lake: Path, refusing_catalog: str):
    result = run(
        lake,
        *sqlite_flags(lake),
        "--json",
        "move",
        "sales.events",
        "archive.q",
        "--create-target",
        "--target-catalog",
        "rest",
        "--target-catalog-uri",
        refusing_catalog,
    )

    document = json.loads(result.stdout)
    assert result.returncode == 2 and document["type"] == "CatalogAuthError", result.stderr
    assert document["error"].startswith("The target catalog") and refusing_catalog in document["error"]


def test_target_db_path_without_a_warehouse_keeps_the_data_next_to_the_database(lake: Path):
    target_db = lake / "elsewhere" / "archive.db"
    target_db.parent.mkdir()

    result = run(
        lake,
        *sqlite_flags(lake),
        "move",
        "sales.events",
        "archive.e",
        "--create-target",
        "--no-progress",
        "--target-catalog",
        "sqlite",
        "--target-db-path",
        str(target_db),
    )

    assert result.returncode == 0, result.stderr
    from iceberg_ops_provider.catalogs import CatalogFactory

    target = CatalogFactory.build("sqlite", db_path=target_db, warehouse_dir=lake / "unused").load_table("archive.e")
    assert target.location().removeprefix("file://").startswith(str(lake / "elsewhere" / "archive_warehouse"))


@pytest.mark.parametrize(
    ("arguments", "option", "wanted"),
    [
        (["move", "sales.events", "archive.e", "--columns", "id,,day"], "--columns", "empty column name"),
        (["maintain", "compact", "sales.events", "--target-file-size", "2TiB"], "--target-file-size", "1 TiB"),
        (["maintain", "health", "sales.events", "--target-file-size", "5000GiB"], "--target-file-size", "1 TiB"),
    ],
)
def test_options_that_cannot_work_are_refused_naming_them(lake: Path, arguments: list[str], option: str, wanted: str):
    result = CliRunner().invoke(cli, [*sqlite_flags(lake), *arguments])

    assert result.exit_code == 2, result.output
    assert option in result.output and wanted in result.output


def test_the_init_template_lists_the_sql_kind():
    from iceberg_ops_provider.autogen.scaffolding import CONFIG_TEMPLATE

    assert "sqlite | sql | glue" in CONFIG_TEMPLATE
