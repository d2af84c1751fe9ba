"""The retry policies: what each retries (real lost races on a SQLite catalog), and what it does not."""

from __future__ import annotations

import logging
import time

import pyarrow as pa
import pytest
from pyiceberg.exceptions import CommitFailedException, ValidationException
from pyiceberg.types import LongType

from iceberg_ops_provider.core.retrying import MAX_WAIT_SECONDS, lock_races, lost_races, rereads

SCHEMA = pa.schema([("id", pa.int64())])


@pytest.fixture
def two_writers(catalog, namespace):
    """The same table loaded twice: whichever commits second has lost a race."""
    catalog.create_table(f"{namespace}.t", SCHEMA)
    return catalog.load_table(f"{namespace}.t"), catalog.load_table(f"{namespace}.t")


def _lose_race(first, second) -> None:
    """A schema change through ``first``, then one through ``second`` still at the old schema.

    The second fails its requirement on the current schema: a real CommitFailedException, which
    PyIceberg does not retry itself.
    """
    first.refresh()
    with first.update_schema() as update:
        update.add_column(f"a{len(first.schema().fields)}", LongType())
    with second.update_schema() as update:
        update.add_column("b", LongType())


def test_a_real_lost_commit_is_retried_on_the_new_state_and_lands(two_writers, caplog):
    caplog.set_level(logging.INFO, logger="iceberg_ops_provider.core.retrying")
    first, second = two_writers
    tries = []
    for attempt in lost_races(5, what="test"):
        with attempt:
            tries.append(attempt.retry_state.attempt_number)
            if len(tries) == 1:
                _lose_race(first, second)
            else:
                second.refresh()
                with second.update_schema() as update:
                    update.add_column("b", LongType())
    assert tries == [1, 2]
    assert second.schema().column_names == ["id", "a1", "b"]
    assert "test: another writer got there first" in caplog.text


def test_the_last_lost_race_is_raised_itself_once_the_attempts_run_out(two_writers):
    first, second = two_writers
    tries = 0
    with pytest.raises(CommitFailedException):
        for attempt in lost_races(3, what="test"):
            with attempt:
                tries += 1
                _lose_race(first, second)  # never refreshed: loses every time
    assert tries == 3


@pytest.mark.parametrize("error", [ValueError("bad"), KeyError("x"), PermissionError("denied")])
def test_errors_that_are_not_lost_races_are_raised_at_once(error):
    tries = 0
    with pytest.raises(type(error)):
        for attempt in lost_races(5, what="test"):
            with attempt:
                tries += 1
                raise error
    assert tries == 1


def test_a_narrowed_policy_retries_only_what_it_names():
    tries = 0
    with pytest.raises(ValidationException):
        for attempt in lost_races(5, what="test", errors=(CommitFailedException,)):
            with attempt:
                tries += 1
                raise ValidationException("conflicting files")
    assert tries == 1


def test_a_test_of_the_error_decides_instead_of_its_type():
    seen = []
    for attempt in lost_races(5, what="test", when=lambda exc: "sequence number" in str(exc)):
        with attempt:
            seen.append(attempt.retry_state.attempt_number)
            if len(seen) < 3:
                raise ValueError("Cannot add snapshot with sequence number 3 older than last sequence number 4")
    assert seen == [1, 2, 3]


def test_lost_race_waits_are_jittered_and_capped():
    policy = lost_races(40, what="test")
    waits = set()
    for number in range(1, 40):
        state = type("State", (), {"attempt_number": number})()
        wait = policy.wait(state)  # type: ignore[arg-type]
        assert 0 <= wait <= MAX_WAIT_SECONDS
        waits.add(wait)
    assert len(waits) > 30  # writers that collided once do not retry in step


def test_the_lock_retries_a_real_lost_compare_and_swap_but_not_a_validation_error(two_writers):
    first, second = two_writers
    tries = 0
    for attempt in lock_races():
        with attempt:
            tries += 1
            if tries == 1:
                _lose_race(first, second)
    assert tries == 2
    tries = 0
    with pytest.raises(ValidationException):
        for attempt in lock_races():
            with attempt:
                tries += 1
                raise ValidationException("not a lock race")
    assert tries == 1


def test_rereads_a_missing_file_at_once_and_raises_it_when_it_stays_missing(tmp_path):
    started = time.monotonic()
    tries = 0
    with pytest.raises(FileNotFoundError):
        for attempt in rereads(4):
            with attempt:
                tries += 1
                (tmp_path / "gone.avro").read_bytes()
    assert tries == 4
    assert time.monotonic() - started < 1.0  # no waits: the table is read again at once
    tries = 0
    with pytest.raises(CommitFailedException):
        for attempt in rereads(4):
            with attempt:
                tries += 1
                raise CommitFailedException("not a read")
    assert tries == 1
