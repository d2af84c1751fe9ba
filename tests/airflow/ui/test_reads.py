"""The pages' reads on their own: a part that does not finish in time is an error naming the catalog, a
finished part is reused within its time to live, a part still running is joined, and the parts of a
page that ask for a catalog at the same time build it once."""

from __future__ import annotations

import contextlib
import threading
import time

import pytest

from iceberg_ops_provider.ui.reads import Reads


def _get(reads: Reads, key, fn, **options):
    """One part read on its own, as a page reads its parts."""
    return reads.many({"part": (key, fn)}, **options)["part"]


def test_a_part_that_does_not_finish_in_time_is_an_error_naming_the_catalog():
    release = threading.Event()
    reads = Reads()
    started = time.monotonic()
    part = _get(reads, "stalls", lambda: release.wait(30), ttl=5, timeout=0.3, catalog="lake")
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

    assert _get(reads, "k", read, ttl=0.5, timeout=5, catalog="c").value == 1
    assert _get(reads, "k", read, ttl=0.5, timeout=5, catalog="c").value == 1
    time.sleep(0.6)
    assert _get(reads, "k", read, ttl=0.5, timeout=5, catalog="c").value == 2


def test_a_part_still_running_is_joined_rather_than_started_again():
    calls: list[int] = []
    release = threading.Event()
    reads = Reads()

    def slow() -> str:
        calls.append(1)
        release.wait(5)
        return "done"

    first = reads.start("k", slow, ttl=5, timeout=5, catalog="c")
    second = reads.start("k", slow, ttl=5, timeout=5, catalog="c")
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


def test_a_catalog_that_timed_out_is_not_asked_again_until_retry_after_and_no_thread_is_started():
    release = threading.Event()
    calls: list[str] = []
    reads = Reads(retry_after=0.6)

    def stalls() -> None:
        calls.append("stalls")
        release.wait(30)

    assert "did not answer within" in _get(reads, "a", stalls, ttl=5, timeout=0.2, catalog="lake").error
    started = time.monotonic()
    part = _get(reads, "b", lambda: calls.append("b"), ttl=5, timeout=0.2, catalog="lake")
    assert time.monotonic() - started < 0.1  # at once, not after another timeout
    assert "'lake' did not answer within 0.2 s at" in part.error and "asked again" in part.error
    assert calls == ["stalls"]  # the second read never ran
    # other catalogs are asked
    assert _get(reads, "other", lambda: 7, ttl=5, timeout=0.2, catalog="warehouse").value == 7
    time.sleep(0.7)
    assert _get(reads, "b", lambda: 8, ttl=5, timeout=0.2, catalog="lake").value == 8  # asked again after retry_after
    release.set()


def test_a_read_that_succeeds_clears_the_catalogs_silence():
    release = threading.Event()
    reads = Reads(retry_after=60)
    slow = reads.start("slow", lambda: release.wait(5) and "late", ttl=5, timeout=0.2, catalog="lake")
    assert not reads.result(slow, timeout=0.2, catalog="lake").ok
    assert "asked again" in _get(reads, "x", lambda: 1, ttl=5, timeout=0.2, catalog="lake").error
    release.set()
    slow.future.result(5)
    assert _get(reads, "x2", lambda: 2, ttl=5, timeout=0.2, catalog="lake").value == 2


def test_at_most_max_waiting_requests_wait_for_one_catalog_and_the_rest_are_refused_at_once():
    release = threading.Event()
    reads = Reads(max_waiting=2)
    entry = reads.start("k", lambda: release.wait(5) and "done", ttl=5, timeout=5, catalog="lake")
    parts: list = []
    waiters = [
        threading.Thread(target=lambda: parts.append(reads.result(entry, timeout=5, catalog="lake"))) for _ in range(2)
    ]
    for waiter in waiters:
        waiter.start()
    time.sleep(0.2)
    started = time.monotonic()
    refused = reads.result(entry, timeout=5, catalog="lake")
    assert time.monotonic() - started < 0.1
    assert "'lake' is still answering 2 earlier requests" in refused.error
    assert _get(reads, "elsewhere", lambda: 3, ttl=5, timeout=5, catalog="warehouse").value == 3
    release.set()
    for waiter in waiters:
        waiter.join(5)
    assert [part.value for part in parts] == ["done", "done"]
    assert reads.result(entry, timeout=5, catalog="lake").value == "done"  # a finished read needs no waiting


def test_a_shorter_wait_says_the_catalog_is_still_being_asked_and_a_later_request_gets_its_answer():
    release = threading.Event()
    reads = Reads()
    entry = reads.start("probe", lambda: release.wait(5) and 3, ttl=5, timeout=5, catalog="lake")
    part = reads.result(entry, timeout=5, catalog="lake", wait=0.1)
    assert "'lake' has not answered after" in part.error and "still being asked" in part.error
    release.set()
    again = reads.start("probe", lambda: 99, ttl=5, timeout=5, catalog="lake")
    assert again is entry and reads.result(again, timeout=5, catalog="lake").value == 3
    assert "asked again" not in (_get(reads, "n", lambda: 1, ttl=5, timeout=5, catalog="lake").error or "")


def test_at_most_max_running_reads_of_one_catalog_hold_a_thread_and_new_names_are_refused_at_once():
    release = threading.Event()
    reads = Reads(max_running=2)
    baseline = threading.active_count()
    held = [reads.start(f"ns{n}", lambda: release.wait(5), ttl=5, timeout=5, catalog="lake") for n in range(2)]
    started = time.monotonic()
    refused = [_get(reads, f"ns{n}", lambda: 1, ttl=5, timeout=5, catalog="lake") for n in range(2, 50)]
    assert time.monotonic() - started < 0.5
    assert all("still answering 2 earlier reads" in part.error for part in refused)
    assert threading.active_count() <= baseline + 2  # 48 new names started no thread
    assert _get(reads, "other", lambda: 3, ttl=5, timeout=5, catalog="warehouse").value == 3
    release.set()
    for entry in held:
        entry.future.result(5)
    assert _get(reads, "ns99", lambda: 4, ttl=5, timeout=5, catalog="lake").value == 4  # slots free again


def test_all_catalogs_together_have_a_cap_on_waiting_requests():
    release = threading.Event()
    reads = Reads(max_waiting=4, max_waiting_all=3)
    entries = [reads.start(f"k{n}", lambda: release.wait(5), ttl=5, timeout=5, catalog=f"c{n}") for n in range(4)]
    waiters = [
        threading.Thread(target=reads.result, args=(entries[n],), kwargs={"timeout": 5, "catalog": f"c{n}"})
        for n in range(3)
    ]
    for waiter in waiters:
        waiter.start()
    time.sleep(0.2)
    refused = reads.result(entries[3], timeout=5, catalog="c3")
    assert "3 requests are waiting for catalogs already" in refused.error and refused.pending
    release.set()
    for waiter in waiters:
        waiter.join(5)


def test_a_read_that_fails_with_a_refusal_ends_the_catalogs_silence():
    release = threading.Event()
    reads = Reads(retry_after=60)

    def stalls_then_is_refused() -> None:
        release.wait(5)
        raise ConnectionRefusedError("connection refused")  # the hung server went away

    stalled = reads.start("slow", stalls_then_is_refused, ttl=0, timeout=0.2, catalog="lake")
    assert not reads.result(stalled, timeout=0.2, catalog="lake").ok
    assert "asked again" in _get(reads, "x", lambda: 1, ttl=0, timeout=0.2, catalog="lake").error
    release.set()
    with contextlib.suppress(ConnectionRefusedError):
        stalled.future.result(5)
    assert _get(reads, "y", lambda: 2, ttl=0, timeout=0.2, catalog="lake").value == 2  # asked again at once


def test_a_catalogs_own_timeout_reads_as_the_pages_own_words_and_waits_are_rounded():
    from iceberg_ops_provider.errors import CatalogUnavailableError

    def gives_up() -> None:
        time.sleep(0.25)
        raise CatalogUnavailableError(
            "The catalog did not answer within 0.2 s (timeout= of CatalogFactory.build)", timeout=0.2
        )

    reads = Reads()
    entry = reads.start("k", gives_up, ttl=5, timeout=0.2, catalog="lake")
    entry.future.exception(5)  # finished with the catalog's own timeout before anyone waited
    part = reads.result(entry, timeout=0.2, catalog="lake")
    assert "The catalog of connection 'lake' did not answer within 0.2 s (the connection's timeout)" in part.error
    assert "CatalogFactory.build" not in part.error
    release = threading.Event()
    reads = Reads()
    entry = reads.start("p", lambda: release.wait(5), ttl=5, timeout=5, catalog="lake")
    time.sleep(1.2)
    waited = reads.result(entry, timeout=5, catalog="lake", wait=0.01)
    assert "has not answered after 1 s;" in waited.error and waited.pending
    release.set()


def test_parts_waiting_for_a_build_that_fails_get_its_error_without_building_again():
    builds: list[int] = []
    reads = Reads()

    def failing_build() -> object:
        builds.append(1)
        time.sleep(0.3)
        raise ConnectionError("hung catalog gave up")

    errors: list[str] = []

    def part() -> None:
        try:
            reads.catalog("lake", "v1", failing_build)
        except ConnectionError as exc:
            errors.append(str(exc))

    threads = [threading.Thread(target=part) for _ in range(3)]
    started = time.monotonic()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(5)
    assert len(builds) == 1 and errors == ["hung catalog gave up"] * 3
    assert time.monotonic() - started < 0.9  # one build's time, not three in a row
    with pytest.raises(ConnectionError):
        reads.catalog("lake", "v1", failing_build)  # a later request builds again
    assert len(builds) == 2


def test_a_late_timeout_neither_restarts_an_old_pause_nor_hides_a_later_refusal():
    reads = Reads(retry_after=0.5)
    release = threading.Event()

    def hangs_then_times_out() -> None:
        release.wait(5)
        raise TimeoutError("gave up")

    late = reads.start("late", hangs_then_times_out, ttl=0, timeout=0.1, catalog="lake")
    time.sleep(0.7)  # its deadline, and the pause it would start from there, are over
    release.set()
    with contextlib.suppress(TimeoutError):
        late.future.result(5)
    assert _get(reads, "now", lambda: 1, ttl=0, timeout=0.1, catalog="lake").value == 1  # no pause from a late end

    def refused() -> None:
        raise ConnectionRefusedError("refused")

    stalled = reads.start("stalled", lambda: time.sleep(0.3), ttl=60, timeout=0.1, catalog="lake")
    assert "did not answer within 0.1 s" in reads.result(stalled, timeout=0.1, catalog="lake").error
    reads._silent.clear()  # the pause is over early here; the refusal below is news after the timeout
    assert "ConnectionRefusedError" in _get(reads, "r", refused, ttl=0, timeout=0.1, catalog="lake").error
    again = reads.result(stalled, timeout=0.1, catalog="lake")  # the cached timed-out part, shown again
    assert "did not answer" in again.error
    assert _get(reads, "after", lambda: 2, ttl=0, timeout=0.1, catalog="lake").value == 2  # not paused again
