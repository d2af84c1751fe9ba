"""``--conn-id`` and ``airflow_conn_id:``: the CLI builds the catalog from an Airflow connection, mapped as
the hook maps it, so the project file holds no secrets. Airflow resolves ``AIRFLOW_CONN_<ID>``
environment variables (JSON) without a metadata database; the CLI runs for real, in-process and as
a subprocess."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from dataclasses import replace
from pathlib import Path

import pytest
from click.testing import CliRunner

from iceberg_ops_provider.cli import cli
from iceberg_ops_provider.cli.airflow_connections import read_airflow_connection
from iceberg_ops_provider.cli.catalog_flags import CatalogFlags, with_flags
from iceberg_ops_provider.config import load_config
from iceberg_ops_provider.errors import CatalogConfigError, ProjectConfigError
from tests.support.lake import Lake

# Airflow reads its configuration once, when first imported: keep it out of the home folder.
os.environ.setdefault("AIRFLOW_HOME", tempfile.mkdtemp(prefix="iceberg_ops_conn_id_airflow_"))

BIN = Path(sys.executable).parent / "iceberg-ops"
MIGRATION = (
    "import pyarrow as pa\n"
    "from iceberg_ops_provider.migration import BaseMigration\n\n\n"
    "class Migration(BaseMigration):\n"
    "    def upgrade(self, ctx):\n"
    "        ctx.create_table('orders', pa.schema([pa.field('id', pa.int64(), nullable=False)]))\n\n"
    "    def downgrade(self, ctx):\n"
    "        ctx.drop_table('orders')\n"
)


@pytest.fixture
def connection(tmp_path, monkeypatch) -> Path:
    """``AIRFLOW_CONN_MY_ICEBERG``: a SQLite catalog outside the project; returns its folder."""
    where = tmp_path / "connection_catalog"
    extra = Lake(where).extra
    monkeypatch.setenv("AIRFLOW_CONN_MY_ICEBERG", json.dumps({"conn_type": "iceberg_ops", "extra": extra}))
    return where


@pytest.fixture
def project(tmp_path) -> Path:
    """A project whose file names no catalog, with one migration."""
    root = tmp_path / "project"
    (root / "migrations").mkdir(parents=True)
    (root / "iceberg-ops.yaml").write_text("namespace: sales\n")
    (root / "migrations" / "0001_create_orders.py").write_text(MIGRATION)
    return root


def _run(project: Path, *args: str, env: dict[str, str | None] | None = None):
    return CliRunner().invoke(cli, ["--config", str(project / "iceberg-ops.yaml"), *args], env=env)


def _error_line(result) -> str:
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("error: ")
    return lines[0]


def _connection_catalog(where: Path):
    return Lake(where).catalog()


def test_conn_id_builds_the_catalog_of_the_connection(connection, project):
    upgraded = _run(project, "--conn-id", "my_iceberg", "--json", "upgrade")
    assert upgraded.exit_code == 0, upgraded.stderr
    assert [(r["version"], r["status"]) for r in json.loads(upgraded.stdout)] == [("0001", "applied")]
    assert _connection_catalog(connection).table_exists("sales.orders")  # in the connection's catalog
    assert not (project / "local_data").exists()  # not in the project's default one

    status = _run(project, "--conn-id", "my_iceberg", "--json", "status")
    assert status.exit_code == 0, status.stderr
    assert json.loads(status.stdout)["current"] == "0001"
    unlocked = _run(project, "--conn-id", "my_iceberg", "unlock")
    assert unlocked.exit_code == 0 and "not locked" in unlocked.stdout


def test_airflow_conn_id_in_the_project_file(connection, project):
    (project / "iceberg-ops.yaml").write_text("airflow_conn_id: my_iceberg\nnamespace: sales\n")
    assert _run(project, "upgrade").exit_code == 0
    assert _connection_catalog(connection).table_exists("sales.orders")
    current = _run(project, "current")
    assert current.exit_code == 0 and current.stdout.strip() == "0001"
    # --catalog on the command line wins over the file's connection: the project's own (empty) catalog
    local = _run(project, "--catalog", "sqlite", "current")
    assert local.exit_code == 0 and "0001" not in local.stdout
    assert not (project / "local_data").exists()  # read, not created


@pytest.mark.parametrize(
    ("options", "message"),
    [
        (["--catalog", "sqlite"], "Pass only one of --conn-id and --catalog"),
        (["--catalog-name", "lake"], "Pass only one of --conn-id and --catalog-name"),
        (["--db-path", "x.db"], "--db-path and --warehouse apply to the sqlite catalog of the project file"),
    ],
)
def test_conn_id_refuses_other_ways_of_choosing_the_catalog(connection, project, options, message):
    result = _run(project, "--conn-id", "my_iceberg", *options, "status")
    assert result.exit_code == 2
    assert message in _error_line(result)
    assert not connection.exists()  # nothing was opened


def test_a_project_file_with_both_catalog_and_airflow_conn_id_is_refused(project):
    (project / "iceberg-ops.yaml").write_text("airflow_conn_id: my_iceberg\ncatalog: {kind: sqlite}\nnamespace: s\n")
    result = _run(project, "status")
    assert result.exit_code == 2
    assert "set either `catalog:` or `airflow_conn_id:`, not both" in _error_line(result)


def test_an_undefined_connection_names_the_environment_variable(project):
    result = _run(project, "--conn-id", "no_such_connection", "--json", "status")
    assert result.exit_code == 2
    line = _error_line(result)
    assert "Airflow connection 'no_such_connection' is not defined (--conn-id" in line
    assert "AIRFLOW_CONN_NO_SUCH_CONNECTION" in line
    assert json.loads(result.stdout)["type"] == "ProjectConfigError"


def test_a_connection_variable_that_airflow_cannot_read_is_named(project, monkeypatch):
    monkeypatch.setenv("AIRFLOW_CONN_HALF_WRITTEN", '{"conn_type": "iceberg_ops", "extra": ')
    result = _run(project, "--conn-id", "half_written", "status")
    assert result.exit_code == 2
    assert "could not be read from the environment variable AIRFLOW_CONN_HALF_WRITTEN" in _error_line(result)


def test_a_connection_that_does_not_describe_a_catalog_names_the_connection(project, monkeypatch):
    extra = {"kind": "postgres"}
    monkeypatch.setenv("AIRFLOW_CONN_BROKEN", json.dumps({"conn_type": "iceberg_ops", "extra": extra}))
    result = _run(project, "--conn-id", "broken", "status")
    assert result.exit_code == 2
    line = _error_line(result)
    assert "Unknown catalog kind 'postgres' (the `kind` extra of Airflow connection 'broken')" in line


def test_the_timeout_comes_from_the_connection_unless_given_on_the_command_line(connection, project, monkeypatch):
    extra = {"kind": "sqlite", "db_path": str(connection / "catalog.db"), "timeout": "12"}
    monkeypatch.setenv("AIRFLOW_CONN_SLOW", json.dumps({"conn_type": "iceberg_ops", "extra": extra}))
    config = load_config(project / "iceberg-ops.yaml", connection_reader=read_airflow_connection)
    assert with_flags(config, CatalogFlags(conn_id="slow")).catalog_timeout == 12
    assert with_flags(config, CatalogFlags(conn_id="slow", timeout=3)).catalog_timeout == 3
    assert with_flags(config, CatalogFlags(conn_id="my_iceberg")).catalog_timeout == 60
    extra["timeout"] = "soon"
    monkeypatch.setenv("AIRFLOW_CONN_SLOW", json.dumps({"conn_type": "iceberg_ops", "extra": extra}))
    slow = with_flags(config, CatalogFlags(conn_id="slow"))
    with pytest.raises(CatalogConfigError, match="the `timeout` extra of Airflow connection 'slow' must be a number"):
        slow.open_catalog()
    result = _run(project, "--conn-id", "slow", "status")  # the command line says the same
    assert result.exit_code == 2 and "the `timeout` extra of Airflow connection 'slow'" in _error_line(result)


def test_a_configuration_without_a_connection_reader_says_how_to_read_the_connection(connection, project):
    config = with_flags(load_config(project / "iceberg-ops.yaml"), CatalogFlags(conn_id="my_iceberg"))
    with pytest.raises(ProjectConfigError, match="without a connection reader") as raised:
        config.open_catalog()
    assert "connection_reader=" in str(raised.value) and "iceberg_ops_provider.cli.airflow_connections" in str(
        raised.value
    )
    with_reader = replace(config, connection_reader=read_airflow_connection)
    assert with_flags(with_reader, CatalogFlags()).connection_reader is read_airflow_connection  # kept
    assert with_reader.open_catalog(access="create").list_namespaces() == []  # the connection's (empty) catalog
    assert with_reader == config  # the reader is not part of the settings compared


@pytest.mark.long  # seconds of real subprocesses or catalogs; make test-all runs it
def test_conn_id_as_a_real_subprocess_keeps_stdout_for_json(connection, project, tmp_path):
    # In unit-test mode Airflow also logs a line while it loads: that goes to stderr too.
    env = {**os.environ, "AIRFLOW_HOME": str(tmp_path / "airflow_home"), "AIRFLOW__CORE__UNIT_TEST_MODE": "True"}
    command = [str(BIN), "--config", str(project / "iceberg-ops.yaml"), "--conn-id", "my_iceberg", "--json"]
    upgraded = subprocess.run([*command, "upgrade"], capture_output=True, text=True, env=env, timeout=300)
    assert upgraded.returncode == 0, upgraded.stderr
    assert json.loads(upgraded.stdout)[0]["version"] == "0001"  # nothing but JSON on stdout
    status = subprocess.run([*command, "status"], capture_output=True, text=True, env=env, timeout=300)
    assert status.returncode == 0, status.stderr
    assert json.loads(status.stdout)["current"] == "0001"
    assert _connection_catalog(connection).table_exists("sales.orders")


def _without_airflow(project: Path, *args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    """The CLI in a fresh interpreter where ``import airflow`` fails, as if it were not installed."""
    code = (
        "import sys\n"
        "sys.modules['airflow'] = None\n"
        "from iceberg_ops_provider.cli import main\n"
        f"sys.argv = ['iceberg-ops', '--config', {str(project / 'iceberg-ops.yaml')!r}, *{list(args)!r}]\n"
        "try:\n"
        "    main()\n"
        "finally:\n"
        "    print('airflow imported' if any(m.startswith('airflow.') for m in sys.modules) else 'no airflow',"
        " file=sys.stderr)\n"
    )
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=300)


def test_without_airflow_conn_id_says_what_to_install_and_the_rest_works(connection, project, tmp_path):
    env = {**os.environ, "AIRFLOW_HOME": str(tmp_path / "airflow_home")}
    missing = _without_airflow(project, "--conn-id", "my_iceberg", "status", env=env)
    assert missing.returncode == 2, missing.stderr
    first, last = missing.stderr.strip().splitlines()
    assert first.startswith("error: Reading the Airflow connection 'my_iceberg' (--conn-id")
    assert "pip install apache-airflow" in first and "--catalog" in first
    assert last == "no airflow"

    plain = _without_airflow(project, "--json", "upgrade", env=env)  # the project's own sqlite catalog
    assert plain.returncode == 0, plain.stderr
    assert plain.stderr.strip().splitlines()[-1] == "no airflow"
    assert json.loads(plain.stdout)[0]["status"] == "applied"


@pytest.mark.backends
def test_a_sigv4_rest_catalog_whose_secrets_stay_in_the_connection(seaweedfs, unique_name, project, monkeypatch):
    seaweedfs.create_table_bucket(unique_name)
    extra = {
        "kind": "rest",
        "warehouse": f"s3://{unique_name}",
        "rest.sigv4-enabled": "true",
        "rest.signing-name": "s3tables",
        "rest.signing-region": "us-east-1",
        "client.access-key-id": "admin",
        "client.secret-access-key": "password",
        "client.region": "us-east-1",
        **seaweedfs.s3_properties(),
    }
    connection = {"conn_type": "iceberg_ops", "host": seaweedfs.iceberg_uri, "extra": extra}
    monkeypatch.setenv("AIRFLOW_CONN_LAKE", json.dumps(connection))
    (project / "iceberg-ops.yaml").write_text("namespace: sales\nmeta_namespace: iceberg_ops\n")  # S3 Tables names
    assert "password" not in (project / "iceberg-ops.yaml").read_text()
    for command in (["upgrade"], ["status"], ["unlock"]):
        result = _run(project, "--conn-id", "lake", *command)
        assert result.exit_code == 0, (command, result.stderr)

    extra["client.secret-access-key"] = "not-the-secret"
    monkeypatch.setenv("AIRFLOW_CONN_LAKE", json.dumps(connection))
    refused = _run(project, "--conn-id", "lake", "status")
    assert refused.exit_code == 2
    line = _error_line(refused)
    assert line.startswith(f"error: The catalog at {seaweedfs.iceberg_uri} refused access (403 ")
    assert "client.secret-access-key" in line and "not-the-secret" not in line


@pytest.mark.backends
def test_a_missing_table_bucket_or_a_uri_that_is_no_catalog_is_a_configuration_error(
    seaweedfs, unique_name, project, monkeypatch
):
    seaweedfs.create_table_bucket(unique_name)  # a real bucket exists, just not the one named
    extra = {
        "kind": "s3tables",
        "warehouse": f"arn:aws:s3tables:us-east-1:admin:bucket/{unique_name}-missing",
        "region": "us-east-1",
        "client.access-key-id": "admin",
        "client.secret-access-key": "password",
        **seaweedfs.s3_properties(),
    }
    connection = {"conn_type": "iceberg_ops", "host": seaweedfs.iceberg_uri, "extra": extra}
    monkeypatch.setenv("AIRFLOW_CONN_LAKE", json.dumps(connection))
    (project / "iceberg-ops.yaml").write_text("namespace: sales\n")
    for command in ("status", "upgrade"):
        result = _run(project, "--conn-id", "lake", command)
        assert result.exit_code == 2, (command, result.stderr)
        line = _error_line(result)
        assert "warehouse" in line and f"{unique_name}-missing" in line and "table bucket" in line, line

    connection["host"] = seaweedfs.s3_endpoint  # the S3 port, not the catalog's
    monkeypatch.setenv("AIRFLOW_CONN_LAKE", json.dumps(connection))
    wrong = _run(project, "--conn-id", "lake", "status")
    assert wrong.exit_code == 2
    line = _error_line(wrong)
    assert (
        "is not an Iceberg REST catalog" in line and "Check the Host (or the `uri` extra) of Airflow connection" in line
    )
