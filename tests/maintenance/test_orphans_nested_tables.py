"""Orphan removal leaves alone the files of a table whose location lies inside the cleaned table's folder.

Two tables on a real SQLite catalog, the inner one created with a location inside the outer one's
folder, both holding rows; orphan removal of the outer table deletes its own orphans only, names the
inner table, and the inner table reads every row afterwards. When the catalog cannot say where one of
its tables lives (its metadata file is gone), nothing is deleted. The command line reports the inner
table and takes ``--no-check-nested-tables``.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pyarrow as pa
import pytest

from iceberg_ops_provider.errors import FileListingError
from iceberg_ops_provider.maintenance.orphans import remove_orphan_files
from tests.cli.ops_support import run, sqlite_catalog, sqlite_flags

SCHEMA = pa.schema([pa.field("id", pa.int64())])
OLD = time.time() - 10 * 24 * 3600


def _age(folder: Path) -> None:
    """Make every file under ``folder`` ten days old, so the age guard keeps none of them."""
    for path in folder.rglob("*"):
        if path.is_file():
            os.utime(path, (OLD, OLD))


def _nested_pair(root: Path):
    catalog = sqlite_catalog(root)
    catalog.create_namespace("sales")
    outer = catalog.create_table("sales.outer", SCHEMA)
    outer.append(pa.table({"id": pa.array(range(10), pa.int64())}))
    outer_folder = Path(outer.location().removeprefix("file://"))
    catalog.create_namespace_if_not_exists("archive")  # another namespace: every namespace is looked in
    inner = catalog.create_table("archive.inner", SCHEMA, location=f"{outer.location()}/archive_inner")
    for start in (100, 200):
        inner.append(pa.table({"id": pa.array(range(start, start + 5), pa.int64())}))
    orphan = outer_folder / "data" / "left-behind.parquet"
    orphan.write_bytes(b"not referenced by anything")
    _age(outer_folder)
    return catalog, outer, inner, orphan


def _files(folder: Path) -> set[Path]:
    return {path for path in folder.rglob("*") if path.is_file()}


def test_an_inner_tables_files_survive_the_outer_tables_orphan_removal(tmp_path: Path):
    catalog, outer, inner, orphan = _nested_pair(tmp_path)
    inner_folder = Path(inner.location().removeprefix("file://"))
    inner_files = _files(inner_folder)
    assert len(inner_files) >= 6  # two data files, two manifest lists, manifests, metadata files

    result = remove_orphan_files(outer)

    assert result.orphan_file_locations == [orphan.as_uri()] and not orphan.exists()
    assert result.nested_tables == [f"archive.inner: {inner_folder.as_uri()}"]
    assert result.kept_nested_files_count == len(inner_files)
    assert _files(inner_folder) == inner_files
    reloaded = catalog.load_table("archive.inner")
    assert sorted(reloaded.scan().to_arrow().column("id").to_pylist()) == [*range(100, 105), *range(200, 205)]
    assert sorted(catalog.load_table("sales.outer").scan().to_arrow().column("id").to_pylist()) == list(range(10))


def test_without_the_check_the_inner_tables_files_look_like_orphans(tmp_path: Path):
    """What the guard prevents: the same removal, unguarded, would take the inner table's files (dry run)."""
    _, outer, inner, orphan = _nested_pair(tmp_path)
    inner_folder = Path(inner.location().removeprefix("file://"))

    result = remove_orphan_files(outer, dry_run=True, check_nested_tables=False)

    doomed = {Path(location.removeprefix("file://")) for location in result.orphan_file_locations}
    assert orphan in doomed and _files(inner_folder) <= doomed
    assert result.nested_tables == []


def test_nothing_is_deleted_when_the_catalog_cannot_say_where_a_table_lives(tmp_path: Path):
    catalog, outer, _inner, orphan = _nested_pair(tmp_path)
    broken = catalog.create_table("archive.broken", SCHEMA, location=str(tmp_path / "elsewhere"))
    Path(broken.metadata_location.removeprefix("file://")).unlink()  # the catalog points at a missing file

    with pytest.raises(FileListingError) as refused:
        remove_orphan_files(outer)

    text = str(refused.value)
    assert "archive.broken" in text and "nothing was deleted" in text and "check_nested_tables=False" in text
    assert orphan.exists()
    assert catalog.load_table("archive.inner").scan().to_arrow().num_rows == 10


def test_the_command_line_names_the_inner_table_and_words_the_opt_out_as_a_flag(tmp_path: Path):
    catalog, _outer, inner, orphan = _nested_pair(tmp_path)
    broken = catalog.create_table("archive.broken", SCHEMA, location=str(tmp_path / "elsewhere"))
    Path(broken.metadata_location.removeprefix("file://")).unlink()

    refused = run(tmp_path, *sqlite_flags(tmp_path), "maintain", "orphans", "sales.outer")
    assert refused.returncode != 0 and "--no-check-nested-tables" in refused.stderr, refused.stderr
    assert "check_nested_tables=" not in refused.stderr and orphan.exists()

    catalog.drop_table("archive.broken")
    done = run(tmp_path, *sqlite_flags(tmp_path), "maintain", "orphans", "sales.outer")
    assert done.returncode == 0, done.stderr
    assert "left alone, table inside: archive.inner" in done.stdout and not orphan.exists()

    as_json = run(tmp_path, *sqlite_flags(tmp_path), "--json", "maintain", "orphans", "sales.outer", "--dry-run")
    document = json.loads(as_json.stdout)
    inner_location = Path(inner.location().removeprefix("file://")).as_uri()
    assert document["nested_tables"] == [f"archive.inner: {inner_location}"], document
    assert document["orphan_file_locations"] == [] and document["kept_nested_files_count"] > 0
