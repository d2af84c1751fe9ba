"""A data step's memory stays flat in table size: an update of 10% of the rows of a table of three 190 MiB
files (12 Mi rows) costs at most 512 MiB above the process's start, measured in a process of its own.

The child reports its own peak, ``VmHWM`` of its address space. ``ru_maxrss`` would not do: Linux carries
a parent's peak into the child across fork and exec, so a child of a pytest worker whose earlier tests
peaked at 1 GiB reports 1 GiB whatever it does (docs/data-steps.md, "Memory").
"""

from __future__ import annotations

import os
import subprocess
import sys

import pyarrow as pa
import pyarrow.compute as pc
import pytest

MIB = 1024 * 1024

OWN_MEMORY = """
def own_memory(key):
    with open("/proc/self/status") as status:
        return next(int(line.split()[1]) * 1024 for line in status if line.startswith(key + ":"))
"""

STEP = (
    OWN_MEMORY
    + """
import sys, threading, time
from pathlib import Path
from iceberg_ops_provider.data_steps import DataStep, run_step  # first, as the CLI and Airflow tasks import it
import pyarrow.compute as pc
from tests.support.lake import Lake

catalog = Lake(Path(sys.argv[1])).catalog()
start = own_memory("VmRSS")
paused = []


def doubled(batch):
    # One lane pauses on each of its batches, so the lanes drift apart as they do when other work takes
    # the cores: each holds its largest buffers at moments the other does not free its own.
    if not paused:
        paused.append(threading.get_ident())
    if paused[0] == threading.get_ident():
        time.sleep(0.05)
    return pc.multiply(batch.column("d0"), 2)


step = DataStep("mem/1", "update_rows", ("m", "t"), "k < 100", {"d0": doubled})
result = run_step(catalog, step)
print(start, own_memory("VmHWM"), result.rows_changed, result.bytes_read)
"""
)

IDLE = OWN_MEMORY + 'print(own_memory("VmRSS"), own_memory("VmHWM"))\n'


def _child(code: str, *args: str) -> list[int]:
    child = subprocess.run(
        [sys.executable, "-c", code, *args],
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": os.getcwd()},
        timeout=600,
        check=False,
    )
    assert child.returncode == 0, child.stderr
    return [int(word) for word in child.stdout.split()]


def test_a_child_measures_its_own_peak_not_its_parent_s():
    held = bytearray(600 * MIB)
    held[:: os.sysconf("SC_PAGE_SIZE")] = b"\1" * len(range(0, len(held), os.sysconf("SC_PAGE_SIZE")))
    del held  # this process's peak stays at 600 MiB and more; its resident size drops back

    start, peak = _child(IDLE)
    assert peak - start < 64 * MIB, f"{(peak - start) // MIB} MiB above the start of a child that allocated nothing"


@pytest.mark.long
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

    start, peak, changed, read = _child(STEP, str(lake.root))
    assert changed > 1_000_000 and read > 500 * MIB
    print(f"data step peak: {(peak - start) // MIB} MiB above the start")
    assert peak - start <= 512 * MIB, f"{(peak - start) // MIB} MiB above the start"
