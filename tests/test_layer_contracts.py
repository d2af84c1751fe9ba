"""The contract that every catalog is opened by ``catalogs.open_catalog`` finds what it must, and only that."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from tests.layer_contracts import openings

ROOT = Path(__file__).resolve().parent.parent


def test_the_ways_to_open_a_catalog_by_hand_are_found():
    source = """
import requests
from pyiceberg.catalog import load_catalog
from pyiceberg.catalog.sql import SqlCatalog
from iceberg_ops_provider.catalogs import CatalogFactory

a = load_catalog("lake", type="rest")
b = SqlCatalog("x", uri="sqlite:///c.db")
c = CatalogFactory.build("sqlite")
d = pyiceberg.catalog.rest.RestCatalog("r", uri="http://h")
requests.Session.request = lambda *args, **kwargs: None
"""
    assert sorted(line for line, _ in openings(source)) == [7, 8, 9, 10, 11]


def test_telling_what_a_catalog_is_and_opening_through_the_one_function_are_not():
    source = """
from pyiceberg.catalog.sql import SqlCatalog
from iceberg_ops_provider.catalogs import open_catalog, from_options

catalog = open_catalog(from_options("sqlite"), access="read")
is_sql = isinstance(catalog, SqlCatalog)
session.request = bounded  # one session of one catalog, not a class
"""
    assert openings(source) == []


def test_the_package_keeps_the_contract():
    result = subprocess.run(
        [str(Path(sys.executable).parent / "lint-imports"), "--no-cache", "--contract", "one_opener_catalogs"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    assert "Every catalog is opened by one function" in result.stdout and "KEPT" in result.stdout
