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
        ("catalog: {kind: memory}\nnamespace: sales\n", "'memory' catalog cannot be used from the command line"),
        ("catalog: {kind: postgres}\nnamespace: sales\n", "catalog kind 'postgres' is unknown"),
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
    for command in (["status"], ["history"], ["current"], ["downgrade", "base"], ["unlock"]):
        result = _run(project, "--namespace", "salse", *command)
        assert result.exit_code == 2, command
        assert "Namespace 'salse' does not exist in the catalog" in _error_line(result)
        assert "existing: sales" in _error_line(result)


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

    catalog = load_config(project / "iceberg-ops.yaml").build_catalog()
    NamespaceLock(catalog, "_iceberg_ops", "sales").acquire("crashed-first-run")  # before "sales" ever existed
    status = _run(project, "status")
    assert status.exit_code == 0 and "held by run crashed-first-run" in status.stdout
    released = _run(project, "unlock")
    assert released.exit_code == 0 and "crashed-first-run" in released.stdout


def test_plan_of_a_downgrade_does_not_list_upgrade_operations(project):
    (project / "models" / "orders.yaml").write_text(GOOD_MODEL)
    _run(project, "revision", "-m", "create", "--autogenerate")
    _run(project, "upgrade")
    plan = json.loads(_run(project, "--json", "plan", "base").stdout)
    assert plan == [{"direction": "downgrade", "version": "0001", "description": "create", "operations": []}]


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
    assert planned.exit_code == 0 and json.loads(planned.stdout)[0]["version"] == "0001"
    result = _run(project, "downgrade", "-1")
    assert result.exit_code == 0, result.stderr
    assert "No such option" not in result.stderr
