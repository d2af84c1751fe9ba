"""remove_orphan_files: exactly the unreferenced old files go, on local files and on S3; nothing else, ever."""

from __future__ import annotations

import contextlib
import importlib.util
import logging
import os
import shutil
import socket
import threading
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import boto3
import pyarrow as pa
import pyarrow.fs as pafs
import pyarrow.parquet as pq
import pytest
from pyiceberg.catalog.sql import SqlCatalog
from pyiceberg.expressions import EqualTo
from pyiceberg.io.fsspec import FsspecFileIO

from iceberg_ops_provider.catalogs import CatalogFactory
from iceberg_ops_provider.errors import FileListingError, MissingExtraError, UnsafeLocationError
from iceberg_ops_provider.maintenance import expire_snapshots
from iceberg_ops_provider.maintenance import listing as listing_module
from iceberg_ops_provider.maintenance.listing import contains, list_files, normalize_location
from iceberg_ops_provider.maintenance.orphans import remove_orphan_files
from tests.support.servers import boto_kwargs

SCHEMA = pa.schema([pa.field("id", pa.int64()), pa.field("name", pa.string())])
OLD = time.time() - 10 * 24 * 3600


def _rows(start: int, count: int) -> pa.Table:
    return pa.table({"id": pa.array(range(start, start + count), pa.int64()), "name": [f"n{i}" for i in range(count)]})


def _ids(table, **scan) -> list[int]:
    return sorted(table.scan(**scan).to_arrow().column("id").to_pylist())


def _with_history(catalog, name: str = "sales.events"):
    """Appends, an overwrite, a delete, a tag, a branch with its own commit, then a metadata-only expiry."""
    catalog.create_namespace_if_not_exists("sales")
    table = catalog.create_table(name, SCHEMA)
    for batch in range(4):
        table.append(_rows(batch * 10, 10))
    table.manage_snapshots().create_tag(table.snapshots()[1].snapshot_id, "audit").commit()
    table.overwrite(_rows(100, 5), overwrite_filter=EqualTo("id", 3))
    table.delete(EqualTo("id", 15))
    table.manage_snapshots().create_branch(table.current_snapshot().snapshot_id, "dev").commit()
    table.append(_rows(200, 3), branch="dev")
    table.append(_rows(300, 3))
    # The expired snapshots' files stay on storage: they are orphans now.
    expire_snapshots(table, older_than=datetime.now(UTC), retain_last=2, delete_files=False)
    return table


def _referenced_by_pyiceberg(table) -> set[str]:
    """Every file the table references, by PyIceberg's own inspection (an oracle independent of the code)."""
    table.refresh()
    paths = {table.metadata_location, *table.inspect.metadata_log_entries().column("file").to_pylist()}
    paths |= {s.manifest_list for s in table.snapshots()}
    paths |= set(table.inspect.all_manifests().column("path").to_pylist())
    paths |= set(table.inspect.all_files().column("file_path").to_pylist())
    return {normalize_location(p) for p in paths}


def _reads(table) -> dict[object, list[int]]:
    """What every snapshot and ref reads."""
    reads: dict[object, list[int]] = {s.snapshot_id: _ids(table, snapshot_id=s.snapshot_id) for s in table.snapshots()}
    reads["dev"] = sorted(table.scan().use_ref("dev").to_arrow().column("id").to_pylist())
    reads["audit"] = sorted(table.scan().use_ref("audit").to_arrow().column("id").to_pylist())
    return reads


def _disk(root: Path) -> set[str]:
    return {normalize_location(os.path.join(d, f)) for d, _, files in os.walk(root) for f in files}


def _plant(path: Path, old: bool = True) -> str:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(b"left by a crashed writer")
    if old:
        os.utime(path, (OLD, OLD))
    return normalize_location(str(path))


def _age_everything(root: Path) -> None:
    for directory, _, files in os.walk(root):
        for name in files:
            os.utime(os.path.join(directory, name), (OLD, OLD))


def test_exactly_the_planted_and_expired_files_older_than_the_guard_go(catalog, tmp_path: Path):
    table = _with_history(catalog)
    root = tmp_path / "warehouse" / "sales" / "events"
    _age_everything(root)
    planted = {
        _plant(root / "data" / "00000-crashed-writer.parquet"),
        _plant(root / "metadata" / "snap-lost-commit.avro"),
        _plant(root / "data" / "name=x" / "deep" / "stray.parquet"),
        _plant(root / "stray-at-the-top"),
    }
    young = _plant(root / "data" / "in-flight.parquet", old=False)
    hidden = {_plant(root / "data" / ".part.crc"), _plant(root / "_temporary" / "0" / "part")}
    expected = _disk(root) - _referenced_by_pyiceberg(table) - {young} - hidden
    assert planted < expected  # the expired snapshots' own files are orphans too
    reads, before = _reads(table), _disk(root)

    planned = remove_orphan_files(table, dry_run=True)

    assert _disk(root) == before
    assert {normalize_location(p) for p in planned.orphan_file_locations} == expected
    done = remove_orphan_files(table)
    assert {k: v for k, v in planned.to_json().items() if k not in {"dry_run", "older_than"}} == {
        k: v for k, v in done.to_json().items() if k not in {"dry_run", "older_than"}
    }
    assert done.deleted_orphan_files_count == len(expected) and done.failed_deletes == []
    assert done.kept_recent_files_count == 1 and done.orphan_file_locations == sorted(done.orphan_file_locations)
    assert _disk(root) == before - expected  # the young orphan and hidden files stay
    assert _reads(catalog.load_table("sales.events")) == reads  # every snapshot, tag and branch reads the same
    assert remove_orphan_files(table).orphan_file_locations == []


def test_a_young_orphan_is_kept_until_it_is_older_than_the_guard(catalog, tmp_path: Path):
    table = _with_history(catalog)
    root = tmp_path / "warehouse" / "sales" / "events"
    young = _plant(root / "data" / "just-written.parquet", old=False)

    default = remove_orphan_files(table)  # three days: nothing written a moment ago goes
    assert default.orphan_file_locations == [] and young in _disk(root)
    assert default.kept_recent_files_count >= 1
    naive_now = datetime.now(UTC).replace(tzinfo=None) + timedelta(seconds=1)  # a naive datetime is UTC
    later = remove_orphan_files(table, older_than=naive_now)
    assert young in {normalize_location(p) for p in later.orphan_file_locations} and young not in _disk(root)


@pytest.mark.parametrize(
    "outside",
    [
        lambda root: root + "2",  # a sibling whose name starts with the table's
        lambda root: root.rsplit("/", 1)[0],  # the namespace folder holding other tables
        lambda root: root + "/../other",
        lambda root: root.removeprefix("file://").rsplit("/", 1)[0] + "/events2/data",
        lambda root: "s3://bucket" + root.removeprefix("file://"),
        lambda root: "data",  # relative: resolved against the working directory, not the table
    ],
)
def test_a_location_outside_the_table_is_refused_and_nothing_is_touched(catalog, tmp_path: Path, outside):
    table = _with_history(catalog)
    root = tmp_path / "warehouse" / "sales" / "events"
    neighbour = _plant(tmp_path / "warehouse" / "sales" / "events2" / "data" / "x.parquet")
    orphan = _plant(root / "data" / "orphan.parquet")
    before = _disk(tmp_path / "warehouse")

    with pytest.raises(UnsafeLocationError, match=r"is not under the location of table sales\.events"):
        remove_orphan_files(table, location=outside(table.location()), older_than=datetime.now(UTC))

    assert _disk(tmp_path / "warehouse") == before and {neighbour, orphan} <= before


def test_a_location_inside_cleans_only_there_in_any_spelling(catalog, tmp_path: Path):
    table = _with_history(catalog)
    root = tmp_path / "warehouse" / "sales" / "events"
    in_data = _plant(root / "data" / "orphan.parquet")
    in_metadata = _plant(root / "metadata" / "orphan.avro")

    result = remove_orphan_files(table, location=str(root / "data"))  # a plain path for a file:// table

    assert in_data in {normalize_location(p) for p in result.orphan_file_locations}
    assert all(contains(str(root / "data"), p) for p in result.orphan_file_locations)
    assert in_data not in _disk(root) and in_metadata in _disk(root)


def test_files_referenced_under_another_spelling_of_their_path_are_not_orphans(catalog, tmp_path: Path):
    table = _with_history(catalog)
    root = tmp_path / "warehouse" / "sales" / "events"
    plain, single_slash = root / "data" / "added-plain.parquet", root / "data" / "added-file-colon.parquet"
    pq.write_table(_rows(500, 2), plain)
    pq.write_table(_rows(600, 2), single_slash)
    # Registered as "/abs/path" and "file:/abs/path"; the listing spells them "file:///abs/path".
    table.add_files([str(plain), f"file:{single_slash}"])
    assert {str(plain), f"file:{single_slash}"} <= set(table.inspect.files().column("file_path").to_pylist())
    _age_everything(root)
    rows = _ids(table)

    result = remove_orphan_files(table)

    assert not {normalize_location(str(plain)), normalize_location(str(single_slash))} & {
        normalize_location(p) for p in result.orphan_file_locations
    }
    assert plain.exists() and single_slash.exists() and _ids(table) == rows


class _OnFirstListing(logging.Handler):
    """Runs ``action`` when the listing reports its first directory done (a real event at a real moment)."""

    def __init__(self, action) -> None:
        super().__init__(logging.DEBUG)
        self.action, self.fired = action, False

    def emit(self, record: logging.LogRecord) -> None:
        if not self.fired and record.getMessage().startswith("listed a directory"):
            self.fired = True
            self.action()


@pytest.fixture
def on_first_listing():
    logger = logging.getLogger(listing_module.__name__)
    installed: list[logging.Handler] = []
    level = logger.level

    def install(action) -> _OnFirstListing:
        handler = _OnFirstListing(action)
        logger.addHandler(handler)
        logger.setLevel(logging.DEBUG)
        installed.append(handler)
        return handler

    yield install
    for handler in installed:
        logger.removeHandler(handler)
    logger.setLevel(level)


def test_a_listing_that_fails_part_way_deletes_nothing(catalog, tmp_path: Path, on_first_listing):
    table = _with_history(catalog)
    root = tmp_path / "warehouse" / "sales" / "events"
    _plant(root / "data" / "orphan.parquet")
    _plant(root / "staging" / "orphan.parquet")
    before = _disk(root)
    # Another process removes a directory after the root was listed and before it is: a real listing error.
    handler = on_first_listing(lambda: shutil.rmtree(root / "staging"))

    with pytest.raises(FileListingError, match=r"failed part way .*nothing was deleted"):
        remove_orphan_files(table, older_than=datetime.now(UTC))

    assert handler.fired and _disk(root) == before - {normalize_location(str(root / "staging" / "orphan.parquet"))}


def _reads_unreadable_directories(tmp_path: Path) -> bool:
    probe = tmp_path / "probe"
    probe.mkdir()
    os.chmod(probe, 0)
    try:
        os.listdir(probe)
        return True
    except PermissionError:
        return False
    finally:
        os.chmod(probe, 0o755)


def test_an_unreadable_directory_fails_the_listing_and_deletes_nothing(catalog, tmp_path: Path):
    if _reads_unreadable_directories(tmp_path):
        pytest.skip("this process reads any directory (root with CAP_DAC_OVERRIDE): no permission error can happen")
    table = _with_history(catalog)
    root = tmp_path / "warehouse" / "sales" / "events"
    _plant(root / "data" / "orphan.parquet")
    _plant(root / "locked" / "inner" / "orphan.parquet")
    before = _disk(root)
    os.chmod(root / "locked", 0)
    try:
        with pytest.raises(FileListingError, match="failed part way"):
            remove_orphan_files(table, older_than=datetime.now(UTC))
    finally:
        os.chmod(root / "locked", 0o755)
    assert _disk(root) == before


def test_listing_through_fsspec_finds_the_same_orphans(tmp_path: Path):
    catalog = SqlCatalog(
        "fs",
        uri=f"sqlite:///{tmp_path / 'c.db'}",
        warehouse=f"file://{tmp_path / 'warehouse'}",
        **{"py-io-impl": "pyiceberg.io.fsspec.FsspecFileIO"},
    )
    table = _with_history(catalog)
    assert isinstance(table.io, FsspecFileIO)
    root = Path(table.location().removeprefix("file://"))
    _age_everything(root)
    planted = _plant(root / "data" / "orphan.parquet")
    expected = _disk(root) - _referenced_by_pyiceberg(table)
    assert planted in expected

    result = remove_orphan_files(table)

    assert {normalize_location(p) for p in result.orphan_file_locations} == expected
    assert _disk(root).isdisjoint(expected)


@pytest.mark.skipif(importlib.util.find_spec("s3fs") is not None, reason="s3fs is installed here")
def test_a_scheme_whose_file_system_package_is_missing_names_the_extra():
    io = FsspecFileIO({"s3.endpoint": "http://127.0.0.1:1"})
    with pytest.raises(MissingExtraError, match=r"pip install 'iceberg-ops\[s3fs\]'") as caught:
        list(list_files(io, "s3://bucket/warehouse/events"))
    assert caught.value.extra == "s3fs"


@pytest.mark.parametrize(
    ("root", "location", "inside"),
    [
        ("s3://b/t", "s3://b/t2", False),
        ("s3://b/t", "s3://b/t/data/f", True),
        ("s3://b/t/", "s3a://b/t/data", True),
        ("s3a://b/t", "s3n://b/t", True),
        ("s3://b/t", "s3://c/t/data", False),
        ("s3://b/t", "s3://b/t/../u", False),
        ("s3://b/t", "gs://b/t/data", False),
        ("gs://b/t", "gcs://b/t/data", True),
        ("file:///w/t", "/w/t/data/f", True),
        ("file:///w/t", "file:/w/t/data/f", True),
        ("file:///w/t", "file://localhost/w/t/f", False),  # PyArrow reads it as the relative path localhost/w/t/f
        ("file:///w/t", "/w/t/../u", False),
        ("file:///w/t", "/w/t2", False),
        ("/w/t", "file:///w/t//data/./f", True),
    ],
)
def test_containment_compares_normalised_locations(root, location, inside):
    assert contains(root, location) is inside


def test_normalised_spellings():
    assert normalize_location("s3a://b/k/f.parquet") == normalize_location("s3://b/k/f.parquet") == "s3://b/k/f.parquet"
    assert normalize_location("file:/a//b/./c") == normalize_location("/a/b/c") == "file:///a/b/c"
    assert normalize_location("s3://b/a//c") != normalize_location("s3://b/a/c")  # distinct keys on S3


# ---------------------------------------------------------------- S3 (SeaweedFS and moto on loopback)


class _Proxy:
    """A TCP relay in front of an S3 endpoint that can be cut, as a network failure cuts it."""

    def __init__(self, upstream: str) -> None:
        host, port = upstream.removeprefix("http://").split(":")
        self.upstream = (host, int(port))
        self.server = socket.create_server(("127.0.0.1", 0))
        self.endpoint = f"http://127.0.0.1:{self.server.getsockname()[1]}"
        self.cut = False
        self.sockets: list[socket.socket] = []
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self.server.accept()
            except OSError:
                return
            if self.cut:
                client.close()
                continue
            upstream = socket.create_connection(self.upstream)
            self.sockets += [client, upstream]
            for a, b in ((client, upstream), (upstream, client)):
                threading.Thread(target=self._pump, args=(a, b), daemon=True).start()

    @staticmethod
    def _pump(source: socket.socket, sink: socket.socket) -> None:
        try:
            while data := source.recv(65536):
                sink.sendall(data)
        except OSError:
            pass
        finally:
            for s in (source, sink):
                with contextlib.suppress(OSError):
                    s.shutdown(socket.SHUT_RDWR)

    def sever(self) -> None:
        self.cut = True
        for s in self.sockets:
            with contextlib.suppress(OSError):
                s.shutdown(socket.SHUT_RDWR)

    def close(self) -> None:
        self.server.close()


def _s3_server(request, which: str):
    server = request.getfixturevalue(which)
    return server.endpoint if which == "moto_server" else server.s3_endpoint


class _OneAttempt(pafs.AwsStandardS3RetryStrategy):
    """pyarrow's standard S3 retry strategy, without the retries (for ``s3.retry-strategy-impl``)."""

    def __init__(self) -> None:
        super().__init__(max_attempts=1)


def _s3_catalog(
    tmp_path: Path, endpoint: str, bucket: str, real_endpoint: str | None = None, *, new_bucket: bool = True, **extra
):
    if new_bucket:
        boto3.client("s3", **boto_kwargs(real_endpoint or endpoint)).create_bucket(Bucket=bucket)
    properties = {
        "s3.endpoint": endpoint,
        "s3.access-key-id": "admin",
        "s3.secret-access-key": "password",
        "s3.region": "us-east-1",
        **extra,
    }
    return CatalogFactory.build("sqlite", db_path=tmp_path / "c.db", warehouse_dir=f"s3://{bucket}/wh", **properties)


def _s3_keys(endpoint: str, location: str) -> set[str]:
    bucket, _, prefix = location.removeprefix("s3://").partition("/")
    client = boto3.client("s3", **boto_kwargs(endpoint))
    pages = client.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix + "/")
    # Keys ending in "/" are the empty directory markers PyArrow leaves when it deletes a folder's files.
    keys = (item["Key"] for page in pages for item in page.get("Contents", []))
    return {f"s3://{bucket}/{key}" for key in keys if not key.endswith("/")}


def _put(table, location: str) -> str:
    with table.io.new_output(location).create(overwrite=True) as stream:
        stream.write(b"left by a crashed writer")
    return normalize_location(location)


def _store_times(endpoint: str, bucket: str) -> dict[str, datetime]:
    """The store's modification time of every object in ``bucket``, by ``s3://`` location."""
    client = boto3.client("s3", **boto_kwargs(endpoint))
    pages = client.get_paginator("list_objects_v2").paginate(Bucket=bucket)
    return {f"s3://{bucket}/{item['Key']}": item["LastModified"] for page in pages for item in page.get("Contents", [])}


def _put_young(table, endpoint: str, location: str, guard: datetime) -> str:
    """Write ``location`` so that the store dates it at or after ``guard`` (written again until it does)."""
    bucket = location.removeprefix("s3://").partition("/")[0]
    deadline = time.monotonic() + 30
    while True:
        time.sleep(max(0.0, (guard - datetime.now(UTC)).total_seconds()))
        written = _put(table, location)
        if _store_times(endpoint, bucket)[location] >= guard:
            return written
        assert time.monotonic() < deadline, "the store never dated a write at or after the guard"
        time.sleep(0.05)


@pytest.mark.backends
@pytest.mark.parametrize("server", ["seaweedfs", "moto_server"])
def test_on_s3_exactly_the_old_orphans_go_and_other_spellings_count(request, server, tmp_path, unique_name):
    endpoint = _s3_server(request, server)
    catalog = _s3_catalog(tmp_path, endpoint, unique_name)
    table = _with_history(catalog)
    root = table.location()
    assert root.startswith(f"s3://{unique_name}/")
    # A file registered under the s3a:// spelling of its key: still referenced.
    added = f"{root}/data/added.parquet"
    with table.io.new_output(added).create() as stream:
        pq.write_table(_rows(700, 2), stream)
    table.add_files([added.replace("s3://", "s3a://", 1)])
    planted = {_put(table, f"{root}/data/crashed.parquet"), _put(table, f"{root}/metadata/lost.avro")}
    sibling = _put(table, f"{root}2/data/not-ours.parquet")  # a prefix that merely starts like the table's
    # Object stores keep their own times (these two in whole seconds): the guard is a second after the
    # newest file so far by the store's clock, and the young file is written once the store dates it
    # at or after the guard.
    cutoff = max(_store_times(endpoint, unique_name).values()) + timedelta(seconds=1)
    young = _put_young(table, endpoint, f"{root}/data/in-flight.parquet", cutoff)
    expected = {normalize_location(k) for k in _s3_keys(endpoint, root)} - _referenced_by_pyiceberg(table) - {young}
    assert planted < expected
    reads, before = _reads(table), _s3_keys(endpoint, root)

    planned = remove_orphan_files(table, older_than=cutoff, dry_run=True)
    assert _s3_keys(endpoint, root) == before
    assert {normalize_location(p) for p in planned.orphan_file_locations} == expected
    with pytest.raises(UnsafeLocationError):
        remove_orphan_files(table, older_than=cutoff, location=f"{root}2")
    done = remove_orphan_files(table, older_than=cutoff, location=root.replace("s3://", "s3a://", 1))

    assert {normalize_location(p) for p in done.orphan_file_locations} == expected
    assert done.deleted_orphan_files_count == len(expected) and done.failed_deletes == []
    assert {normalize_location(k) for k in _s3_keys(endpoint, root)} == {
        normalize_location(k) for k in before
    } - expected
    assert sibling in {normalize_location(k) for k in _s3_keys(endpoint, f"{root}2")}
    assert _reads(catalog.load_table("sales.events")) == reads


@pytest.mark.backends
@pytest.mark.parametrize("server", ["seaweedfs", "moto_server"])
def test_on_s3_a_listing_cut_off_part_way_deletes_nothing(request, server, tmp_path, unique_name, on_first_listing):
    real = _s3_server(request, server)
    proxy = _Proxy(real)
    try:
        catalog = _s3_catalog(tmp_path, proxy.endpoint, unique_name, real_endpoint=real)
        table = _with_history(catalog)
        root = table.location()
        _put(table, f"{root}/data/crashed.parquet")
        _put(table, f"{root}/staging/crashed.parquet")
        before = _s3_keys(real, root)
        # The listing meets the cut network once: pyarrow's default retries would back off on it (about
        # 2.5 s) and fail the same way.
        once = _s3_catalog(
            tmp_path,
            proxy.endpoint,
            unique_name,
            new_bucket=False,
            **{"s3.retry-strategy-impl": f"{__name__}.{_OneAttempt.__name__}"},
        ).load_table("sales.events")
        handler = on_first_listing(proxy.sever)  # the network to the store fails after the first listing

        with pytest.raises(
            FileListingError, match=r"failed part way \(OSError: .*NETWORK_CONNECTION.*nothing was deleted"
        ):
            remove_orphan_files(once, older_than=datetime.now(UTC) + timedelta(seconds=5))

        assert handler.fired and _s3_keys(real, root) == before
    finally:
        proxy.close()


def test_files_reached_through_a_symbolic_link_out_of_the_table_are_never_deleted(catalog, tmp_path):
    import pyarrow as pa

    catalog.create_namespace_if_not_exists("links")
    table = catalog.create_table("links.t", pa.schema([pa.field("id", pa.int64())]))
    table.append(pa.table({"id": pa.array([1], pa.int64())}))
    outside = tmp_path / "precious"
    outside.mkdir()
    (outside / "keep.txt").write_text("not the table's")
    (tmp_path / "elsewhere.txt").write_text("not the table's either")
    data = tmp_path / "warehouse" / "links" / "t" / "data"
    (data / "link").symlink_to(outside, target_is_directory=True)
    (data / "filelink.txt").symlink_to(tmp_path / "elsewhere.txt")
    planted = data / "old-orphan.parquet"
    planted.write_bytes(b"left behind")

    result = remove_orphan_files(table, older_than=datetime.now(UTC) + timedelta(minutes=1))
    assert [p.rsplit("/", 1)[-1] for p in result.orphan_file_locations] == ["old-orphan.parquet"]
    assert (outside / "keep.txt").exists() and (tmp_path / "elsewhere.txt").exists() and not planted.exists()
