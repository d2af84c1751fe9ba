"""``iceberg-ops upgrade`` and ``downgrade`` killed (SIGKILL) or interrupted (Ctrl-C) inside their data steps, as a user
runs them, on a SQLite and a PostgreSQL catalog: the next plain command settles the run exactly once.

Each trial creates a table of ``FILES`` files, one unit each, and runs a migration whose upgrade doubles ``v`` where
``k >= 1`` (not idempotent: a unit applied twice shows) and deletes the rows where ``k = 0``, and whose downgrade
restores the rows (``restore_data``). The command is a fresh process: the test polls the table until the first step
committed a random number of units, naps a random part of a unit's time, and sends the signal. Right after it every
file of the table's snapshots is still there (a unit whose commit landed kept its files) and at most two units'
outputs are unreferenced (the unit being committed and the one copied ahead). Then a plain ``upgrade`` must finish,
with every row exactly right and the migration recorded once. The downgrade is then stopped the same way, at a
random moment after it started, and a plain ``downgrade`` must bring every row back.

``ICEBERG_OPS_DATA_STEP_CLI_KILLS`` sets the landed trials per catalog and signal (1 by default);
``ICEBERG_OPS_CRASH_SEED`` replays a run's random choices.
"""

from __future__ import annotations

import os
import random
import select
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

from iceberg_ops_provider.catalogs import CatalogFactory
from iceberg_ops_provider.data_steps.state import find_step_state
from iceberg_ops_provider.migration.data_run import UNIT_BYTES_PROPERTY
from tests.support.lake import Lake
from tests.support.migrations import write_migration

pytestmark = [pytest.mark.long, pytest.mark.slow]

KILLS = int(os.environ.get("ICEBERG_OPS_DATA_STEP_CLI_KILLS", "1"))
SEED = int(os.environ.get("ICEBERG_OPS_CRASH_SEED", time.time_ns() % 10_000))
COMMAND = [sys.executable, "-c", "import sys; from iceberg_ops_provider.cli import main; sys.exit(main())"]
"""``iceberg-ops`` in a fresh interpreter of this environment (the one whose code the test imports)."""
FILES, ROWS = 6, 500
SCHEMA = pa.schema([("id", pa.int64()), ("k", pa.int64()), ("v", pa.int64())])
UPGRADE = (
    'ctx.update_rows("orders", {"v": lambda batch: pc.multiply(batch["v"], 2)}, where="k >= 1")\n'
    'ctx.delete_rows("orders", "k = 0")'
)


def _before() -> dict[int, dict[str, Any]]:
    return {i: {"id": i, "k": i % 5, "v": i} for i in range(FILES * ROWS)}


def _upgraded() -> dict[int, dict[str, Any]]:
    return {i: {**row, "v": row["v"] * 2} for i, row in _before().items() if row["k"] != 0}


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def flags(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[list[str]]:
    """Options naming an empty catalog: the test's SQLite lake, or a PostgreSQL database of its own."""
    lake = Lake(tmp_path)
    if request.param == "sqlite":
        yield lake.flags
        return
    url = request.getfixturevalue("new_postgres_database")
    yield ["--catalog", "sql", "--catalog-uri", url, "--warehouse", str(lake.warehouse)]


def _catalog(flags: list[str]) -> Any:
    options = dict(zip(flags[::2], flags[1::2], strict=True))
    if options["--catalog"] == "sqlite":
        return CatalogFactory.build("sqlite", db_path=options["--db-path"], warehouse_dir=options["--warehouse"])
    return CatalogFactory.build("sql", uri=options["--catalog-uri"], warehouse_dir=options["--warehouse"])


def _command(flags: list[str], namespace: str, migrations: Path, *args: str) -> list[str]:
    return [*COMMAND, *flags, "--namespace", namespace, "--migrations-dir", str(migrations), *args]


def _start(command: list[str]) -> subprocess.Popen[str]:
    # SIGINT with its default handling, as from a terminal (a background job inherits it ignored).
    return subprocess.Popen(
        command,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )


def _first_step_units(catalog: Any, name: str) -> int:
    """Units of the migration's first data step committed so far: one snapshot each, marked with the step's id."""
    steps = [
        s.summary.additional_properties.get("iceberg-ops.data-step")
        for s in catalog.load_table(name).metadata.snapshots
    ]
    steps = [step for step in steps if step]
    return steps.count(steps[0]) if steps else 0


def _stop_inside(process: subprocess.Popen[str], chance: random.Random, watch: Callable[[], int] | None) -> str:
    """Send the signal once ``watch`` counts a random number of units done, a random part of a unit later.

    The moment comes from the table (polled), not from the command's progress lines: those are at most one a
    second, and a whole step can take less. ``None``: once the command printed a line.
    """
    target = chance.randint(1, FILES - 2) if watch else 0
    fraction = chance.random()
    output: list[bytes] = []
    stream = process.stdout.fileno()  # type: ignore[union-attr]
    seen, last, pace = 0, time.monotonic(), None
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and process.poll() is None:
        # Raw reads of the pipe: the pipe never fills, and no line waits in a reader's buffer.
        chunk = os.read(stream, 65536) if select.select([stream], [], [], 0.005)[0] else b""
        output.append(chunk)
        if watch is None:
            if chunk:
                break
            continue
        done = watch()
        if done > seen:
            now = time.monotonic()
            pace, last, seen = (now - last) / (done - seen) if seen else pace, now, done
        if seen >= target:
            time.sleep(fraction * (pace or 0.0))
            break
    process.send_signal(process.signal)  # type: ignore[attr-defined]
    rest, _ = process.communicate(timeout=120)
    return b"".join(output).decode(errors="replace") + rest


def _files_of_snapshots(table: Any) -> set[str]:
    paths = set()
    for snapshot in table.metadata.snapshots:
        for manifest in snapshot.manifests(table.io):
            for entry in manifest.fetch_manifest_entry(table.io, discard_deleted=False):
                paths.add(entry.data_file.file_path.removeprefix("file://"))
    return paths


def _data_files_on_disk(table: Any) -> set[str]:
    return {str(path) for path in Path(table.location().removeprefix("file://"), "data").rglob("*.parquet")}


def _rows(table: Any) -> dict[int, dict[str, Any]]:
    read = table.refresh().scan().to_arrow().to_pylist()
    rows = {row["id"]: row for row in read}
    assert len(rows) == len(read), f"{len(read) - len(rows)} row(s) twice"
    return rows


def _units(table: Any, step_id: str) -> tuple[int, int]:
    state = find_step_state(table.refresh().metadata, step_id)
    return (0, FILES) if state is None else (state.units_done, state.units_total)


def _trial(flags: list[str], root: Path, namespace: str, chance: random.Random, number: int) -> bool:
    """An upgrade and a downgrade stopped by signal ``number``; whether the upgrade's stop landed in its first step."""
    migrations = root / "migrations"
    catalog = _catalog(flags)
    catalog.create_namespace(namespace)
    table = catalog.create_table(f"{namespace}.orders", SCHEMA, properties={UNIT_BYTES_PROPERTY: "1"})
    rows = list(_before().values())
    for n in range(FILES):
        table.append(pa.Table.from_pylist(rows[n * ROWS : (n + 1) * ROWS], schema=SCHEMA))

    upgrade = _start(_command(flags, namespace, migrations, "upgrade"))
    upgrade.signal = number  # type: ignore[attr-defined]
    output = _stop_inside(upgrade, chance, lambda: _first_step_units(catalog, f"{namespace}.orders"))
    assert upgrade.returncode in (0, -signal.SIGKILL, -signal.SIGINT, 130), output
    table.refresh()
    steps = sorted(
        {s.summary.additional_properties.get("iceberg-ops.data-step") for s in table.metadata.snapshots} - {None}
    )
    landed = bool(steps) and 1 <= _units(table, steps[0])[0] < FILES
    assert not _files_of_snapshots(table) - _data_files_on_disk(table), "a committed file was deleted"
    unreferenced = _data_files_on_disk(table) - _files_of_snapshots(table)
    assert len(unreferenced) <= 2, f"{len(unreferenced)} files of uncommitted units left: {output}"

    settled = subprocess.run(_command(flags, namespace, migrations, "upgrade"), capture_output=True, text=True)
    assert settled.returncode == 0, settled.stdout + settled.stderr
    assert _rows(table) == _upgraded()
    history = subprocess.run(_command(flags, namespace, migrations, "history"), capture_output=True, text=True)
    assert history.stdout.count("0001") == 1, history.stdout

    downgrade = _start(_command(flags, namespace, migrations, "downgrade", "base", "--yes"))
    downgrade.signal = number  # type: ignore[attr-defined]
    output = _stop_inside(downgrade, chance, None)
    assert downgrade.returncode in (0, -signal.SIGKILL, -signal.SIGINT, 130), output
    settled = subprocess.run(
        _command(flags, namespace, migrations, "downgrade", "base", "--yes"), capture_output=True, text=True
    )
    assert settled.returncode == 0, settled.stdout + settled.stderr
    assert _rows(table) == _before()
    assert not _files_of_snapshots(table) - _data_files_on_disk(table)
    catalog.close()
    return landed


@pytest.mark.parametrize("number", [signal.SIGKILL, signal.SIGINT], ids=["sigkill", "ctrl-c"])
def test_a_stopped_command_settles_with_the_next_plain_command(flags, tmp_path, number):
    write_migration(
        tmp_path / "migrations",
        "0001_double.py",
        "import pyarrow.compute as pc\n" + UPGRADE,
        downgrade='ctx.restore_data("orders")',
    )
    chance = random.Random(f"{SEED}-{number}-{flags[1]}")
    landed = attempts = 0
    while landed < KILLS and attempts < 3 * KILLS:
        try:
            landed += _trial(flags, tmp_path, f"t{attempts}", chance, number)
        except AssertionError as exc:
            raise AssertionError(f"trial {attempts}, seed {SEED}: {exc}") from exc
        attempts += 1
    assert landed == KILLS, f"{landed} of {attempts} stops landed inside the step (seed {SEED})"
