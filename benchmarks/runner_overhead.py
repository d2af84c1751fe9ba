"""Benchmark: the migration runner's own cost per migration.

Compares, at the same history size, the runner applying K migrations against the bare PyIceberg
commits those migrations make (what a user would write without iceberg-ops: load the table, set a
property in a transaction, commit), in two ways: K runs of ``MigrationRunner.upgrade("+1")``, each
applying one migration (*run1*), and one ``upgrade()`` applying all K (*runN*). Each migration sets
one table property, so the table's own metadata does not grow and the difference is the runner:
discovery, the lock, history reads and writes, the event log, and the history table's
self-maintenance.

It does this with 9 and with 999 migrations already applied (so the measured ones are about the
10th and the 1,000th), to show that a namespace's 1,000th migration does not pay for the ones
before it. The history for the large case is recorded with ``stamp`` plus enough real writes to
bring the history table to its steady-state snapshot count.

Every measurement runs in a fresh process after an idle pause and a full garbage collection, in
shuffled order, repeated; the report gives medians and ratios.

    .venv/bin/python benchmarks/runner_overhead.py            # full run (a few minutes)
    .venv/bin/python benchmarks/runner_overhead.py --quick    # one repetition, fewer steps
"""

from __future__ import annotations

import argparse
import gc
import json
import random
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

MIGRATION = """from iceberg_ops_provider.migration import BaseMigration


class Migration(BaseMigration):
    description = "step {number}"

    def upgrade(self, ctx):
        ctx.set_properties("events", step="{number}")
"""


def _setup(workdir: Path, applied: int, measured: int):
    """A catalog whose namespace has ``applied`` migrations recorded and ``measured`` more to run."""
    import pyarrow as pa

    from iceberg_ops_provider.catalogs import CatalogFactory
    from iceberg_ops_provider.runner import MigrationRunner

    migrations = workdir / "migrations"
    migrations.mkdir()
    for number in range(1, applied + measured + 1):
        (migrations / f"{number:04d}_step.py").write_text(MIGRATION.format(number=number))
    catalog = CatalogFactory.build("sqlite", db_path=workdir / "catalog.db", warehouse_dir=workdir / "warehouse")
    catalog.create_namespace("bench")
    catalog.create_table("bench.events", pa.schema([pa.field("id", pa.int64())]))
    runner = MigrationRunner(catalog, "bench", migrations)
    if applied:
        # Real history rows for every applied version, then real writes until the history table
        # holds as many snapshots as it keeps in its steady state.
        runner.stamp(f"{applied:04d}")
        store = runner.history_store
        rows = store.rows("bench")
        while len(store.table().snapshots()) < store.keep_snapshots:
            store.record("bench", rows[-1:], {rows[-1].version: "applied"})
    return catalog, runner


def measure(mode: str, applied: int, measured: int) -> dict[str, float]:
    """Run in a fresh process: time ``measured`` migrations through the runner or as bare commits."""
    with tempfile.TemporaryDirectory() as tmp:
        catalog, runner = _setup(Path(tmp), applied, measured)
        gc.collect()  # the setup's garbage is not the measured work's: every case starts at the same collector state
        started, cpu_started = time.perf_counter(), time.process_time()
        if mode == "runN":
            results = runner.upgrade()
            assert len(results) == measured, results
        elif mode == "run1":
            for _ in range(measured):
                assert len(runner.upgrade("+1")) == 1
        else:
            for number in range(applied + 1, applied + measured + 1):
                table = catalog.load_table("bench.events")
                with table.transaction() as transaction:
                    transaction.set_properties(step=str(number))
        elapsed, cpu = time.perf_counter() - started, time.process_time() - cpu_started
    return {"wall": elapsed / measured * 1000, "cpu": cpu / measured * 1000}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="one repetition and 10 measured migrations")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--measured", type=int, default=20, help="migrations timed per measurement")
    parser.add_argument("--pause", type=float, default=2.0, help="idle seconds before each measurement")
    parser.add_argument("--measure", nargs=2, metavar=("MODE", "APPLIED"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.measure:
        mode, applied = args.measure[0], int(args.measure[1])
        print(json.dumps(measure(mode, applied, args.measured)))
        return
    repeat, measured = (1, 10) if args.quick else (args.repeat, args.measured)
    modes = ("run1", "runN", "bare")
    cases = [(mode, applied) for mode in modes for applied in (9, 999)]
    results: dict[tuple[str, str, int], list[float]] = {(m, *case): [] for m in ("wall", "cpu") for case in cases}
    for _ in range(repeat):
        order = cases[:]
        random.shuffle(order)
        for mode, applied in order:
            time.sleep(args.pause)
            command = [sys.executable, __file__, "--measured", str(measured), "--measure", mode, str(applied)]
            output = subprocess.run(command, check=True, capture_output=True, text=True).stdout
            sample = json.loads(output.strip().splitlines()[-1])
            for metric in ("wall", "cpu"):
                results[(metric, mode, applied)].append(sample[metric])
            line = f"{sample['wall']:7.1f} ms, cpu {sample['cpu']:6.1f} ms per migration"
            print(f"  {mode:<4} after {applied:>3} applied: {line}", flush=True)
    median = {case: statistics.median(values) for case, values in results.items()}
    print(f"\nmedian of {repeat} run(s), {measured} migrations timed per run; cpu: the process's CPU time")
    for metric in ("wall", "cpu"):
        print(f"\n{metric + ' ms per migration':30}{'10th':>10}{'1000th':>10}{'1000th/10th':>14}")
        for mode in modes:
            small, large = median[(metric, mode, 9)], median[(metric, mode, 999)]
            print(f"{mode:30}{small:10.1f}{large:10.1f}{large / small:14.2f}")
        for mode in modes[:2]:
            # Paired within each round (the six cases of a round run back to back), so a machine whose
            # speed drifts between rounds shifts a round's samples together and its ratios not at all.
            over = {
                n: [a - b for a, b in zip(results[(metric, mode, n)], results[(metric, "bare", n)], strict=True)]
                for n in (9, 999)
            }
            growth = statistics.median(large / small for small, large in zip(over[9], over[999], strict=True))
            small, large = statistics.median(over[9]), statistics.median(over[999])
            print(f"{mode + ' overhead (minus bare)':30}{small:10.1f}{large:10.1f}{growth:14.2f}")
    print("\noverheads: medians of each round's sample minus that round's bare; ratio: median of the rounds' ratios")


if __name__ == "__main__":
    main()
