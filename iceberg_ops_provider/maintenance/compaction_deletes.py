"""Merge-on-read delete files and compaction: which ones it refuses, and which ones a group removes.

A position delete file can go once every data file it deletes rows from is rewritten. Equality deletes
cannot be applied by PyIceberg 0.12, so a table holding any is refused.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import pyarrow.compute as pc
import pyarrow.parquet as pq
from pyiceberg.manifest import ManifestContent
from pyiceberg.table.delete_file_index import _referenced_data_file_path

from iceberg_ops_provider.errors import UnsupportedDeleteFilesError
from iceberg_ops_provider.maintenance.files import ManifestReader

if TYPE_CHECKING:
    from pyiceberg.io import FileIO
    from pyiceberg.manifest import DataFile
    from pyiceberg.table import Table
    from pyiceberg.table.snapshots import Snapshot

    from iceberg_ops_provider.maintenance.binpack import FileGroup

__all__ = ["referenced_paths", "refuse_equality_deletes", "removable_delete_files"]


def refuse_equality_deletes(table: Table, snapshot: Snapshot) -> None:
    """Raise before anything is written if the snapshot holds live equality delete files."""
    reader = ManifestReader(table.io)
    manifests = [manifest for manifest in reader.manifests(snapshot) if manifest.content == ManifestContent.DELETES]
    reader.prefetch(manifests)
    found = [e.path for m in manifests for e in reader.entries(m) if e.live and e.content == "equality_deletes"]
    if found:
        raise UnsupportedDeleteFilesError(
            f"{'.'.join(table.name())} holds {len(found)} equality delete file(s) (for example {found[0]}), which "
            "PyIceberg cannot apply, so its rows cannot be rewritten safely; nothing was written. Compact it once "
            "with an engine that applies them (Spark's rewrite_data_files) and run this again."
        )


def referenced_paths(io: FileIO, delete_file: DataFile, cache: dict[str, frozenset[str]]) -> frozenset[str]:
    """The data files a position delete file deletes rows of (from its bounds, else from its contents)."""
    path = delete_file.file_path
    if path not in cache:
        single = _referenced_data_file_path(delete_file)
        if single is not None:
            cache[path] = frozenset([single])
        else:
            with io.new_input(path).open() as stream:
                column = pq.read_table(stream, columns=["file_path"]).column("file_path")
            cache[path] = frozenset(pc.unique(column).to_pylist())
    return cache[path]


def removable_delete_files(
    io: FileIO, group: FileGroup, rewritten: set[str], removed: set[str], cache: dict[str, frozenset[str]]
) -> list[DataFile]:
    """Delete files of ``group`` whose every target is rewritten by it or by a group committed before.

    ``removed`` holds the delete files earlier groups already removed (a partition-wide delete file
    is listed for every file of its partition, so later groups of that partition see it too).
    """
    done = rewritten | {data_file.file_path for data_file in group.data_files}
    return [d for d in group.delete_files if d.file_path not in removed and referenced_paths(io, d, cache) <= done]
