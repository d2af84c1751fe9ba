"""Waiting out lost commit races: one jittered exponential backoff for every retry loop.

A commit refused because another writer committed first is not an error: the other writer made
progress, and trying again on the new state usually succeeds. Under heavy contention (many
namespaces' runs recording history in one table at once, many workers committing units of one
move) fixed short waits make the same writers collide again and again; waits that double from a
small start, capped, with random jitter spread them out so each attempt has a fair chance.
"""

from __future__ import annotations

import random

__all__ = ["FIRST_WAIT_SECONDS", "MAX_WAIT_SECONDS", "backoff_seconds"]

FIRST_WAIT_SECONDS = 0.02
MAX_WAIT_SECONDS = 2.0


def backoff_seconds(attempt: int, *, first: float = FIRST_WAIT_SECONDS, cap: float = MAX_WAIT_SECONDS) -> float:
    """How long to wait after the ``attempt``-th lost race (1 for the first): doubling, capped, jittered.

    The wait is ``min(cap, first * 2**attempt)`` scaled by a random factor in ``[0.5, 1.0]``, so
    writers that lost together do not retry together.

    Args:
        attempt: How many attempts have failed so far (1 or more).
        first: The scale of the first wait, in seconds.
        cap: The longest wait, in seconds.

    Example:
        ``time.sleep(backoff_seconds(attempt))``
    """
    return min(cap, first * 2 ** min(max(attempt, 1), 20)) * random.uniform(0.5, 1.0)
