"""What a new user's first mistakes print, from the real ``iceberg-ops`` on a real SQLite catalog.

A model that is not YAML says where, as the project file does; ``--target-table`` with a table that
has no model lists the models and the closest name; a catalog kind the command line does not know
lists the kinds the command line accepts (``memory`` is not one), while the Python API keeps its own list.
"""

from __future__ import annotations

import json
import tempfile
from pathlib import Path

import pytest

from iceberg_ops_provider.autogen import load_model
from iceberg_ops_provider.catalogs import CatalogFactory
from iceberg_ops_provider.config import CATALOG_KINDS
from iceberg_ops_provider.errors import ModelError, UnknownCatalogKindError
from tests.cli.ops_support import run

ORDERS = "name: orders\ncolumns:\n  - {name: id, type: long, required: true}\n"
CUSTOMERS = "name: customers\ncolumns:\n  - {name: id, type: long, required: true}\n"
CLI_KINDS = "sqlite, sql, glue, rest, hive, s3tables"
# `sort_by [id]` lacks its colon: PyYAML notices on the next line, where the key it was reading ends.
NOT_YAML = "name: orders\ncolumns:\n  - {name: id, type: long}\nsort_by [id]\nproperties: {}\n"
WHERE = (
    "not valid YAML (line 5, column 1): could not find expected ':' (while scanning a simple key on line 4, column 1)"
)


@pytest.fixture
def project(tmp_path) -> Path:
    root = tmp_path / "project"
    (root / "models").mkdir(parents=True)
    (root / "migrations").mkdir()
    (root / "iceberg-ops.yaml").write_text("catalog:\n  kind: sqlite\nnamespace: sales\n")
    (root / "models" / "orders.yaml").write_text(ORDERS)
    (root / "models" / "customers.yaml").write_text(CUSTOMERS)
    return root


def _error(result) -> str:
    lines = [line for line in result.stderr.splitlines() if line.startswith("error: ")]
    assert len(lines) == 1, result.stderr
    return lines[0]


def test_a_model_that_is_not_yaml_names_the_line_and_column_as_the_project_file_does(project):
    (project / "models" / "orders.yaml").write_text(NOT_YAML)
    model = run(project, "revision", "-m", "x", "--autogenerate")
    assert model.returncode == 2
    assert _error(model) == f"error: {project / 'models' / 'orders.yaml'}: {WHERE}"

    (project / "iceberg-ops.yaml").write_text(NOT_YAML.replace("name: orders", "namespace: sales"))
    config = run(project, "status")
    assert config.returncode == 2
    assert _error(config) == f"error: {project / 'iceberg-ops.yaml'}: {WHERE}"


def test_a_model_that_is_not_utf8_names_the_line(tmp_path):
    path = tmp_path / "orders.yaml"
    path.write_bytes(b"name: orders\ncolumns:\n  - {name: caf\xe9, type: long}\n")
    with pytest.raises(ModelError, match=r"orders\.yaml: not UTF-8 text \(byte 0xe9 on line 3\)"):
        load_model(path)


def test_a_target_table_without_a_model_lists_the_models_and_the_closest_name(project):
    result = run(project, "--json", "revision", "-m", "x", "--autogenerate", "--target-table", "ordrs")
    assert result.returncode == 2
    error = json.loads(result.stdout)
    assert error["type"] == "ModelError"
    assert error["error"] == (
        f"No model for table 'ordrs' in {project / 'models'} (its models: customers, orders). Did you mean 'orders'?"
    )
    assert not list((project / "migrations").glob("*.py"))


def test_an_unknown_catalog_kind_lists_what_the_command_line_accepts(project):
    assert ", ".join(CATALOG_KINDS) == CLI_KINDS
    flag = run(project, "--json", "--catalog", "sqlit", "status")
    assert flag.returncode == 2
    error = json.loads(flag.stdout)
    assert error["type"] == "UnknownCatalogKindError"
    assert f"Valid kinds are: {CLI_KINDS}. Did you mean 'sqlite'?" in error["error"]
    assert "memory" not in error["error"] and "CatalogFactory" not in error["error"]
    assert "--catalog-name" in error["error"]

    (project / "iceberg-ops.yaml").write_text("catalog:\n  kind: sqlit\nnamespace: sales\n")
    file = run(project, "status")
    assert file.returncode == 2
    config = project / "iceberg-ops.yaml"
    assert f"Unknown catalog kind 'sqlit' (`kind:` under `catalog:` in {config}). Valid kinds are: {CLI_KINDS}" in (
        _error(file)
    )
    assert "Did you mean 'sqlite'?" in _error(file) and "memory" not in _error(file)
    assert f"by name: `name:` under `catalog:` in {config}" in _error(file)


def test_a_connection_of_an_unknown_kind_lists_what_the_command_line_accepts(project):
    pytest.importorskip("airflow")
    env = {
        "AIRFLOW_HOME": tempfile.mkdtemp(prefix="iceberg_ops_kinds_airflow_"),
        "AIRFLOW_CONN_BROKEN": json.dumps({"conn_type": "iceberg_ops", "extra": {"kind": "sqllite"}}),
    }
    result = run(project, "--conn-id", "broken", "status", env=env)
    assert result.returncode == 2
    line = _error(result)
    assert "Unknown catalog kind 'sqllite' (the `kind` extra of Airflow connection 'broken')" in line
    assert f"Valid kinds are: {CLI_KINDS}, pyiceberg" in line and "Did you mean 'sqlite'?" in line
    assert "memory" not in line and "CatalogFactory" not in line


def test_the_python_api_keeps_listing_every_kind_it_builds():
    with pytest.raises(UnknownCatalogKindError) as info:
        CatalogFactory.build("sqlit")
    assert "Valid kinds are: sqlite, memory, sql" in str(info.value)
    assert "Did you mean 'sqlite'?" in str(info.value) and "CatalogFactory.load" in str(info.value)
    assert info.value.valid_kinds[: len(CatalogFactory.KINDS)] == CatalogFactory.KINDS


def test_a_target_table_without_autogenerate_or_with_a_namespace_names_the_options_or_the_arguments(project):
    from iceberg_ops_provider.config import load_config
    from iceberg_ops_provider.runner.commands import revision

    alone = run(project, "revision", "-m", "x", "--target-table", "orders")
    assert alone.returncode == 2
    assert _error(alone) == "error: --target-table only applies with --autogenerate."
    dotted = run(project, "revision", "-m", "x", "--autogenerate", "--target-table", "sales.orders")
    assert _error(dotted) == (
        "error: --target-table takes a bare table name (it lives in the namespace), got 'sales.orders'."
    )

    config = load_config(project / "iceberg-ops.yaml")
    with pytest.raises(ModelError, match=r"^target_table only applies with autogenerate_from_models=True\.$"):
        revision(config, "x", target_table="orders")
    assert not list((project / "migrations").glob("*.py"))
