"""A data step's memory stays flat in table size: an update of 10% of the rows of a table of three 190 MiB
files (12 Mi rows) costs at most 512 MiB above the process's start, measured in a process of its own.

It runs with ``make memory`` (``ICEBERG_OPS_MEMORY=1``), on a machine doing nothing else: alone it peaks
at 470-510 MiB above the start, but once inside ``make test-all``'s parallel run it peaked at 819, for
reasons not found yet (docs/data-steps.md, "Memory"), so it does not gate the shared run.
"""

from __future__ import annotations

import os
import subprocess
import sys

import pyarrow as pa
import pyarrow.compute as pc
import pytest

pytestmark = [
    pytest.mark.long,
    pytest.mark.skipif(
        not os.environ.get("ICEBERG_OPS_MEMORY"),
        reason="a peak-memory bound, measured alone on a quiet machine: make memory (ICEBERG_OPS_MEMORY=1)",
    ),
]

MIB = 1024 * 1024

CHILD = """
import resource, sys
from pathlib import Path
import pyarrow.compute as pc
from tests.support.lake import Lake
from iceberg_ops_provider.data_steps import DataStep, run_step

catalog = Lake(Path(sys.argv[1])).catalog()
with open("/proc/self/statm") as statm:
    start = int(statm.read().split()[1]) * resource.getpagesize()
step = DataStep("mem/1", "update_rows", ("m", "t"), "k < 100", {"d0": lambda b: pc.multiply(b.column("d0"), 2)})
result = run_step(catalog, step)
peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
print(start, peak, result.rows_changed, result.bytes_read)
"""


def test_an_update_of_a_large_table_stays_within_512_mib(lake):
    catalog = lake.catalog()
    catalog.create_namespace("m")
    schema = pa.schema([("k", pa.int64()), ("i", pa.int32())] + [(f"d{j}", pa.float64()) for j in range(6)])
    table = catalog.create_table("m.t", schema)
    rows = 4_000_000
    for _ in range(3):
        keys = pc.cast(pc.floor(pc.multiply(pc.random(rows), 1000)), pa.int64())
        data = {"k": keys, "i": pc.cast(pc.divide(keys, 10), pa.int32())}
        data.update({f"d{j}": pc.random(rows) for j in range(6)})
        table.append(pa.table(data, schema=schema))
    assert sum(t.file.file_size_in_bytes for t in table.scan().plan_files()) > 500 * MIB

    child = subprocess.run(
        [sys.executable, "-c", CHILD, str(lake.root)],
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": os.getcwd()},
        timeout=600,
        check=False,
    )
    assert child.returncode == 0, child.stderr
    start, peak, changed, read = map(int, child.stdout.split())
    assert changed > 1_000_000 and read > 500 * MIB
    assert peak - start <= 512 * MIB, f"{(peak - start) // MIB} MiB above the start"
