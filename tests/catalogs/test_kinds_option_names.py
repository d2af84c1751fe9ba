"""Unknown catalog options and misspelt keys of the project file name the valid ones and the closest.

An unknown option is a problem of the spec (``from_options`` and ``from_file`` never raise), worded
where it was set, and refused when the spec is opened, before anything is created. Checked on the
parser, through ``CatalogFactory.build``, on the project file, and from the command line.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from iceberg_ops_provider.catalogs import CatalogFactory, from_connection, from_file, from_options
from iceberg_ops_provider.config import load_config
from iceberg_ops_provider.errors import CatalogConfigError, ProjectConfigError
from tests.cli.ops_support import run


def _problem(kind: str, key: str) -> str:
    spec = from_options(kind, **{key: "x"})
    (problem,) = spec.problems
    assert problem.key == key
    return str(problem.text)


@pytest.mark.parametrize(
    ("kind", "key", "guess"),
    [
        ("sqlite", "db_pth", "db_path"),
        ("sqlite", "warehouse_directory", "warehouse_dir"),
        ("memory", "warehous_dir", "warehouse_dir"),
        ("sql", "ur", "uri"),
        ("sql", "pool_pre_pin", "pool_pre_ping"),
        ("rest", "credentail", "credential"),
        ("glue", "regoin", "region"),
        ("hive", "urii", "uri"),
    ],
)
def test_an_unknown_option_names_the_closest_valid_one(kind: str, key: str, guess: str):
    text = (
        _problem(kind, key)
        if kind != "sql"
        else str(from_options(kind, uri="sqlite:////c.db", **{key: 1}).problems[0].text)
    )

    assert text.startswith(f"the `{key}` option is not an option of the {kind!r} catalog")
    assert text.endswith(f"Did you mean {guess!r}?")


def test_nothing_close_gets_no_guess_and_valid_names_pass():
    text = _problem("sqlite", "zzzz")
    assert "Did you mean" not in text
    assert (
        "valid options: db_path, echo, init_catalog_tables, name, pool_pre_ping, schema_version, warehouse_dir" in text
    )

    assert not from_options("sqlite", db_path="/c.db", warehouse_dir="/w", echo=True, **{"s3.endpoint": "x"}).problems
    rest = {"uri": "http://h", "credential": "a:b", "rest.sigv4-enabled": "true", "header.X-Tenant": "t"}
    assert not from_options("rest", **rest).problems
    assert not from_options("pyiceberg", anything="goes", type="rest").problems  # PyIceberg checks its own


def test_an_option_of_the_sql_kinds_on_a_remote_kind_says_what_to_pass_instead():
    text = _problem("rest", "db_path")
    assert text.startswith("the `db_path` option belongs to the 'sqlite' kind; the 'rest' catalog takes 'warehouse'")
    assert _problem("glue", "warehouse_dir").startswith("the `warehouse_dir` option belongs to the 'sqlite', 'memory'")


def test_every_unknown_option_is_named_at_once():
    spec = from_options("sqlite", db_pth="c.db", warehouse_dri="w")
    assert [problem.key for problem in spec.problems] == ["db_pth", "warehouse_dri"]
    with pytest.raises(CatalogConfigError) as raised:
        CatalogFactory.build("sqlite", db_pth="c.db", warehouse_dri="w")
    assert "Did you mean 'db_path'?" in str(raised.value) and "Did you mean 'warehouse_dir'?" in str(raised.value)


def test_the_factory_refuses_before_it_creates_anything(tmp_path: Path):
    with pytest.raises(CatalogConfigError, match=r"the `warehouse_dri` option .* Did you mean 'warehouse_dir'\?"):
        CatalogFactory.build("sqlite", db_path=tmp_path / "lake" / "catalog.db", warehouse_dri=tmp_path / "wh")

    assert list(tmp_path.iterdir()) == []


def test_the_option_is_named_where_it_was_set(tmp_path: Path):
    project = tmp_path / "iceberg-ops.yaml"
    spec = from_file({"kind": "sqlite", "db_pth": "lake.db"}, file=project, root=tmp_path)
    assert str(spec.problems[0].text).startswith(f"`db_pth:` under `catalog:` in {project} is not an option of")
    spec = from_connection("lake", "iceberg_ops", extra={"kind": "sqlite", "db_pth": "lake.db"})
    assert str(spec.problems[0].text).startswith("the `db_pth` extra of Airflow connection 'lake' is not an option of")


# --- the project file ------------------------------------------------------------------------------------


def test_the_project_file_gets_the_guess_on_the_command_line(tmp_path: Path):
    config = "catalog:\n  kind: sqlite\n  db_pth: data/catalog.db\nnamespace: sales\n"
    (tmp_path / "iceberg-ops.yaml").write_text(config)
    (tmp_path / "migrations").mkdir()

    result = run(tmp_path, "status")

    assert result.returncode == 2
    project = tmp_path / "iceberg-ops.yaml"
    assert f"error: `db_pth:` under `catalog:` in {project} is not an option of the 'sqlite' catalog" in result.stderr
    assert result.stderr.rstrip().endswith("Did you mean 'db_path'?")
    assert sorted(path.name for path in tmp_path.iterdir()) == ["iceberg-ops.yaml", "migrations"]


def test_a_misspelt_top_level_key_is_refused_with_the_closest_valid_key(tmp_path: Path):
    project = tmp_path / "iceberg-ops.yaml"
    project.write_text("catalog:\n  kind: sqlite\nnamspace: sales\nmigratons_dir: migrations\n")
    with pytest.raises(ProjectConfigError) as refused:
        load_config(project)
    text = str(refused.value)
    assert str(project) in text
    assert "Did you mean 'migrations_dir' for 'migratons_dir', 'namespace' for 'namspace'?" in text


def test_an_unrelated_key_gets_no_guess(tmp_path: Path):
    project = tmp_path / "iceberg-ops.yaml"
    project.write_text("catalog:\n  kind: sqlite\nnamespace: sales\ncolour: blue\n")
    with pytest.raises(ProjectConfigError) as refused:
        load_config(project)
    assert "unknown key(s) ['colour']" in str(refused.value) and "Did you mean" not in str(refused.value)


def test_a_misspelt_catalog_option_names_the_file(tmp_path: Path):
    project = tmp_path / "iceberg-ops.yaml"
    project.write_text("catalog:\n  kind: sqlite\n  db_pth: lake.db\nnamespace: sales\n")
    config = load_config(project)  # reading the file is fine: the catalog is refused when it is opened
    for access in ("read", "write", "create"):
        with pytest.raises(CatalogConfigError) as refused:
            config.open_catalog(access=access)
        text = str(refused.value)
        assert text.startswith(f"`db_pth:` under `catalog:` in {project} is not an option of the 'sqlite' catalog")
        assert "Did you mean 'db_path'?" in text
    assert not (tmp_path / "local_data").exists()
