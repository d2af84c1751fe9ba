"""init_project and create_revision: numbering, slugs, and never overwriting."""

from __future__ import annotations

import pytest

from iceberg_ops_provider.config import load_config
from iceberg_ops_provider.errors import ScaffoldingError
from iceberg_ops_provider.scaffolding import create_revision, init_project, next_version, slugify


def test_init_project_writes_a_loadable_config(tmp_path):
    created = init_project(tmp_path / "p", namespace="sales")
    assert [p.name for p in created] == ["iceberg-ops.yaml", "migrations", "models"]
    config = load_config(tmp_path / "p" / "iceberg-ops.yaml")
    assert config.namespace == "sales" and config.catalog == {"kind": "sqlite"}
    assert config.migrations_dir == (tmp_path / "p" / "migrations").resolve()
    with pytest.raises(ScaffoldingError, match="refusing to overwrite"):
        init_project(tmp_path / "p")


def test_revisions_are_numbered_after_the_highest(tmp_path):
    first = create_revision(tmp_path, "create orders")
    assert first.name == "0001_create_orders.py"
    (tmp_path / "0041_manual.py").write_text("")
    assert next_version(tmp_path) == "0042"
    assert create_revision(tmp_path, "Add e-mail!", content="x = 1\n").read_text() == "x = 1\n"
    assert (tmp_path / "0042_add_e_mail.py").exists()
    with pytest.raises(ScaffoldingError, match="needs a message"):
        create_revision(tmp_path, "  ")


def test_slugify():
    assert slugify("Rename email -> customer_email") == "rename_email_customer_email"
    assert slugify("!!!") == "revision"
    assert len(slugify("x" * 200)) <= 48


def test_config_without_a_file_resolves_folders_next_to_where_it_was_looked_for(tmp_path):
    config = load_config(tmp_path / "iceberg-ops.yaml", required=False)
    assert config.path is None
    assert config.migrations_dir == tmp_path.resolve() / "migrations"
    assert config.models_dir == tmp_path.resolve() / "models"
