"""The pages' reads on their own: a part that does not finish in time is an error naming the catalog, a
finished part is reused within its time to live, a part still running is joined, and the parts of a
page that ask for a catalog at the same time build it once."""

from __future__ import annotations

import threading
import time

from iceberg_ops_provider.ui.reads import Reads


def test_a_part_that_does_not_finish_in_time_is_an_error_naming_the_catalog():
    release = threading.Event()
    reads = Reads()
    started = time.monotonic()
    part = reads.get("stalls", lambda: release.wait(30), ttl=5, timeout=0.3, catalog="lake")
    took = time.monotonic() - started
    release.set()
    assert part.value is None and not part.ok
    assert "'lake'" in part.error and "did not answer within" in part.error
    assert 0.3 <= took < 2


def test_an_error_of_the_catalog_names_it_and_the_other_parts_are_read():
    def fails() -> None:
        raise ConnectionError("connection refused")

    parts = Reads().many({"broken": ("broken", fails), "fine": ("fine", lambda: 42)}, ttl=5, timeout=5, catalog="lake")
    assert parts["broken"].error == "Connection 'lake': ConnectionError: connection refused"
    assert parts["fine"].value == 42 and parts["fine"].ok


def test_a_finished_part_is_reused_within_its_ttl_and_read_again_after_it():
    calls: list[int] = []
    reads = Reads()

    def read() -> int:
        calls.append(1)
        return len(calls)

    assert reads.get("k", read, ttl=0.5, timeout=5, catalog="c").value == 1
    assert reads.get("k", read, ttl=0.5, timeout=5, catalog="c").value == 1
    time.sleep(0.6)
    assert reads.get("k", read, ttl=0.5, timeout=5, catalog="c").value == 2


def test_a_part_still_running_is_joined_rather_than_started_again():
    calls: list[int] = []
    release = threading.Event()
    reads = Reads()

    def slow() -> str:
        calls.append(1)
        release.wait(5)
        return "done"

    first = reads.start("k", slow, ttl=5, timeout=5)
    second = reads.start("k", slow, ttl=5, timeout=5)
    release.set()
    assert first is second
    assert reads.result(second, timeout=5, catalog="c").value == "done"
    assert len(calls) == 1


def test_parts_asking_for_a_catalog_at_the_same_time_build_it_once():
    builds: list[int] = []
    reads = Reads()

    def build() -> object:
        builds.append(1)
        time.sleep(0.2)
        return object()

    got: list[object] = []
    threads = [threading.Thread(target=lambda: got.append(reads.catalog("lake", "v1", build))) for _ in range(3)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(builds) == 1 and len({id(catalog) for catalog in got}) == 1
    assert reads.catalog("lake", "v2", build) is not got[0]  # the connection's options changed: built again
    assert len(builds) == 2
