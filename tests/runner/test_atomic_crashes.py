"""SIGKILL at random moments of multi-table upgrades with all-or-nothing commits (SQLite, PostgreSQL, REST).

Each round upgrades a fresh namespace in a worker process and kills it at a random moment. Every
migration but the first changes two tables. Right after the kill, before anything recovers, the
catalog must show each migration entirely applied and recorded, or not at all: no table carries a
change its history does not record, and no recorded migration misses a change. The next run then
finishes the upgrade by itself; no migration ever needs a person, and none runs twice (each adds
columns, which fails when done twice).

On SeaweedFS's REST catalog (the S3 Tables protocol), creating tables falls outside the one commit
(its multi-table commit changes existing tables only), so there the tables are created first and
the kills land among the multi-table changes that follow.

A long suite (``make test-all``) of a few rounds; ``ICEBERG_OPS_ATOMIC_KILLS=30`` runs the full test.
"""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from iceberg_ops_provider.runner import MigrationRunner
from tests.conftest import CatalogBackend
from tests.support.migrations import write_migration

KILLS = int(os.environ.get("ICEBERG_OPS_ATOMIC_KILLS", "4"))
VERSIONS = [f"{n:04d}" for n in range(2, 10)]

WORKER = """
import json, sys
from pathlib import Path
from iceberg_ops_provider.catalogs import CatalogFactory
from iceberg_ops_provider.runner import MigrationRunner

root, namespace, backend = Path(sys.argv[1]), sys.argv[2], json.loads(sys.argv[3])
catalog = CatalogFactory.build(backend["kind"], **backend["options"])
runner = MigrationRunner(catalog, namespace, root / "migrations", atomic_commits=True)
(root / f"ready-{namespace}").touch()
runner.upgrade()
"""


def _write_migrations(folder: Path) -> None:
    write_migration(
        folder,
        "0001_create.py",
        'ctx.create_table("orders", pa.schema([("id", pa.int64())]))\n'
        'ctx.create_table("items", pa.schema([("id", pa.int64())]))',
    )
    for version in VERSIONS:
        body = f'ctx.add_column("orders", "c{version}", "string")\nctx.add_column("items", "c{version}", "string")'
        if int(version) % 3 == 0:
            body += f'\nctx.set_properties("orders", step="{version}")'
        write_migration(folder, f"{version}_step.py", body)


def _check_all_or_nothing(catalog, namespace: str, migrations: Path, seed: int) -> int:
    """What a kill left: each migration applied and recorded, or neither. Returns how many were applied."""
    runner = MigrationRunner(catalog, namespace, migrations, atomic_commits=True)
    statuses = {row.version: row.status for row in runner.history()}
    assert set(statuses.values()) <= {"applied"}, f"{statuses} (seed {seed})"
    tables = [name for name in ("orders", "items") if catalog.table_exists(f"{namespace}.{name}")]
    assert tables in ([], ["orders", "items"]), f"0001 half-applied: {tables} (seed {seed})"
    assert ("0001" in statuses) == bool(tables), f"0001 recorded {statuses.get('0001')}, tables {tables} (seed {seed})"
    if not tables:
        return 0
    columns = {name: set(catalog.load_table(f"{namespace}.{name}").schema().column_names) for name in tables}
    for version in VERSIONS:
        landed = {name: f"c{version}" in columns[name] for name in tables}
        assert len(set(landed.values())) == 1, f"{version} half-applied: {landed} (seed {seed})"
        assert landed["orders"] == (version in statuses), (
            f"{version}: committed {landed['orders']}, recorded {statuses.get(version)} (seed {seed})"
        )
    return len(statuses)


def _start_worker(root: Path, namespace: str, backend, seed: int) -> subprocess.Popen[bytes]:
    """A worker upgrading ``namespace``, returned once it has opened the catalog and is about to upgrade."""
    process = subprocess.Popen(
        [sys.executable, "-c", WORKER, str(root), namespace, backend.to_json()],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    ready = root / f"ready-{namespace}"
    deadline = time.monotonic() + 60
    while not ready.exists():
        assert process.poll() is None and time.monotonic() < deadline, f"worker failed to start (seed {seed})"
        time.sleep(0.01)
    return process


def _kill_rounds(backend: CatalogBackend, tmp_path: Path, rounds: int, *, create_first: bool = False) -> None:
    """Kill an upgrade of a fresh namespace at a random moment, ``rounds`` times; check, then recover.

    With ``create_first``, each namespace is upgraded to 0001 (its tables) before the killed run.
    """
    migrations = tmp_path / "migrations"
    _write_migrations(migrations)
    catalog = backend.build()
    seed = int(os.environ.get("ICEBERG_OPS_CRASH_SEED", time.time_ns() % 10_000))
    chooser = random.Random(seed)

    def prepared(namespace: str) -> str:
        if create_first:
            MigrationRunner(catalog, namespace, migrations, atomic_commits=True).upgrade("0001")
        return namespace

    # How long a whole upgrade takes here and now: kills are spread over that span, whatever the load.
    reference = _start_worker(tmp_path, prepared("reference"), backend, seed)
    started = time.monotonic()
    assert reference.wait(timeout=300) == 0, f"the reference upgrade failed (seed {seed})"
    span = time.monotonic() - started
    killed_mid_run = 0
    applied_at_kill: list[int] = []
    for round_number in range(rounds):
        namespace = prepared(f"atomic{round_number}")
        process = _start_worker(tmp_path, namespace, backend, seed)
        time.sleep(chooser.uniform(0, span))
        if process.poll() is None:
            killed_mid_run += 1
            os.killpg(process.pid, signal.SIGKILL)
        process.wait()
        assert process.returncode in (0, -signal.SIGKILL), f"worker failed (seed {seed})"
        applied_at_kill.append(_check_all_or_nothing(catalog, namespace, migrations, seed))

        runner = MigrationRunner(catalog, namespace, migrations, atomic_commits=True)
        runner.upgrade()  # no PartialMigrationError, no migration run twice
        history = runner.history()
        assert sorted(row.version for row in history) == ["0001", *VERSIONS]
        assert {row.status for row in history} == {"applied"}
        for name in ("orders", "items"):
            expected = ["id", *[f"c{v}" for v in VERSIONS]]
            assert catalog.load_table(f"{namespace}.{name}").schema().column_names == expected
        status = runner.status()
        assert status.is_clean and status.lock is None and status.interrupted is None
    assert killed_mid_run >= rounds // 2, f"most kills should land mid-run (seed {seed}): {applied_at_kill}"


@pytest.mark.long
def test_random_sigkills_never_leave_a_partial_or_unrecorded_migration(catalog_backend, tmp_path: Path):
    rounds = KILLS if catalog_backend.kind == "sqlite" else max(2, KILLS // 4)
    _kill_rounds(catalog_backend, tmp_path, rounds)


@pytest.mark.long
@pytest.mark.backends
def test_random_sigkills_on_a_rest_catalog(seaweedfs, unique_name, tmp_path: Path):
    seaweedfs.create_table_bucket(unique_name)
    backend = CatalogBackend("rest", seaweedfs.rest_properties(unique_name))
    assert MigrationRunner(backend.build(), "probe", tmp_path).commit_mode() == "rest-transaction"
    _kill_rounds(backend, tmp_path, max(1, KILLS // 4), create_first=True)
