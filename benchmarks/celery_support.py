"""What the Celery scaling benchmarks share: a quiet machine, a timed DAG run, shuffled rounds, ratios.

Used by ``celery_scaling.py`` (the backfill DAG's move tasks) and ``celery_compaction_scaling.py``
(one table's compaction fanned out as mapped compact tasks). Both start a fresh
:class:`~tests.deployment.cluster.AirflowCluster` with one or two Celery workers per measurement,
re-exported here with :func:`unavailable_reason`. Not a benchmark of its own.
"""

from __future__ import annotations

import argparse
import datetime as dt
import os
import random
import statistics
import sys
import time
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any

REPOSITORY = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPOSITORY))

from tests.deployment.cluster import AirflowCluster, DagRunResult, unavailable_reason  # noqa: E402

__all__ = [
    "AirflowCluster",
    "DagRunResult",
    "unavailable_reason",
    "machine_busy_seconds",
    "cpu_share",
    "wait_for_quiet",
    "seconds_between",
    "task_window",
    "add_run_options",
    "timed_run",
    "run_rounds",
    "per_round_ratios",
    "ratio_lines",
]


def machine_busy_seconds() -> float:
    """CPU seconds all processes on the machine have used since boot (steal included), from ``/proc/stat``."""
    user, nice, system, _idle, _iowait, irq, softirq, steal = (
        int(value) for value in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:9]
    )
    return (user + nice + system + irq + softirq + steal) / os.sysconf("SC_CLK_TCK")


def cpu_share(seconds: float) -> float:
    """The share of the machine's CPU capacity in use over the next ``seconds``."""
    busy, started = machine_busy_seconds(), time.monotonic()
    time.sleep(seconds)
    return (machine_busy_seconds() - busy) / ((time.monotonic() - started) * (os.cpu_count() or 1))


def wait_for_quiet(pause: float, quiet: float, max_wait: float) -> float:
    """Sleep the idle pause, then until the machine's CPU use is below ``quiet`` (at most ``max_wait`` s)."""
    started = time.monotonic()
    time.sleep(pause)
    while cpu_share(1.0) > quiet and time.monotonic() - started < max_wait:
        pass
    return time.monotonic() - started


def seconds_between(start: str, end: str) -> float:
    """Seconds from one REST API timestamp to another."""
    return (dt.datetime.fromisoformat(end) - dt.datetime.fromisoformat(start)).total_seconds()


def task_window(task_instances: Iterable[Mapping[str, Any]]) -> float:
    """Seconds from the first task instance's start to the last one's end (their wall time together)."""
    found = list(task_instances)
    return seconds_between(min(ti["start_date"] for ti in found), max(ti["end_date"] for ti in found))


def add_run_options(parser: argparse.ArgumentParser) -> None:
    """The options of every measurement: slots per worker, the quiet wait, the run's timeout, the order's seed."""
    parser.add_argument("--concurrency", type=int, default=1, help="task slots of each Celery worker")
    parser.add_argument("--pause", type=float, default=5.0, help="idle seconds before each run")
    parser.add_argument("--quiet", type=float, default=0.25, help="start once the machine's CPU use is below this")
    parser.add_argument("--max-wait", type=float, default=120.0, help="seconds to wait for quiet at most")
    parser.add_argument("--timeout", type=float, default=1800.0, help="seconds a DAG run may take")
    parser.add_argument("--seed", type=int, default=None, help="seed of the shuffled order")


def timed_run(
    cluster: AirflowCluster, dag_id: str, conf: Mapping[str, Any], timeout: float
) -> tuple[DagRunResult, float]:
    """Trigger ``dag_id`` and wait for it; the run and the machine's CPU share while it ran."""
    busy, started = machine_busy_seconds(), time.monotonic()
    run = cluster.run_dag(dag_id, conf, timeout=timeout)
    share = (machine_busy_seconds() - busy) / ((time.monotonic() - started) * (os.cpu_count() or 1))
    return run, share


def run_rounds(
    rounds: int, seed: int | None, measure: Callable[[int], dict[str, Any]], describe: Callable[[dict[str, Any]], str]
) -> list[dict[str, Any]]:
    """Measure one and two workers in each round, in shuffled order; every sample with its ``round``.

    ``measure(workers)`` makes one measurement; ``describe(sample)`` is its progress line's text.
    """
    shuffle = random.Random(seed)
    samples: list[dict[str, Any]] = []
    for number in range(1, rounds + 1):
        order = [1, 2]
        shuffle.shuffle(order)
        for workers in order:
            sample = {"round": number, **measure(workers)}
            samples.append(sample)
            print(f"round {number}, {workers} worker(s): {describe(sample)}", flush=True)
    return samples


def per_round_ratios(samples: list[dict[str, Any]], key: str) -> list[float]:
    """Two workers' ``key`` over one worker's, for every round that measured both."""
    rounds = sorted({s["round"] for s in samples})
    per_round = {r: {s["workers"]: s for s in samples if s["round"] == r} for r in rounds}
    return [per_round[r][2][key] / per_round[r][1][key] for r in rounds if len(per_round[r]) == 2]


def ratio_lines(ratios: list[float]) -> list[str]:
    """The report's ratio line (after a blank line), or nothing without a round that measured both."""
    if not ratios:
        return []
    return [
        "",
        f"Two workers / one: **{statistics.median(ratios):.2f}x** (median of per-round ratios; range "
        f"{min(ratios):.2f}-{max(ratios):.2f}).",
    ]
