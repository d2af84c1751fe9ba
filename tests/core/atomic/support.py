"""Writers racing on two tables through multi-table commits, shared by the SQL and REST tests."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

import pyarrow as pa
from pyiceberg.exceptions import CommitFailedException

from iceberg_ops_provider.core.atomic.changes import TableChange
from iceberg_ops_provider.core.atomic.commit import commit_atomically


def race_on_two_tables(open_catalog: Callable[[], Any], *, writers: int, steps: int, attempts: int) -> list[int]:
    """``writers`` threads each append ``steps`` values to ``ns.a`` and ``ns.b`` in one commit per value.

    Half the writers stage the tables in the other order. A lost race is retried up to ``attempts``
    times. Returns the values every writer committed (sorted); raises the first writer's error.
    """
    errors: list[BaseException] = []

    def writer(number: int) -> None:
        catalog = open_catalog()
        try:
            for step in range(steps):
                value = number * 100 + step
                for _ in range(attempts):
                    names = ("ns.a", "ns.b") if number % 2 else ("ns.b", "ns.a")
                    transactions = [catalog.load_table(name).transaction() for name in names]
                    for transaction in transactions:
                        transaction.append(pa.table({"id": pa.array([value], pa.int64())}))
                    try:
                        commit_atomically(catalog, [TableChange.of(t) for t in transactions])
                        break
                    except CommitFailedException:
                        continue
                else:
                    raise AssertionError(f"writer {number} never committed step {step}")
        except BaseException as exc:
            errors.append(exc)
        finally:
            close = getattr(catalog, "close", None)
            if close is not None:
                close()

    threads = [threading.Thread(target=writer, args=(number,)) for number in range(writers)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(300)
    if errors:
        raise errors[0]
    return sorted(number * 100 + step for number in range(writers) for step in range(steps))
