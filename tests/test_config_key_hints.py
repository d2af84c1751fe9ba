"""A misspelt key of the project file gets the closest valid one, as misspelt names elsewhere do."""

from __future__ import annotations

from pathlib import Path

import pytest

from iceberg_ops_provider.config import load_config
from iceberg_ops_provider.errors import ProjectConfigError


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
    from iceberg_ops_provider.errors import CatalogConfigError

    project = tmp_path / "iceberg-ops.yaml"
    project.write_text("catalog:\n  kind: sqlite\n  db_pth: lake.db\nnamespace: sales\n")
    with pytest.raises(CatalogConfigError) as refused:
        load_config(project).build_catalog()
    text = str(refused.value)
    assert text.startswith(f"{project}, under `catalog:`: Unknown option 'db_pth'")
    assert "Did you mean 'db_path'?" in text
    assert not (tmp_path / "local_data").exists()
