"""Which files a table's snapshots reach, read from its own metadata, each manifest once."""

from __future__ import annotations

import logging
import os
import stat
import threading
from collections import OrderedDict, deque
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from itertools import islice
from typing import TYPE_CHECKING, ClassVar, TypeVar
from urllib.parse import urlsplit

from pyiceberg.manifest import DataFileContent, ManifestEntryStatus

from iceberg_ops_provider.core.threads import carrying_context
from iceberg_ops_provider.messages import Fact, message

if TYPE_CHECKING:
    from pyiceberg.io import FileIO
    from pyiceberg.manifest import ManifestFile
    from pyiceberg.table.snapshots import Snapshot

__all__ = ["FileEntry", "ManifestReader", "delete_files", "regular_file", "size_property", "window_map"]

log = logging.getLogger(__name__)
T = TypeVar("T")
R = TypeVar("R")

CONTENT_KINDS = {
    DataFileContent.DATA: "data",
    DataFileContent.POSITION_DELETES: "position_deletes",
    DataFileContent.EQUALITY_DELETES: "equality_deletes",
}
"""The name of each kind of file a manifest lists."""


def size_property(properties: dict[str, str], key: str, default: int, fix: Fact) -> int:
    """The table property ``key`` as a positive number of bytes (``default`` when unset); ``fix`` names the override."""
    raw = properties.get(key)
    if raw is None:
        return default
    try:
        value = int(raw)
    except ValueError:
        value = 0
    if value < 1:
        raise ValueError(
            message(
                f"Table property {key}={raw!r} is not a positive integer (bytes); fix the property, or pass {{fix}}.",
                fix=fix,
            )
        )
    return value


@dataclass(frozen=True)
class FileEntry:
    """A file a manifest lists: ``content`` is ``data``, ``position_deletes`` or ``equality_deletes``."""

    path: str
    content: str
    live: bool
    size: int


class ManifestReader:
    """Reads manifest lists and manifests of one table through ``io``, each manifest at most once."""

    _lists: ClassVar[OrderedDict[str, list[ManifestFile]]] = OrderedDict()
    """Manifest lists read lately, shared by every reader: they never change once written (their names
    are unique), and a table maintained every few commits finds most of its lists here."""

    _small_manifests: ClassVar[OrderedDict[str, list[FileEntry]]] = OrderedDict()
    """Entries of small manifests read lately, shared likewise (manifests never change either): a table
    maintained every few commits (the history table) reads mostly the same ones. Bounded in count and
    in entries per manifest, so a large table's manifests are never held here."""

    _lists_lock = threading.Lock()
    LISTS_CACHED: ClassVar[int] = 512
    SMALL_MANIFEST_ENTRIES: ClassVar[int] = 16

    def __init__(self, io: FileIO) -> None:
        self.io = io
        self._entries: dict[str, list[FileEntry]] = {}

    def manifests(self, snapshot: Snapshot) -> list[ManifestFile]:
        """The manifests of ``snapshot``'s manifest list."""
        key = snapshot.manifest_list
        with self._lists_lock:
            cached = self._lists.get(key)
            if cached is not None:
                self._lists.move_to_end(key)
                return cached
        regular_file(key)
        manifests = list(snapshot.manifests(self.io))
        with self._lists_lock:
            self._lists[key] = manifests
            while len(self._lists) > self.LISTS_CACHED:
                self._lists.popitem(last=False)
        return manifests

    def entries(self, manifest: ManifestFile) -> list[FileEntry]:
        """Every entry of ``manifest``, deleted ones included."""
        path = manifest.manifest_path
        if path in self._entries:
            return self._entries[path]
        with self._lists_lock:
            shared = self._small_manifests.get(path)
            if shared is not None:
                self._small_manifests.move_to_end(path)
        if shared is None:
            regular_file(path)
            shared = [
                FileEntry(
                    path=entry.data_file.file_path,
                    content=CONTENT_KINDS[entry.data_file.content],
                    live=entry.status != ManifestEntryStatus.DELETED,
                    size=entry.data_file.file_size_in_bytes,
                )
                for entry in manifest.fetch_manifest_entry(self.io, discard_deleted=False)
            ]
            if len(shared) <= self.SMALL_MANIFEST_ENTRIES:
                with self._lists_lock:
                    self._small_manifests[path] = shared
                    while len(self._small_manifests) > self.LISTS_CACHED:
                        self._small_manifests.popitem(last=False)
        self._entries[path] = shared
        return shared

    def prefetch(self, manifests: Iterable[ManifestFile], workers: int = 8) -> None:
        """Read many manifests in parallel (object stores answer each read with latency, not bandwidth)."""
        todo = {
            m.manifest_path: m
            for m in manifests
            if m.manifest_path not in self._entries and m.manifest_path not in self._small_manifests
        }
        if len(todo) < 4 or _local(todo):  # not worth the threads
            for manifest in todo.values():
                self.entries(manifest)
            return
        with ThreadPoolExecutor(max_workers=min(workers, len(todo))) as pool:
            list(pool.map(self.entries, todo.values()))

    def live_paths(self, manifests: Iterable[ManifestFile]) -> set[str]:
        """The files that ``manifests`` list as live."""
        manifests = list(manifests)
        self.prefetch(manifests)
        return {entry.path for manifest in manifests for entry in self.entries(manifest) if entry.live}


def regular_file(location: str) -> None:
    """Nothing, unless ``location`` is a local path to something other than a regular file.

    A pipe or a device named by a manifest list (a hostile or broken writer's) would block a read forever, or
    never end it; an object store holds no such thing. A file that is not there is left to the read to report.

    Raises:
        OSError: ``location`` is a local pipe, device, socket or folder.
    """
    parts = urlsplit(location)
    if parts.scheme.lower() not in ("", "file"):
        return
    try:
        mode = os.stat(parts.path if parts.scheme else location).st_mode
    except OSError:
        return
    if not stat.S_ISREG(mode):
        raise OSError(f"{location} is not a regular file: it is not read (a pipe or device would never end)")


def _local(paths: Iterable[str]) -> bool:
    """Whether every path is on the local file system (no latency for threads to hide)."""
    return all(path.startswith(("file:", "/")) for path in paths)


def window_map(fn: Callable[[T], R], items: Iterable[T], workers: int = 8) -> Iterator[R]:
    """``map(fn, items)`` on threads, in order, with at most ``2 * workers`` results pending.

    ``Executor.map`` submits everything at once and would hold every result of a slow consumer.
    """
    items = list(items)
    if len(items) < 2:
        yield from map(fn, items)
        return
    carried = carrying_context(fn)
    feed = iter(items)
    with ThreadPoolExecutor(max_workers=min(workers, len(items))) as pool:
        pending = deque(pool.submit(carried, item) for item in islice(feed, 2 * workers))
        while pending:
            result = pending.popleft().result()
            pending.extend(pool.submit(carried, item) for item in islice(feed, 1))
            yield result


def delete_files(io: FileIO, paths: Iterable[str], *, what: str, workers: int = 8) -> tuple[int, list[str]]:
    """Delete ``paths`` in parallel (one already gone counts); how many were, and ``path: error`` of the others.

    Failures are never raised: the commit that made the files unreachable already landed; orphan removal
    finds what is left.
    """
    paths = list(paths)
    failures: list[str] = []

    def delete(path: str) -> None:
        try:
            io.delete(path)
        except FileNotFoundError:
            pass
        except Exception as exc:
            failures.append(f"{path}: {type(exc).__name__}: {exc}")

    # A local disk answers at once: threads would cost more than they save.
    pool = None if _local(paths) else ThreadPoolExecutor(max_workers=max(1, min(workers, len(paths))))
    try:
        for done, _ in enumerate(pool.map(delete, paths) if pool else map(delete, paths), 1):
            if done % 1000 == 0:
                log.info("deleted %d of %d %s", done, len(paths), what)
    finally:
        if pool is not None:
            pool.shutdown()
    return len(paths) - len(failures), failures
