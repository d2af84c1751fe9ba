"""Unknown catalog options name the valid ones and the closest (``check_option_names``).

Checked on the function, through ``CatalogFactory.build`` (nothing is created for a refused option),
and from the command line's project file.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from iceberg_ops_provider.catalogs import CatalogFactory
from iceberg_ops_provider.core.catalog_properties import check_option_names
from iceberg_ops_provider.errors import CatalogConfigError
from tests.cli.ops_support import run


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
    with pytest.raises(CatalogConfigError) as raised:
        check_option_names(kind, [key])

    text = str(raised.value)
    assert text.startswith(f"Unknown option {key!r} for the {kind!r} catalog.")
    assert text.endswith(f"Did you mean {guess!r}?")


def test_nothing_close_gets_no_guess_and_valid_names_pass():
    with pytest.raises(CatalogConfigError) as raised:
        check_option_names("sqlite", ["zzzz"])
    assert "Did you mean" not in str(raised.value)
    assert "Valid options: db_path, echo, init_catalog_tables, name, pool_pre_ping" in str(raised.value)

    check_option_names("sqlite", ["db_path", "warehouse_dir", "s3.endpoint", "echo"])
    check_option_names("rest", ["uri", "credential", "rest.sigv4-enabled", "header.X-Tenant"])
    check_option_names("pyiceberg", ["anything"])  # kinds PyIceberg checks itself are not checked here


def test_an_option_of_the_sql_kinds_on_a_remote_kind_says_what_to_pass_instead():
    with pytest.raises(CatalogConfigError, match=r"Option 'db_path' belongs to .*; the 'rest' catalog takes 'wareh"):
        check_option_names("rest", ["db_path"])


def test_the_factory_refuses_before_it_creates_anything(tmp_path: Path):
    with pytest.raises(CatalogConfigError, match=r"Unknown option 'warehouse_dri' .* Did you mean 'warehouse_dir'\?"):
        CatalogFactory.build("sqlite", db_path=tmp_path / "lake" / "catalog.db", warehouse_dri=tmp_path / "wh")

    assert not (tmp_path / "lake").exists() and not (tmp_path / "wh").exists()


def test_the_project_file_gets_the_guess_on_the_command_line(tmp_path: Path):
    config = "catalog:\n  kind: sqlite\n  db_pth: data/catalog.db\nnamespace: sales\n"
    (tmp_path / "iceberg-ops.yaml").write_text(config)
    (tmp_path / "migrations").mkdir()

    result = run(tmp_path, "status")

    assert result.returncode == 2
    project = tmp_path / "iceberg-ops.yaml"
    assert f"error: {project}, under `catalog:`: Unknown option 'db_pth' for the 'sqlite' catalog." in result.stderr
    assert result.stderr.rstrip().endswith("Did you mean 'db_path'?")
