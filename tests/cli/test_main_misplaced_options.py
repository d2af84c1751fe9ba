"""Options a command does not have: an option after ``upgrade``/``downgrade`` is not read as TARGET, a global
option after a command says where it goes, and a command of another migration tool gets ours suggested."""

from __future__ import annotations

import pytest
from click.testing import CliRunner

from iceberg_ops_provider.cli import cli


def _run(*args: str):
    return CliRunner().invoke(cli, list(args))


@pytest.mark.parametrize("command", ["upgrade", "downgrade", "stamp", "plan"])
def test_an_unknown_option_after_a_target_command_is_an_unknown_option_not_a_target(command: str):
    result = _run(command, "--bogus")

    assert result.exit_code == 2
    assert "No such option '--bogus'" in result.output
    assert "Target" not in result.output


def test_dry_run_after_upgrade_points_to_plan():
    result = _run("upgrade", "--dry-run")

    assert result.exit_code == 2
    assert "No such option '--dry-run'" in result.output
    assert "iceberg-ops plan" in result.output


def test_a_misspelt_option_of_a_target_command_gets_its_close_spelling():
    result = _run("downgrade", "--allow-change", "0")

    assert result.exit_code == 2
    assert "Did you mean '--allow-changed'?" in result.output


@pytest.mark.parametrize(
    ("args", "option", "command"),
    [
        (["upgrade", "--config", "other.yaml"], "--config", "upgrade"),
        (["downgrade", "--conn-id=lake", "base"], "--conn-id", "downgrade"),
        (["status", "--config", "other.yaml"], "--config", "status"),
        (["maintain", "health", "sales.orders", "--conn-id", "lake"], "--conn-id", "maintain health"),
    ],
)
def test_a_global_option_after_the_command_says_to_put_it_before(args: list[str], option: str, command: str):
    result = _run(*args)

    assert result.exit_code == 2
    assert f"{option} is an option of iceberg-ops itself, not of {command}: put it before the command" in (
        " ".join(result.output.split())
    )


def test_relative_targets_still_parse_as_targets(tmp_path):
    result = _run(
        "--migrations-dir",
        str(tmp_path),
        "--catalog",
        "sqlite",
        "--db-path",
        str(tmp_path / "c.db"),
        "--warehouse",
        str(tmp_path / "wh"),
        "plan",
        "-1",
    )

    assert "No such option" not in result.output


@pytest.mark.parametrize(("typed", "meant"), [("migrate", "upgrade"), ("rollback", "downgrade"), ("upgrad", "upgrade")])
def test_a_command_of_another_tool_or_a_misspelt_one_gets_a_suggestion(typed: str, meant: str):
    result = _run(typed)

    assert result.exit_code == 2
    assert f"No such command '{typed}'. Did you mean '{meant}'?" in result.output
