"""Work handed to a thread pool that keeps the caller's context: its deadline on catalog requests above all.

A pool thread starts with an empty :mod:`contextvars` context, so a bound set by the caller
(:func:`iceberg_ops_provider.catalogs.deadline`) would not reach its requests. :func:`carrying_context`
captures the caller's context; each call runs in a copy (two threads cannot enter one context).
"""

from __future__ import annotations

import contextvars
from collections.abc import Callable
from typing import ParamSpec, TypeVar

__all__ = ["carrying_context"]

P = ParamSpec("P")
R = TypeVar("R")


def carrying_context(fn: Callable[P, R]) -> Callable[P, R]:
    """``fn``, to run in pool threads in a copy of the context of the caller of this function."""
    captured = contextvars.copy_context()

    def call(*args: P.args, **kwargs: P.kwargs) -> R:
        return captured.copy().run(fn, *args, **kwargs)

    return call
