"""Bad input: exit 2, one clear line, nothing written."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from iceberg_ops_provider.cli import cli

GOOD_MODEL = "name: orders\ncolumns:\n  - {name: id, type: long, required: true}\n  - {name: qty, type: int}\n"


@pytest.fixture
def project(tmp_path) -> Path:
    root = tmp_path / "p"
    assert CliRunner().invoke(cli, ["--namespace", "sales", "init", str(root)]).exit_code == 0
    return root


def _run(project: Path, *args: str):
    return CliRunner().invoke(cli, ["--config", str(project / "iceberg-ops.yaml"), *args])


def _files(project: Path) -> set[Path]:
    return {p for p in project.rglob("*") if "local_data" not in p.parts}


def _error_line(result) -> str:
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("error: ")
    return lines[0]


@pytest.mark.parametrize(
    ("model", "message"),
    [
        ("name: orders\ncolumns: [\n", "not valid YAML"),
        ("name: orders\ncolumns: [{name: id, type: longg}]\n", "unknown type name 'longg'"),
    ],
)
def test_bad_models(project, model, message):
    (project / "models" / "orders.yaml").write_text(model)
    before = _files(project)
    result = _run(project, "revision", "-m", "x", "--autogenerate")
    assert result.exit_code == 2
    assert message in _error_line(result) and "orders.yaml" in _error_line(result)
    assert _files(project) == before


def test_forbidden_promotion_in_a_model(project):
    (project / "models" / "orders.yaml").write_text(GOOD_MODEL)
    assert _run(project, "revision", "-m", "create", "--autogenerate").exit_code == 0
    assert _run(project, "upgrade").exit_code == 0
    (project / "models" / "orders.yaml").write_text(GOOD_MODEL.replace("type: int", "type: string"))
    before = _files(project)
    result = _run(project, "revision", "-m", "bad", "--autogenerate")
    assert result.exit_code == 2
    assert "Cannot change column 'qty' from int to string" in _error_line(result)
    assert _files(project) == before


def test_missing_config(tmp_path):
    result = CliRunner().invoke(cli, ["--config", str(tmp_path / "nope.yaml"), "status"])
    assert result.exit_code == 2
    assert "not found. Run `iceberg-ops init`" in _error_line(result)


@pytest.mark.parametrize(
    ("config", "message"),
    [
        ("catalog: {kind: memory}\nnamespace: sales\n", "'memory' catalog cannot be used from a project"),
        ("catalog: {kind: postgres}\nnamespace: sales\n", "Unknown catalog kind 'postgres'"),
        ("namespace: sales\nmigration_dir: m\n", "unknown key(s) ['migration_dir']"),
        ("namespace: [a]\n", "'namespace' must be a non-empty string"),
        ("catalog: [1]\n", "'catalog' must be a mapping"),
        ("namespace: sales\ncatalog: {kind: sqlite\n", "not valid YAML"),
        ("catalog: {kind: sqlite}\n", "No namespace given"),
    ],
)
def test_bad_configuration(project, config, message):
    (project / "iceberg-ops.yaml").write_text(config)
    result = _run(project, "upgrade")
    assert result.exit_code == 2
    assert message in _error_line(result)
    assert not (project / "local_data").exists()


def test_memory_catalog_option_is_rejected(project):
    result = _run(project, "--catalog", "memory", "status")
    assert result.exit_code == 2 and "its state is gone when the command exits" in _error_line(result)


def test_unknown_namespace(project):
    (project / "models" / "orders.yaml").write_text(GOOD_MODEL)
    _run(project, "revision", "-m", "create", "--autogenerate")
    assert _run(project, "upgrade").exit_code == 0
    for command in (["downgrade", "base"], ["unlock"]):
        result = _run(project, "--namespace", "salse", *command)
        assert result.exit_code == 2, command
        assert "Namespace 'salse' does not exist in the catalog" in _error_line(result)
        assert "existing: sales" in _error_line(result)
    # Reading commands answer as Alembic does: base, with what is pending.
    status = _run(project, "--namespace", "salse", "status")
    assert status.exit_code == 0 and "current:   base" in status.stdout and "pending:   1" in status.stdout
    assert "namespace 'salse' does not exist yet" in status.stdout
    assert _run(project, "--namespace", "salse", "current").stdout.strip() == "base"
    history = _run(project, "--namespace", "salse", "history")
    assert history.exit_code == 0 and "No history yet: base, 1 pending." in history.stdout


def test_bad_target_and_json_errors(project):
    result = _run(project, "--json", "upgrade", "sideways")
    assert result.exit_code == 2
    assert json.loads(result.stdout)["exit_code"] == 2
    assert "is not valid" in _error_line(result)


def test_usage_errors_exit_2(project):
    assert _run(project, "revision").exit_code == 2  # missing -m
    assert _run(project, "frobnicate").exit_code == 2


def test_failed_migration_exits_1_and_verbose_shows_the_traceback(project):
    (project / "migrations" / "0001_boom.py").write_text(
        "from iceberg_ops_provider.migration import BaseMigration\n"
        "class Migration(BaseMigration):\n    def upgrade(self, ctx):\n        raise RuntimeError('boom')\n"
    )
    result = _run(project, "upgrade")
    assert result.exit_code == 1 and "RuntimeError: boom" in result.stderr
    assert result.stderr.count("0001 FAILED") == 1  # the step line once, then the error line
    verbose = _run(project, "-v", "upgrade")
    assert verbose.exit_code == 1 and "Traceback" in verbose.stderr


def test_init_refuses_to_overwrite(project):
    before = (project / "iceberg-ops.yaml").read_text()
    result = CliRunner().invoke(cli, ["init", str(project)])
    assert result.exit_code == 2 and "refusing to overwrite" in _error_line(result)
    assert (project / "iceberg-ops.yaml").read_text() == before


def test_autogenerate_with_pending_migrations_is_refused(project):
    (project / "models" / "orders.yaml").write_text(GOOD_MODEL)
    assert _run(project, "revision", "-m", "create", "--autogenerate").exit_code == 0
    result = _run(project, "revision", "-m", "again", "--autogenerate")
    assert result.exit_code == 1 and "upgrade first" in _error_line(result)


def test_no_changes_writes_nothing(project):
    (project / "models" / "orders.yaml").write_text(GOOD_MODEL)
    _run(project, "revision", "-m", "create", "--autogenerate")
    _run(project, "upgrade")
    before = _files(project)
    result = _run(project, "revision", "-m", "nothing", "--autogenerate")
    assert result.exit_code == 0 and "nothing written" in result.output
    assert _files(project) == before


def test_plain_revision_skeleton_imports(project):
    result = _run(project, "revision", "-m", "Backfill: e-mails!")
    path = project / "migrations" / "0001_backfill_e_mails.py"
    assert result.exit_code == 0 and path.exists()
    assert _run(project, "plan").output.startswith("upgrade 0001 Backfill: e-mails!")


def test_revision_writes_into_the_per_namespace_folder(project):
    (project / "migrations" / "sales").mkdir()
    assert _run(project, "revision", "-m", "first").exit_code == 0
    assert (project / "migrations" / "sales" / "0001_first.py").exists()
    assert _run(project, "plan").stdout.startswith("upgrade 0001 first")


def test_unlock_after_a_crashed_first_run(project):
    from iceberg_ops_provider.config import load_config
    from iceberg_ops_provider.history import NamespaceLock

    catalog = load_config(project / "iceberg-ops.yaml").open_catalog(access="create")
    NamespaceLock(catalog, "_iceberg_ops", "sales").acquire("crashed-first-run")  # before "sales" ever existed
    status = _run(project, "status")
    assert status.exit_code == 0 and "held by run crashed-first-run" in status.stdout
    released = _run(project, "unlock")
    assert released.exit_code == 0 and "crashed-first-run" in released.stdout


def test_plan_of_a_downgrade_does_not_list_upgrade_operations(project):
    (project / "models" / "orders.yaml").write_text(GOOD_MODEL)
    _run(project, "revision", "-m", "create", "--autogenerate")
    _run(project, "upgrade")
    plan = json.loads(_run(project, "--json", "plan", "base").stdout)["steps"]
    shown = ("direction", "version", "description", "risk", "operations")
    # The downgrade's own operations, from a dry run of its body: the table is empty, so a review.
    assert [{key: step[key] for key in shown} for step in plan] == [
        {
            "direction": "downgrade",
            "version": "0001",
            "description": "create",
            "risk": "review",
            "operations": [{"operation": "drop table orders", "risk": "review"}],
        }
    ]


def test_a_rollback_that_loses_data_needs_yes_and_plan_says_why(project):
    (project / "models" / "orders.yaml").write_text(GOOD_MODEL)
    _run(project, "revision", "-m", "create", "--autogenerate")
    assert _run(project, "upgrade").exit_code == 0
    from iceberg_ops_provider.config import load_config

    catalog = load_config(project / "iceberg-ops.yaml").open_catalog()
    import pyarrow as pa

    table = catalog.load_table("sales.orders")
    table.append(pa.table({"id": [1], "qty": [2]}, schema=table.schema().as_arrow()))
    plan = json.loads(_run(project, "--json", "plan", "base").stdout)["steps"]
    assert plan[0]["risk"] == "destructive"
    refused = _run(project, "downgrade", "base")
    assert (
        refused.exit_code == 2
        and "loses data (0001: drop table orders)" in refused.stderr
        and "--yes" in refused.stderr
    )
    assert "Usage:" not in refused.stderr and refused.stderr.count("\n") == 1  # one line, not a usage block
    as_json = _run(project, "--json", "downgrade", "base")
    assert json.loads(as_json.stdout)["type"] == "ConfirmationRequiredError" and as_json.exit_code == 2
    assert catalog.table_exists("sales.orders")
    assert _run(project, "downgrade", "base", "--yes").exit_code == 0
    assert not catalog.table_exists("sales.orders")


def test_relative_targets_parse_as_arguments(project):
    (project / "migrations" / "0001_a.py").write_text(
        "from iceberg_ops_provider.migration import BaseMigration\n\n\n"
        "class Migration(BaseMigration):\n    def upgrade(self, ctx):\n        pass\n\n"
        "    def downgrade(self, ctx):\n        pass\n"
    )
    assert _run(project, "upgrade", "+1").exit_code == 0
    assert "points down; use downgrade" in _error_line(_run(project, "upgrade", "-999"))
    assert "needs N of at least 1" in _error_line(_run(project, "downgrade", "-0"))
    planned = _run(project, "--json", "plan", "-1")
    assert planned.exit_code == 0 and json.loads(planned.stdout)["steps"][0]["version"] == "0001"
    result = _run(project, "downgrade", "-1")
    assert result.exit_code == 0, result.stderr
    assert "No such option" not in result.stderr


# --- unreadable configuration, unreachable catalogs, refused credentials ---------------------------------


def _run_real(*args: str, **kwargs):
    """The installed ``iceberg-ops`` console script as a real process (forked warm: ``tests.support.warm_cli``)."""
    import sys

    from tests.support import warm_cli

    return warm_cli.run(Path(sys.executable).parent / "iceberg-ops", args, timeout=120, **kwargs)


def _closed_port() -> int:
    import socket

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def _write_config(project: Path, catalog: dict[str, object]) -> Path:
    import yaml

    config = project / "iceberg-ops.yaml"
    config.write_text(yaml.safe_dump({"catalog": catalog, "namespace": "sales"}))
    return config


def test_a_config_file_that_is_not_utf8_names_the_file(project):
    config = project / "iceberg-ops.yaml"
    config.write_bytes(b"catalog: {kind: sqlite}\nnamespace: caf\xe9\n")
    result = _run(project, "status")
    assert result.exit_code == 2
    line = _error_line(result)
    assert f"{config}: not UTF-8 text (byte 0xe9 on line 2)" in line and "UnicodeDecodeError" not in line


def test_a_config_path_that_is_a_folder_or_missing_names_it(project):
    result = CliRunner().invoke(cli, ["--config", str(project), "status"])
    assert result.exit_code == 2 and f"{project}' is a directory" in result.stderr
    missing = CliRunner().invoke(cli, ["--config", str(project / "nope" / "iceberg-ops.yaml"), "status"])
    assert missing.exit_code == 2 and str(project / "nope" / "iceberg-ops.yaml") in _error_line(missing)


def test_invalid_yaml_says_where(project):
    (project / "iceberg-ops.yaml").write_text("namespace: sales\ncatalog: {kind: sqlite\n")
    line = _error_line(_run(project, "status"))
    assert "not valid YAML (line 3, column 1)" in line


def test_a_db_path_that_is_not_an_sqlite_database_exits_2_naming_the_file(project, tmp_path):
    notes = tmp_path / "notes.txt"
    notes.write_text("not a database\n" * 50)
    result = _run(project, "--db-path", str(notes), "status")
    assert result.exit_code == 2
    line = _error_line(result)
    assert f"The catalog database {notes} is not an SQLite database" in line and "--db-path" in line
    assert notes.read_text() == "not a database\n" * 50


def test_a_named_catalog_without_uri_names_this_projects_settings(project, monkeypatch, tmp_path):
    monkeypatch.setenv("PYICEBERG_HOME", str(tmp_path))
    result = _run(project, "--catalog-name", "lake_without_uri", "status")
    assert result.exit_code == 2
    line = _error_line(result)
    assert "--uri" not in line and "its uri is missing" in line
    assert f"`uri:` under `catalog:` in {project / 'iceberg-ops.yaml'}" in line
    assert "PYICEBERG_CATALOG__LAKE_WITHOUT_URI__URI" in line


@pytest.mark.parametrize("host", ["127.0.0.1:{port}", "no-such-host.invalid:8181"])
def test_an_unreachable_rest_catalog_exits_1_naming_the_url(project, host):
    uri = "http://" + host.format(port=_closed_port())
    _write_config(project, {"kind": "rest", "uri": uri, "timeout": 10})
    result = _run(project, "--json", "status")
    assert result.exit_code == 1
    line = _error_line(result)
    assert line.startswith(f"error: The catalog at {uri} could not be reached (GET /v1/config: ")
    assert json.loads(result.stdout) == {
        "error": line.removeprefix("error: "),
        "type": "CatalogUnavailableError",
        "exit_code": 1,
    }


def test_a_hive_metastore_on_a_closed_port_exits_1_with_one_line_as_a_real_subprocess(project):
    port = _closed_port()
    config = _write_config(project, {"kind": "hive", "uri": f"thrift://127.0.0.1:{port}"})
    result = _run_real("--config", str(config), "status")
    assert result.returncode == 1, result.stderr
    assert result.stderr.count("\n") == 1, result.stderr  # Thrift's own log lines stay out of it
    assert result.stderr.startswith(f"error: The catalog at thrift://127.0.0.1:{port} could not be reached (Thrift: ")
    assert f"Hive metastore at 127.0.0.1:{port} is running" in result.stderr


def test_an_unreadable_pyiceberg_yaml_is_named_as_a_real_subprocess(project, tmp_path):
    home = tmp_path / "home"
    home.mkdir()
    (home / ".pyiceberg.yaml").write_bytes(b"catalog:\n  lake:\n    uri: http://caf\xe9\n")
    import os

    env = {**os.environ, "PYICEBERG_HOME": str(home), "HOME": str(home)}
    result = _run_real("--config", str(project / "iceberg-ops.yaml"), "status", env=env, cwd=tmp_path)
    assert result.returncode == 2, result.stderr
    assert result.stderr.count("\n") == 1, result.stderr
    assert f"PyIceberg's configuration file {home / '.pyiceberg.yaml'} could not be read" in result.stderr
    assert "not UTF-8" in result.stderr


@pytest.mark.backends
def test_a_sigv4_signature_mismatch_exits_2_naming_the_endpoint_and_settings(project, seaweedfs, unique_name):
    seaweedfs.create_table_bucket(unique_name)
    _write_config(
        project,
        {
            "kind": "rest",
            "uri": seaweedfs.iceberg_uri,
            "warehouse": f"s3://{unique_name}",
            "rest.sigv4-enabled": "true",
            "rest.signing-name": "s3tables",
            "rest.signing-region": "us-east-1",
            "client.access-key-id": "admin",
            "client.secret-access-key": "not-the-secret",
            "client.region": "us-east-1",
        },
    )
    for command in (["status"], ["upgrade"], ["unlock"]):
        result = _run(project, "--json", *command)
        assert result.exit_code == 2, (command, result.stderr)
        line = _error_line(result)
        assert line.startswith(f"error: The catalog at {seaweedfs.iceberg_uri} refused access (403 "), line
        assert "client.secret-access-key" in line and "rest.signing-region" in line
        assert "not-the-secret" not in line
        assert json.loads(result.stdout)["type"] == "CatalogAuthError"


@pytest.mark.backends
def test_glue_without_aws_credentials_exits_2_naming_the_variables(project, moto_server):
    _write_config(project, {"kind": "glue", "glue.endpoint": moto_server.endpoint, "glue.region": "us-east-1"})
    env = {
        "AWS_ACCESS_KEY_ID": None,
        "AWS_SECRET_ACCESS_KEY": None,
        "AWS_SESSION_TOKEN": None,
        "AWS_PROFILE": None,
        "AWS_SHARED_CREDENTIALS_FILE": "/nonexistent/credentials",
        "AWS_CONFIG_FILE": "/nonexistent/config",
        "AWS_EC2_METADATA_DISABLED": "true",
    }
    result = CliRunner().invoke(cli, ["--config", str(project / "iceberg-ops.yaml"), "status"], env=env)
    assert result.exit_code == 2
    line = _error_line(result)
    assert line.startswith(
        f"error: No AWS credentials were found to sign the requests to the catalog at {moto_server.endpoint}"
    )
    assert "AWS_ACCESS_KEY_ID" in line and "glue.access-key-id" in line


def test_autogenerate_with_no_models_says_so(project):
    result = _run(project, "revision", "-m", "x", "--autogenerate")
    assert result.exit_code == 2
    assert "No table models in" in _error_line(result) and "declare a table first" in _error_line(result)
    assert not list((project / "migrations").glob("*.py"))


def test_repair_shows_what_it_changes_and_needs_yes(project):
    path = project / "migrations" / "0001_a.py"
    path.write_text(
        "from iceberg_ops_provider.migration import BaseMigration\n\n\n"
        "class Migration(BaseMigration):\n    def upgrade(self, ctx):\n        pass\n"
    )
    assert _run(project, "upgrade").exit_code == 0
    path.write_text(path.read_text() + "\nEDITED = True\n")
    assert _run(project, "check").exit_code == 1
    refused = _run(project, "repair")
    assert refused.exit_code == 2 and "--yes" in refused.stderr
    assert "re-record the checksum of changed file 0001" in refused.stderr and "Usage:" not in refused.stderr
    applied = _run(project, "repair", "--yes")
    assert applied.exit_code == 0 and "repaired: re-recorded the checksum of changed file 0001" in applied.stdout
    assert _run(project, "check").exit_code == 0
    assert "Nothing to repair." in _run(project, "repair").stdout
    events = _run(project, "--json", "history", "--events")
    assert events.exit_code == 0 and [e["event"] for e in json.loads(events.stdout)] == ["applied", "repair"]
    assert "re-recorded the checksum" in _run(project, "history", "--events").stdout


def test_meta_namespace_option_and_init_example_model(project):
    assert (project / "models" / "_example.yaml").read_text().startswith("# An example table model.")
    assert "# meta_namespace:" in (project / "iceberg-ops.yaml").read_text()
    (project / "migrations" / "0001_a.py").write_text(
        "from iceberg_ops_provider.migration import BaseMigration\n\n\n"
        "class Migration(BaseMigration):\n    def upgrade(self, ctx):\n        pass\n"
    )
    assert _run(project, "--meta-namespace", "ops_meta", "upgrade").exit_code == 0
    assert _run(project, "--meta-namespace", "ops_meta", "current").stdout.strip() == "0001"
    assert _run(project, "current").stdout.strip() == "base"  # the default meta-namespace has no history
    assert _run(project, "check").exit_code == 1
