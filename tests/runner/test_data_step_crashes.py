"""SIGKILLs that land inside a migration's data steps: the next plain upgrade settles every trial, exactly once.

Each trial upgrades a fresh namespace in a worker process: one migration that adds a column and runs a data
operation on (a copy: from) a table of 8 files whose unit size (``iceberg-ops.data-step.unit-bytes``) makes
each file a unit of its own. The worker writes each line its runner reports to a file, and the step reports
every unit it commits. The test waits until the step has committed a random number of its units, waits less
than a unit or two take, and kills the worker with SIGKILL. The kill must provably land inside the step: read
from the table right after it, the step's record holds at least one unit and not all of them (a trial that
does not land is run again and does not count). Right after the kill no row is there twice. Then a plain
``MigrationRunner(...).upgrade()`` here, as an operator would run it (Airflow's retry of the task is the same
call in a new process): no ``PartialMigrationError``, the migration recorded once, the lock released and its
intent record cleared, no table keeping a step's state property, and the rows exactly those expected: each
id once, each value changed exactly once (``v = v * 2`` shows a unit applied twice).

Trials take turns among three ways of dying:

- alone;
- with rows appended while the step runs: the worker is frozen (SIGSTOP) inside the step, one to three appends
  land, and it is thawed. A step changes the rows of the snapshot it planned on and keeps the rows appended
  after it as they are, so each appended row is expected changed or not by where its snapshot lies (a later
  step of the migration plans on a later snapshot);
- with a second runner taking the lock over: the worker runs with a 2 s lease and is frozen (SIGSTOP) inside
  the step; once its lease has run out a second worker takes the lock over and resumes the step; the first is
  thawed (SIGCONT) while the second runs, so both work on the same step until the second is killed. The first
  must stop on the lost lock without recording anything.

With five or more trials per operation, each way of dying must land at least once.

``ICEBERG_OPS_DATA_STEP_KILLS`` sets the trials per operation (5 by default, 25 over the five operations;
``make crash`` runs 15 each); ``ICEBERG_OPS_CRASH_SEED`` replays a run's random choices (not the machine's
timing). Each data operation of the migration context is one entry of ``CASES``: a new one is one more entry.
"""

from __future__ import annotations

import contextlib
import multiprocessing
import os
import random
import re
import signal
import sqlite3
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from pyiceberg.exceptions import CommitFailedException
from pyiceberg.table.snapshots import ancestors_of

from iceberg_ops_provider.data_migration.state import MoveState
from iceberg_ops_provider.history.intent import IntentAction, _data_state
from iceberg_ops_provider.migration.data_run import UNIT_BYTES_PROPERTY
from iceberg_ops_provider.runner import MigrationRunner
from tests.support.lake import Lake
from tests.support.migrations import write_migration

pytestmark = pytest.mark.long

KILLS = int(os.environ.get("ICEBERG_OPS_DATA_STEP_KILLS", "5"))
SEED = int(os.environ.get("ICEBERG_OPS_CRASH_SEED", time.time_ns() % 10_000))
FILES, ROWS = 8, 40
LEASE = 2.0
"""The lease of a worker a second runner takes over from (a lock's shortest is 1 s)."""
MODES = ("alone", "appender", "takeover")
TABLE = "orders"
STATE_PREFIXES = ("iceberg-ops.data-step.", "iceberg-ops.move.")
"""The table properties a data step (and a copy step's move) mirrors its state in."""
SCHEMA = pa.schema([("id", pa.int64()), ("k", pa.int64()), ("v", pa.int64())])

Rows = dict[int, dict[str, Any]]
Seen = Callable[[int], Rows]
"""The appended rows the migration's ``n``-th data step planned on (in its plan snapshot)."""

_FORKS = multiprocessing.get_context("forkserver")
# Workers fork from a server that imported these once: a worker starts in a fraction of the second a new
# interpreter takes to import them, and is a process of its own all the same.
_FORKS.set_forkserver_preload(["pyiceberg.catalog.sql", "pyiceberg.io.pyarrow", "tests.runner.test_data_step_crashes"])


@dataclass(frozen=True)
class Case:
    """One data operation: the migration that runs it as its first data step, and what it leaves.

    ``marker`` starts the step's progress lines. ``expected`` maps the table's rows before, the rows
    appended by others (both without the migration's new column) and which of them each step planned on
    to each table's rows afterwards; ``check`` looks at the table once settled, given the snapshots the
    step planned on (its plan snapshot and those before it).
    """

    operation: str
    body: str
    marker: str
    expected: Callable[[Rows, Rows, Seen], dict[str, Rows]]
    check: Callable[[Any, set[int]], None] | None = None


def _delete_expected(before: Rows, appended: Rows, seen: Seen) -> dict[str, Rows]:
    deleted = {i for i, row in {**before, **seen(1)}.items() if row["k"] < 2}
    return {TABLE: {i: {**row, "note": None} for i, row in {**before, **appended}.items() if i not in deleted}}


def _update_expected(before: Rows, appended: Rows, seen: Seen) -> dict[str, Rows]:
    doubled = {i for i, row in {**before, **seen(1)}.items() if row["k"] >= 1}
    noted = set(before) | set(seen(2))
    return {
        TABLE: {
            i: {**row, "v": row["v"] * 2 if i in doubled else row["v"], "note": "done" if i in noted else None}
            for i, row in {**before, **appended}.items()
        }
    }


def _backfill_expected(before: Rows, appended: Rows, seen: Seen) -> dict[str, Rows]:
    filled = {i for i, row in {**before, **seen(1)}.items() if row["k"] != 3}
    return {
        TABLE: {
            i: {**row, "score": row["v"] * 10 + 1 if i in filled else None} for i, row in {**before, **appended}.items()
        }
    }


def _rewrite_expected(before: Rows, appended: Rows, seen: Seen) -> dict[str, Rows]:
    return {TABLE: {i: {**row, "note": None} for i, row in {**before, **appended}.items()}}


def _copy_expected(before: Rows, appended: Rows, seen: Seen) -> dict[str, Rows]:
    copied = {
        i: {"id": i, "k": row["k"], "value": row["v"]} for i, row in {**before, **seen(1)}.items() if row["k"] >= 2
    }
    return {TABLE: {i: {**row, "note": None} for i, row in {**before, **appended}.items()}, "archive": copied}


def _all_in_current_spec(table: Any, planned: set[int]) -> None:
    """Every file the step planned on is in the current spec now (one appended after its plan may not be)."""
    spec = table.spec().spec_id
    for manifest in table.current_snapshot().manifests(table.io):
        if manifest.partition_spec_id != spec:
            for entry in manifest.fetch_manifest_entry(table.io, discard_deleted=True):
                assert entry.snapshot_id not in planned, (
                    f"{entry.data_file.file_path} left in spec {manifest.partition_spec_id}"
                )


CASES = {
    case.operation: case
    for case in (
        Case(
            "delete_rows",
            'ctx.add_column("orders", "note", "string")\nctx.delete_rows("orders", "k < 2")',
            "delete rows of",
            _delete_expected,
        ),
        Case(
            "update_rows",
            'ctx.add_column("orders", "note", "string")\n'
            'ctx.update_rows("orders", {"v": lambda batch: pc.multiply(batch["v"], 2)}, where="k >= 1")\n'
            'ctx.backfill("orders", "note", "done")',
            "update v of",
            _update_expected,
        ),
        Case(
            "backfill",
            'ctx.add_column("orders", "score", "long")\n'
            'ctx.backfill("orders", "score", lambda batch: pc.add(pc.multiply(batch["v"], 10), 1), where="k <> 3")',
            "backfill score of",
            _backfill_expected,
        ),
        Case(
            "rewrite_partitions",
            'ctx.add_column("orders", "note", "string")\n'
            'ctx.add_partition_field("orders", "bucket(4, id)")\n'
            'ctx.rewrite_partitions("orders")',
            "rewrite the files of",
            _rewrite_expected,
            _all_in_current_spec,
        ),
        Case(
            "copy_rows",
            'ctx.add_column("orders", "note", "string")\n'
            'ctx.create_table("archive", pa.schema([("id", pa.int64()), ("k", pa.int64()), ("value", pa.int64())]), '
            f'properties={{"{UNIT_BYTES_PROPERTY}": 1}})\n'
            'ctx.copy_rows("orders", "archive", where="k >= 2", columns=["id", "k", "v"], rename={"v": "value"})',
            "copy id, k, v (renamed: v as value) of orders into archive",
            _copy_expected,
        ),
    )
}


def _rows_before() -> Rows:
    """The table's rows: every third file matches ``k < 2`` whole (a delete drops it unread)."""
    files = [range(n * ROWS, (n + 1) * ROWS) for n in range(FILES)]
    return {i: {"id": i, "k": 0 if n % 3 == 2 else i % 5, "v": i} for n, ids in enumerate(files) for i in ids}


def _create_table(catalog: Any, namespace: str) -> None:
    catalog.create_namespace(namespace)
    # PyIceberg's own retry of a lost append commits the files it wrote for the partition spec it started
    # from, and fails (IndexError) when the spec changed meanwhile: the appender retries by itself instead.
    properties = {UNIT_BYTES_PROPERTY: "1", "commit.retry.num-retries": "0"}
    table = catalog.create_table(f"{namespace}.{TABLE}", SCHEMA, properties=properties)
    rows = list(_rows_before().values())
    for n in range(FILES):
        table.append(pa.Table.from_pylist(rows[n * ROWS : (n + 1) * ROWS], schema=SCHEMA))


def _read(catalog: Any, identifier: str) -> Rows:
    """The rows of a table by id; no id twice."""
    read = catalog.load_table(identifier).scan().to_arrow().to_pylist()
    by_id = {row["id"]: row for row in read}
    assert len(by_id) == len(read), f"{identifier}: {len(read) - len(by_id)} row(s) twice"
    return by_id


def _work(root: Path, namespace: str, migrations: Path, events: Path, stderr: Path, stale_after: float) -> None:
    """A worker's life: upgrade ``namespace``, writing each line its runner reports to ``events``."""
    # Yield the cores to the test process, so that when other tests load the machine, the test still sees a
    # unit's line and kills in time instead of the whole step finishing while it waits for a core.
    os.nice(10)
    os.dup2(os.open(stderr, os.O_WRONLY | os.O_CREAT | os.O_APPEND), 2)
    with events.open("a", buffering=1) as log:
        runner = MigrationRunner(
            Lake(root).catalog(),
            namespace,
            migrations,
            on_event=lambda line: log.write(line + "\n"),
            stale_after=stale_after,
        )
        runner.upgrade()


class Worker:
    """A worker process upgrading ``namespace``; what its runner reports goes to a file, read here."""

    def __init__(self, root: Path, namespace: str, migrations: Path, name: str, stale_after: float = 180.0) -> None:
        self.events = root / f"{namespace}-{name}.events"
        self.stderr_path = root / f"{namespace}-{name}.stderr"
        arguments = (root, namespace, migrations, self.events, self.stderr_path, stale_after)
        self.process = _FORKS.Process(target=_work, args=arguments, daemon=True)
        self.process.start()

    @property
    def stderr(self) -> str:
        """The end of what it wrote to its standard error."""
        return self.stderr_path.read_text(errors="replace")[-3000:] if self.stderr_path.exists() else ""

    @property
    def returncode(self) -> int | None:
        """Its exit code, ``-9`` after SIGKILL; ``None`` while it runs."""
        return self.process.exitcode

    def running(self) -> bool:
        """Whether it has not ended (a frozen process runs)."""
        return self.process.is_alive()

    def units(self, marker: str) -> list[tuple[int, int]]:
        """``(units done, units in all)`` of each progress line of the step so far."""
        text = self.events.read_text() if self.events.exists() else ""
        return [
            (int(m[1]), int(m[2])) for m in re.finditer(re.escape(marker) + r"[^\n]*?unit (\d+)(?:/| of )(\d+)", text)
        ]

    def wait_units(self, marker: str, done: int, timeout: float = 120) -> tuple[int, float]:
        """Wait until the step reports ``done`` units; returns its units in all and how long the last one took.

        The duration is ``0`` when the first line seen already reports ``done``.
        """
        deadline = time.monotonic() + timeout
        seen, last_seen, pace = 0, time.monotonic(), 0.0
        while True:
            units = self.units(marker)
            if len(units) > seen:
                now = time.monotonic()
                pace, last_seen, seen = (now - last_seen if seen else 0.0), now, len(units)
                if units[-1][0] >= done:
                    return units[-1][1], pace
            assert self.running(), f"the worker ended before unit {done}: {self.stderr}"
            assert time.monotonic() < deadline, f"no unit {done} within {timeout} s: {self.stderr}"
            time.sleep(0.005)

    def signal(self, number: int) -> None:
        """Send signal ``number``, unless the process has ended (its pid may be another's by now)."""
        if self.running():
            with contextlib.suppress(ProcessLookupError):  # it ended just now
                os.kill(self.process.pid, number)

    def kill(self) -> None:
        """SIGKILL it and wait until it is gone."""
        self.signal(signal.SIGKILL)
        self.wait()

    def wait(self, timeout: float = 120) -> int | None:
        """Wait for it to end (its pid reaped: a lock naming it is seen as left by a gone process); its exit code."""
        self.process.join(timeout)
        return self.process.exitcode


def _append(catalog: Any, identifier: str, first_id: int) -> tuple[int, Rows]:
    """Append three rows from ``first_id`` on, again at once after a lost race; the snapshot that holds them."""
    rows = {i: {"id": i, "k": i % 5, "v": i} for i in range(first_id, first_id + 3)}
    for _ in range(100):
        table = catalog.load_table(identifier)
        try:
            table.append(pa.Table.from_pylist(list(rows.values()), schema=SCHEMA))
        except CommitFailedException:
            continue  # lost a race to another commit: nothing landed
        return table.metadata.current_snapshot_id, rows
    raise AssertionError(f"no append to {identifier} landed in 100 tries")


@dataclass
class Trial:
    """One trial: its namespace, the rows appended meanwhile, and where the kill landed."""

    root: Path
    case: Case
    namespace: str
    migrations: Path
    chance: random.Random
    pace: float
    """How long a unit took when last measured: the next naps are drawn from it."""
    batches: list[tuple[int, Rows]] = field(default_factory=list)
    landed: tuple[int, int] | None = None
    """The step's units done and in all right after the kill, when it landed inside the step."""

    @property
    def identifier(self) -> str:
        return f"{self.namespace}.{TABLE}"

    @property
    def appended(self) -> Rows:
        return {i: row for _, rows in self.batches for i, row in rows.items()}

    def target(self, units: int, spare: int) -> int:
        """A unit to wait for: at least the first, leaving ``spare`` units after it."""
        return self.chance.randint(1, max(1, units - 1 - spare))

    def nap(self, pace: float) -> None:
        """Sleep for less than a unit or two take (as last measured), so the kill falls inside the step."""
        self.pace = pace or self.pace
        time.sleep(self.chance.uniform(0, 1.5 * self.pace))


def _alone(trial: Trial, catalog: Any, *, appending: bool) -> None:
    worker = Worker(trial.root, trial.namespace, trial.migrations, "worker")
    try:
        units, _ = worker.wait_units(trial.case.marker, 1)
        _, pace = worker.wait_units(trial.case.marker, trial.target(units, spare=1))
        if appending:
            # Frozen between two catalog calls, the worker lets rows be appended while its step runs (a thread
            # appending all along loses every race to a step's commits on a fast machine, and wins every race on
            # a loaded one, starving the step); thawed, it commits its next units over them.
            _freeze(worker, trial.root)
            try:
                for _ in range(trial.chance.randint(1, 3)):
                    trial.batches.append(_append(catalog, trial.identifier, 1_000_000 + 3 * len(trial.batches)))
            finally:
                worker.signal(signal.SIGCONT)
        trial.nap(pace)
    finally:
        worker.kill()
    assert worker.returncode in (0, -signal.SIGKILL), f"the worker failed: {worker.stderr}"


def _freeze(worker: Worker, root: Path) -> None:
    """SIGSTOP ``worker`` at a moment it holds no lock of the SQLite catalog's file.

    A process frozen inside a SQLite read or write would block every other process's commits: a trait of a
    catalog in one local file, not of a paused runner (a catalog server holds no lock for a paused client).
    """
    for _ in range(100):
        worker.signal(signal.SIGSTOP)
        probe = sqlite3.connect(root / "catalog.db", timeout=0.2, isolation_level=None)
        try:
            probe.execute("BEGIN EXCLUSIVE")  # refused while another holds even a read lock
            probe.execute("ROLLBACK")
            return
        except sqlite3.OperationalError:
            worker.signal(signal.SIGCONT)
            time.sleep(0.01)
        finally:
            probe.close()
    raise AssertionError("the worker held the catalog's file locked at every try")


def _takeover(trial: Trial, catalog: Any, runner: MigrationRunner) -> None:
    first = Worker(trial.root, trial.namespace, trial.migrations, "first", stale_after=LEASE)
    second: Worker | None = None
    try:
        units, _ = first.wait_units(trial.case.marker, 1)
        _, pace = first.wait_units(trial.case.marker, trial.target(units, spare=3))
        trial.nap(pace)
        _freeze(first, trial.root)
        holder = runner.lock.info()
        if holder is None or _landing(trial, catalog, runner) is None:
            # Its step ended before the freeze (its last units and the record take less than a nap on a fast
            # machine): no takeover inside the step, the trial does not count.
            first.signal(signal.SIGCONT)
            assert first.wait() == 0, f"the worker failed: {first.stderr}"
            return
        while datetime.now(UTC) < holder.expires_at() + timedelta(seconds=0.2):
            time.sleep(0.05)
        second = Worker(trial.root, trial.namespace, trial.migrations, "second")
        _, pace = second.wait_units(trial.case.marker, 1)
        first.signal(signal.SIGCONT)  # both work on the step now, one of them without the lock
        trial.nap(pace)
        second.kill()
        trial.landed = _landing(trial, catalog, runner)  # now: the thawed worker may yet commit a unit
    finally:
        first.signal(signal.SIGCONT)
        if second is not None:
            second.kill()
    assert second.returncode in (0, -signal.SIGKILL), f"the second worker failed: {second.stderr}"
    assert "took over the migration lock" in second.events.read_text()
    assert first.wait() == 1, f"the first worker did not stop: {first.stderr}"
    assert "LockLostError" in first.stderr, first.stderr


def _data_actions(runner: MigrationRunner) -> list[IntentAction]:
    """The interrupted run's data steps, in order (none when no run was interrupted)."""
    intent = runner.lock.intent()
    return [action for action in intent.actions if action.kind == "data"] if intent is not None else []


def _units(catalog: Any, action: IntentAction) -> tuple[int, int] | None:
    """A data step's units done and in all, as the next run's assessment reads them (``None``: none done)."""
    state = _data_state(catalog, action)
    if state is None:
        return None
    return len(state.done), state.unit_count if isinstance(state, MoveState) else state.units_total


def _landing(trial: Trial, catalog: Any, runner: MigrationRunner) -> tuple[int, int] | None:
    """The first step's units done and in all when the kill landed inside it; ``None`` when it did not."""
    actions = _data_actions(runner)
    units = _units(catalog, actions[0]) if actions else None
    return units if units is not None and 1 <= units[0] < units[1] else None


def _planned(catalog: Any, trial: Trial, actions: list[IntentAction]) -> dict[int, set[int]]:
    """The snapshots of the table each data step planned on (its plan snapshot and those before it), by step.

    Every step reads the table (a copy, as its source).
    """
    table = catalog.load_table(trial.identifier)
    planned = {}
    for step, action in enumerate(actions, 1):
        state = _data_state(catalog, action)
        assert state is not None and state.complete, f"step {step} is not complete"
        plan = table.metadata.snapshot_by_id(
            state.snapshot_id if isinstance(state, MoveState) else state.plan_snapshot_id
        )
        assert plan is not None, f"the plan snapshot of step {step} is gone"
        planned[step] = {snapshot.snapshot_id for snapshot in ancestors_of(plan, table.metadata)}
    return planned


def _check_settled(trial: Trial, catalog: Any, before: Rows, actions: list[IntentAction]) -> int:
    """Upgrade as an operator would and check everything; returns how many rows were appended meanwhile.

    Without ``actions`` (the killed run had finished) the rows are not checked: which appended rows its
    steps planned on is not recorded anywhere the test reads, and such a trial does not count.
    """
    runner = MigrationRunner(catalog, trial.namespace, trial.migrations)
    runner.upgrade()  # a plain upgrade: no PartialMigrationError, nobody settles anything by hand
    assert [(row.version, row.status) for row in runner.history()] == [("0001", "applied")]
    assert runner.lock.read() == (None, None)  # the lock released, the intent record cleared
    status = runner.status()
    assert status.is_clean and status.interrupted is None and not status.pending
    for identifier in catalog.list_tables(trial.namespace):  # the recorded migration forgot its steps' state
        properties = catalog.load_table(identifier).properties
        left = [k for k in properties if k.startswith(STATE_PREFIXES) and k != UNIT_BYTES_PROPERTY]
        assert not left, f"{'.'.join(identifier)} keeps {left}"
    if not actions:
        return 0
    planned = _planned(catalog, trial, actions)

    def seen(step: int) -> Rows:
        return {i: row for snapshot, rows in trial.batches if snapshot in planned[step] for i, row in rows.items()}

    for name, rows in trial.case.expected(before, trial.appended, seen).items():
        assert _read(catalog, f"{trial.namespace}.{name}") == rows, name
    if trial.case.check is not None:
        trial.case.check(catalog.load_table(trial.identifier), planned[1])
    return len(trial.appended) - len(seen(1))


def _trial(trial: Trial, catalog: Any, mode: str) -> int:
    """Run one trial; how many rows were appended while its step ran."""
    _create_table(catalog, trial.namespace)
    before = _rows_before()
    runner = MigrationRunner(catalog, trial.namespace, trial.migrations)
    if mode == "takeover":
        _takeover(trial, catalog, runner)
    else:
        _alone(trial, catalog, appending=mode == "appender")
        trial.landed = _landing(trial, catalog, runner)
    actions = _data_actions(runner)
    if trial.landed is not None:
        assert runner.history() == []  # nothing recorded yet
        assert set(_read(catalog, trial.identifier)) <= set(before) | set(trial.appended)  # no row twice, even now
    return _check_settled(trial, catalog, before, actions)


@pytest.mark.parametrize("operation", sorted(CASES))
def test_sigkills_inside_a_data_step_settle_with_the_next_plain_upgrade(tmp_path: Path, operation: str):
    case = CASES[operation]
    migrations = tmp_path / "migrations"
    write_migration(migrations, f"0001_{operation}.py", f"import pyarrow.compute as pc\n{case.body}")
    catalog = Lake(tmp_path).catalog()
    chance = random.Random(f"{SEED}-{operation}")
    landed: list[tuple[str, tuple[int, int], int]] = []  # mode, (units done, units), rows appended meanwhile
    attempt, pace = 0, 0.1
    while len(landed) < KILLS and attempt < 3 * KILLS:
        # Turns by attempt, not by landed trial: a mode whose kills miss on this machine (its step's last units
        # done within a nap) cannot take every remaining attempt.
        mode = MODES[attempt % len(MODES)]
        trial = Trial(tmp_path, case, f"{operation}_{attempt}", migrations, chance, pace)
        attempt += 1
        try:
            meanwhile = _trial(trial, catalog, mode)
        except AssertionError as exc:
            raise AssertionError(f"{operation}, trial {attempt} ({mode}), seed {SEED}: {exc}") from exc
        if trial.landed is not None:
            landed.append((mode, trial.landed, meanwhile))
        pace = trial.pace
    assert len(landed) == KILLS, f"{len(landed)} of {attempt} kills landed inside the step (seed {SEED}): {landed}"
    if len(MODES) <= KILLS:
        missing = set(MODES) - {mode for mode, _, _ in landed}
        assert not missing, f"no {', '.join(sorted(missing))} trial landed inside the step (seed {SEED}): {landed}"
    if any(mode == "appender" for mode, _, _ in landed):
        assert any(meanwhile for _, _, meanwhile in landed), f"no row was appended while a step ran: {landed}"
