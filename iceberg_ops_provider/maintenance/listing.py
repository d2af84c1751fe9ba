"""Listing the files under a location through a table's FileIO, on any storage PyIceberg can use.

PyIceberg's ``FileIO`` cannot list, so its file system is used. Any error ends the listing with
:class:`FileListingError`, so a caller that deletes only after the listing finished never acts on a partial one.
"""

from __future__ import annotations

import logging
import os
import posixpath
import time
from collections.abc import Callable, Iterator
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any
from urllib.parse import urlparse

from iceberg_ops_provider.errors import FileListingError, MaintenanceError, MissingExtraError

if TYPE_CHECKING:
    from pyiceberg.io import FileIO

__all__ = ["EXTRA_FOR_MODULE", "ListedFile", "contains", "list_files", "normalize_location"]

log = logging.getLogger(__name__)

EXTRA_FOR_MODULE = {"s3fs": "s3fs", "gcsfs": "gcsfs", "adlfs": "adlfs", "huggingface_hub": "hf"}
"""The ``iceberg-ops`` extra that installs each optional file-system package PyIceberg imports."""

_SAME_SCHEME = {"s3a": "s3", "s3n": "s3", "gcs": "gs", "": "file"}
_RECURSIVE_FROM_DEPTH = 2  # the root (0) and its children (1) one level at a time, deeper ones whole
_PROGRESS_EVERY_S = 10.0


@dataclass(frozen=True)
class ListedFile:
    """One file found under the listed location, spelled like the listed root (size and time when known)."""

    location: str
    size: int | None
    modified_ms: int | None


def normalize_location(location: str) -> str:
    """``location`` in one spelling per file: equivalent schemes merged, local paths made absolute.

    Object-store keys are kept as they are (``a//b`` and ``a/b`` are different keys there); local
    paths are normalised (``/t/./data//f`` is ``/t/data/f``).
    """
    parsed = urlparse(location)
    scheme = parsed.scheme.lower()
    if len(scheme) == 1:  # a Windows drive letter, not a scheme
        scheme = ""
    scheme = _SAME_SCHEME.get(scheme, scheme)
    if scheme == "file":
        path = parsed.path if parsed.scheme else location
        if parsed.netloc:
            # PyArrow's file system reads file://localhost/p as the relative path localhost/p, not /p:
            # keep the host, so such a location never counts as lying under a table's /p.
            path = f"//{parsed.netloc}{path}"
        return "file://" + posixpath.normpath(os.path.abspath(path))
    return f"{scheme}://{parsed.netloc}{parsed.path}".rstrip("/")


def contains(root: str, location: str) -> bool:
    """Whether ``location`` is ``root`` itself or lies under it (``s3://b/t`` does not contain ``s3://b/t2``)."""
    inner, outer = normalize_location(location), normalize_location(root).rstrip("/")
    if not inner.startswith("file://") and "/../" in f"{urlparse(inner).path}/":
        return False  # object stores take ``..`` literally, but nothing here should need it
    return inner == outer or inner.startswith(outer + "/")


@dataclass(frozen=True)
class _Entry:
    path: str
    is_dir: bool
    size: int | None
    modified_ms: int | None


class _ArrowLister:
    def __init__(self, io: Any, location: str) -> None:
        scheme, netloc, _ = io.parse_location(location, io.properties)
        self.io = io
        self.fs = io.fs_by_scheme(scheme, netloc)

    def root(self, location: str) -> str:
        return _strip_uri(self.io.parse_location(location, self.io.properties)[2]).rstrip("/") or "/"

    def list_dir(self, path: str, *, recursive: bool, allow_missing: bool) -> list[_Entry]:
        from pyarrow.fs import FileSelector, FileType

        infos = self.fs.get_file_info(FileSelector(path, recursive=recursive, allow_not_found=allow_missing))
        return [
            _Entry(
                path=_strip_uri(info.path),
                is_dir=info.type == FileType.Directory,
                size=info.size,
                modified_ms=info.mtime_ns // 1_000_000 if info.mtime_ns is not None else None,
            )
            for info in infos
            if info.type in (FileType.File, FileType.Directory)
        ]


class _FsspecLister:
    def __init__(self, io: Any, location: str) -> None:
        parsed = urlparse(location)
        scheme = parsed.scheme if len(parsed.scheme) > 1 else "file"
        adls = scheme in {"abfs", "abfss", "wasb", "wasbs"}
        self.fs = io.get_fs(scheme, parsed.hostname if adls else None)

    def root(self, location: str) -> str:
        return str(self.fs._strip_protocol(location)).rstrip("/") or "/"

    def list_dir(self, path: str, *, recursive: bool, allow_missing: bool) -> list[_Entry]:
        try:
            if recursive:
                infos = list(self.fs.find(path, detail=True, withdirs=False).values())
            else:
                infos = self.fs.ls(path, detail=True)
        except FileNotFoundError:
            if allow_missing:
                return []
            raise
        return [
            _Entry(
                path=str(info["name"]).rstrip("/"),
                is_dir=info.get("type") == "directory",
                size=info.get("size"),
                modified_ms=_fsspec_mtime_ms(info),
            )
            for info in infos
            if str(info["name"]).rstrip("/") != path.rstrip("/")
        ]


def _strip_uri(path: str) -> str:
    """A file-system path, for file systems (HDFS) that answer with full URIs."""
    return urlparse(path).path if "://" in path else path


def _fsspec_mtime_ms(info: dict[str, Any]) -> int | None:
    """The modification time an fsspec implementation reports, under whichever key it uses."""
    for key in ("mtime", "LastModified", "last_modified", "updated", "modified"):
        value = info.get(key)
        if value is None:
            continue
        if isinstance(value, datetime):
            return int(value.timestamp() * 1000)
        if isinstance(value, int | float):
            return int(value * 1000)
        if isinstance(value, str):
            try:
                return int(datetime.fromisoformat(value.replace("Z", "+00:00")).timestamp() * 1000)
            except ValueError:
                continue
    return None


def _lister(io: FileIO, location: str) -> _ArrowLister | _FsspecLister:
    """The lister for ``io``'s file system at ``location``; names the extra when a package is missing."""
    scheme = urlparse(location).scheme or "file"
    kind = type(io).__name__
    try:
        if hasattr(io, "fs_by_scheme") and hasattr(io, "parse_location"):
            return _ArrowLister(io, location)
        if hasattr(io, "get_fs"):
            return _FsspecLister(io, location)
    except ImportError as exc:
        module = (exc.name or "").split(".")[0]
        if module in EXTRA_FOR_MODULE:
            raise MissingExtraError(
                f"Listing {scheme}:// locations through {kind}", EXTRA_FOR_MODULE[module], exc.name
            ) from exc
        raise MaintenanceError(
            f"{kind} cannot open {scheme}:// locations here ({exc}). Install a PyArrow build with that file "
            "system, or set the catalog property py-io-impl=pyiceberg.io.fsspec.FsspecFileIO and install its "
            f"package (for example pip install 'iceberg-ops[{_extra_for_scheme(scheme)}]')."
        ) from exc
    except ValueError as exc:
        raise MaintenanceError(f"{kind} cannot list {location!r}: {exc}. Use a location PyIceberg can open.") from exc
    raise MaintenanceError(
        f"The table's FileIO {type(io).__module__}.{kind} cannot list files. Set the catalog property py-io-impl "
        "to pyiceberg.io.pyarrow.PyArrowFileIO or pyiceberg.io.fsspec.FsspecFileIO."
    )


def _extra_for_scheme(scheme: str) -> str:
    return {"s3": "s3fs", "s3a": "s3fs", "s3n": "s3fs", "gs": "gcsfs", "gcs": "gcsfs", "hf": "hf"}.get(scheme, "adlfs")


def list_files(
    io: FileIO, location: str, *, skip: Callable[[str, bool], bool] | None = None, workers: int = 8
) -> Iterator[ListedFile]:
    """Every file under ``location`` (none when it is missing), ``workers`` directories listed at a time.

    ``skip(name, is_directory)`` leaves a file, or a directory and all below it, out.

    Raises:
        FileListingError: A directory could not be listed (the files yielded so far are not all).
        MissingExtraError: The package of the location's file system is not installed.
        MaintenanceError: ``io`` cannot list, or not this scheme.
    """
    lister = _lister(io, location)
    root_path = lister.root(location)
    prefix = location.rstrip("/")
    counted = {"files": 0, "dirs": 0}
    last_report = time.monotonic()

    def relative(path: str) -> str:
        if path == root_path or not path.startswith(root_path.rstrip("/") + "/"):
            raise FileListingError(
                f"Listing {location!r} returned {path!r}, which is not under it; nothing was deleted. "
                "Report this with the table's FileIO and location."
            )
        return path[len(root_path.rstrip("/")) + 1 :]

    def hidden(rel: str, is_dir: bool) -> bool:
        if skip is None:
            return False
        parts = rel.split("/")
        return any(skip(part, is_dir or i < len(parts) - 1) for i, part in enumerate(parts))

    def task(path: str, depth: int) -> tuple[int, list[_Entry]]:
        recursive = depth >= _RECURSIVE_FROM_DEPTH
        return depth, lister.list_dir(path, recursive=recursive, allow_missing=depth == 0)

    pool = ThreadPoolExecutor(max_workers=max(1, workers), thread_name_prefix="list")
    pending: set[Future[tuple[int, list[_Entry]]]] = {pool.submit(task, root_path, 0)}
    try:
        while pending:
            done, pending = wait(pending, return_when=FIRST_COMPLETED)
            for future in done:
                try:
                    depth, entries = future.result()
                except (FileListingError, MissingExtraError):
                    raise
                except Exception as exc:
                    raise FileListingError(
                        f"Listing {location!r} failed part way ({type(exc).__name__}: {exc}); nothing was "
                        "deleted. Run again when the storage answers (check permissions and credentials)."
                    ) from exc
                counted["dirs"] += 1
                children = []
                for entry in entries:
                    rel = relative(entry.path)
                    if hidden(rel, entry.is_dir):
                        continue
                    if not entry.is_dir:
                        counted["files"] += 1
                        yield ListedFile(f"{prefix}/{rel}", entry.size, entry.modified_ms)
                    elif depth < _RECURSIVE_FROM_DEPTH:
                        children.append(entry.path)
                # Said before the children are listed: the moment a directory is done and its children not
                # started yet is one a concurrent change can land in (the tests act on this line).
                log.debug("listed a directory of %s (%d to go)", location, len(pending) + len(children))
                for child in children:
                    pending.add(pool.submit(task, child, depth + 1))
            if time.monotonic() - last_report >= _PROGRESS_EVERY_S:
                last_report = time.monotonic()
                log.info("listing %s: %d files in %d directories so far", location, counted["files"], counted["dirs"])
    finally:
        for future in pending:
            future.cancel()
        pool.shutdown(wait=True, cancel_futures=True)
    log.info("listed %s: %d files in %d directories", location, counted["files"], counted["dirs"])
