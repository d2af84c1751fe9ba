"""The project file: its keys checked by a model, every refusal naming the file, the key's path and the fix."""

from __future__ import annotations

from pathlib import Path

import pytest

from iceberg_ops_provider.cli.wording import cli_message
from iceberg_ops_provider.config import CONFIG_FILE, load_config
from iceberg_ops_provider.errors import ProjectConfigError


def _refusal(tmp_path: Path, text: str) -> str:
    project = tmp_path / CONFIG_FILE
    project.write_text(text)
    with pytest.raises(ProjectConfigError) as refused:
        load_config(project)
    message = str(refused.value)
    assert message.startswith(f"{project}: ")
    for dump in ("validation error", "pydantic", "input_value", "Value error", "type="):  # never pydantic's own dump
        assert dump not in message
    return message.removeprefix(f"{project}: ")


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("namespace: [a]\n", "'namespace' must be a non-empty string, got ['a']."),
        ("namespace: 5\n", "'namespace' must be a non-empty string, got 5."),
        ("namespace:\n", "'namespace' must be a non-empty string, got None."),
        ("meta_namespace: '  '\n", "'meta_namespace' must be a non-empty string, got '  '."),
        ("migrations_dir: {a: 1}\n", "'migrations_dir' must be a non-empty string, got {'a': 1}."),
        ("catalog: [1]\n", "'catalog' must be a mapping such as {kind: sqlite}, got [1]."),
        (
            "catalog: {kind: rest, uri: [a, b]}\n",
            "'catalog.uri' must be a single value (text, a number or true/false), got ['a', 'b'].",
        ),
        ("catalog: {kind: sqlite, name: x}\n", "'catalog' takes either 'kind' or 'name', not both."),
        ("catalog: {kind: sqlite}\nairflow_conn_id: lake\n", "set either `catalog:` or `airflow_conn_id:`, not both"),
        ("catalog:\nairflow_conn_id: lake\n", "set either `catalog:` or `airflow_conn_id:`, not both"),
    ],
)
def test_a_bad_value_names_its_key_path_and_what_it_must_be(tmp_path, text, expected):
    assert _refusal(tmp_path, text).startswith(expected)


def test_unknown_keys_get_the_closest_valid_key_and_every_problem_is_said_once(tmp_path):
    message = _refusal(tmp_path, "namspace: sales\ncolour: blue\nmodels_dir: [x]\n")
    assert message.startswith("unknown key(s) ['colour', 'namspace']; valid keys: ['airflow_conn_id', 'catalog',")
    assert "Did you mean 'namespace' for 'namspace'?" in message and "'colour' for" not in message
    assert message.endswith("'models_dir' must be a non-empty string, got ['x'].")


def test_a_file_that_is_not_a_mapping_is_refused(tmp_path):
    assert _refusal(tmp_path, "- a\n- b\n") == "expected a mapping of settings, got list."


def test_good_values_and_defaults(tmp_path):
    project = tmp_path / CONFIG_FILE
    project.write_text("namespace: sales\nmigrations_dir: m\nmodels_dir: /abs/models\ncatalog: {kind: sqlite}\n")
    config = load_config(project)
    assert (config.namespace, config.migrations_dir, config.models_dir) == (
        "sales",
        tmp_path / "m",
        Path("/abs/models"),
    )
    assert config.catalog == {"kind": "sqlite"} and config.meta_namespace is None
    project.write_text("airflow_conn_id: lake\n")
    assert (load_config(project).catalog, load_config(project).airflow_conn_id) == ({}, "lake")
    project.write_text("")
    empty = load_config(project)
    assert (empty.catalog, empty.migrations_dir, empty.models_dir) == (
        {"kind": "sqlite"},
        tmp_path / "migrations",
        tmp_path / "models",
    )


def test_missing_file_folder_and_namespace_are_worded_for_python_and_for_the_command_line(tmp_path):
    with pytest.raises(ProjectConfigError) as missing:
        load_config(tmp_path / "nope.yaml")
    assert str(missing.value) == f"Configuration file {tmp_path / 'nope.yaml'} not found. Create it " + (
        "(init_project() writes one), or pass the path of one."
    )
    assert cli_message(missing.value).endswith(
        "not found. Run `iceberg-ops init` to create one, or pass --config PATH."
    )
    with pytest.raises(ProjectConfigError) as folder:
        load_config(tmp_path)
    assert str(folder.value).endswith(f"is a folder; pass the project file itself, e.g. {tmp_path / CONFIG_FILE}.")
    assert cli_message(folder.value).endswith(f"e.g. --config {tmp_path / CONFIG_FILE}.")
    assert load_config(tmp_path / "nope.yaml", required=False).path is None
    with pytest.raises(ProjectConfigError) as no_namespace:
        load_config(tmp_path / "nope.yaml", required=False).require_namespace()
    assert str(no_namespace.value) == f"No namespace given: set `namespace:` in {CONFIG_FILE}."
    assert (
        cli_message(no_namespace.value)
        == f"No namespace given: pass --namespace NS or set `namespace:` in {CONFIG_FILE}."
    )
    for error in (missing.value, folder.value, no_namespace.value):
        assert "--" not in str(error)  # the engine states facts; the command line words them with its options
