"""The retry policies, one per kind of call: what each retries, how many times, and how long it waits.

Waits are drawn at random from a doubling, capped window ("full jitter"); every policy re-raises the
last error once its attempts run out and retries no error it does not name (docs/core.md, Retries).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from pyiceberg.exceptions import CommitFailedException, ValidationException
from tenacity import (
    RetryCallState,
    Retrying,
    retry_if_exception,
    retry_if_exception_type,
    stop_after_attempt,
    wait_none,
    wait_random_exponential,
)

__all__ = ["FIRST_WAIT_SECONDS", "LOST_RACE", "MAX_WAIT_SECONDS", "lock_races", "lost_races", "rereads"]

log = logging.getLogger(__name__)

FIRST_WAIT_SECONDS = 0.04
"""The window of the first wait after a lost race, in seconds; it doubles with each further one."""
MAX_WAIT_SECONDS = 2.0
"""The widest window of one wait, in seconds."""

LOST_RACE: tuple[type[BaseException], ...] = (CommitFailedException, ValidationException, FileNotFoundError)
"""What a commit raises when another writer got there first: a failed requirement, a conflicting file,
or the files of the snapshot it started from deleted by a concurrent expiry."""


def lost_races(
    attempts: int,
    *,
    what: str,
    errors: tuple[type[BaseException], ...] = LOST_RACE,
    when: Callable[[BaseException], bool] | None = None,
) -> Retrying:
    """``attempts`` of a commit (``what``, for the log) that may lose to other writers, with jittered doubling waits.

    A lost race is one of ``errors``, or an error ``when`` accepts.
    """

    def before_sleep(state: RetryCallState) -> None:
        error = state.outcome.exception() if state.outcome is not None else None
        wait = state.next_action.sleep if state.next_action is not None else 0.0
        log.info("%s: another writer got there first (%s); trying again in %.2f s", what, error, wait)

    return _retrying(
        attempts,
        wait_random_exponential(multiplier=FIRST_WAIT_SECONDS, max=MAX_WAIT_SECONDS),
        retry_if_exception(when) if when is not None else retry_if_exception_type(errors),
        before_sleep=before_sleep,
    )


def _retrying(attempts: int, wait: Any, retry: Any, **options: Any) -> Retrying:
    return Retrying(stop=stop_after_attempt(attempts), wait=wait, retry=retry, reraise=True, **options)


def lock_races(attempts: int = 10) -> Retrying:
    """Attempts of a compare-and-swap commit on a lock table (one small metadata write: short waits)."""
    wait = wait_random_exponential(multiplier=FIRST_WAIT_SECONDS / 4, max=MAX_WAIT_SECONDS / 4)
    return _retrying(attempts, wait, retry_if_exception_type(CommitFailedException))


def rereads(attempts: int = 4) -> Retrying:
    """Attempts of a read of table metadata whose files a concurrent expiry may delete: read again at once."""
    return _retrying(attempts, wait_none(), retry_if_exception_type(FileNotFoundError))
