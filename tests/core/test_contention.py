"""The backoff every lost-race retry loop waits with."""

from __future__ import annotations

import pytest

from iceberg_ops_provider.core.contention import FIRST_WAIT_SECONDS, MAX_WAIT_SECONDS, backoff_seconds


@pytest.mark.parametrize("attempt", [1, 2, 3, 5, 8, 30, 1000])
def test_waits_double_from_the_first_up_to_the_cap_with_jitter(attempt):
    ceiling = min(MAX_WAIT_SECONDS, FIRST_WAIT_SECONDS * 2**attempt)
    waits = [backoff_seconds(attempt) for _ in range(200)]
    assert all(ceiling * 0.5 <= wait <= ceiling for wait in waits)
    assert len(set(waits)) > 100  # jittered: losers that collided once do not retry in step


def test_custom_scale_and_cap():
    assert 0.5 <= backoff_seconds(1, first=0.5, cap=10.0) <= 1.0
    assert 1.5 <= backoff_seconds(10, first=0.5, cap=3.0) <= 3.0
    assert 0.02 <= backoff_seconds(0) <= 0.04  # an attempt count below 1 is taken as the first
