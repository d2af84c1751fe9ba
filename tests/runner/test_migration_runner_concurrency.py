"""Real concurrency: several processes upgrading one namespace of one catalog (SQLite, PostgreSQL) at once."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

from iceberg_ops_provider.runner import MigrationRunner
from tests.support.migrations import write_migration

WORKER = """
import json, sys, time
from pathlib import Path
from iceberg_ops_provider.catalogs import CatalogFactory
from iceberg_ops_provider.errors import ConcurrentMigrationError
from iceberg_ops_provider.runner import MigrationRunner

root, backend, number = Path(sys.argv[1]), json.loads(sys.argv[2]), sys.argv[3]
catalog = CatalogFactory.build(backend["kind"], **backend["options"])
runner = MigrationRunner(catalog, "sales", root / "migrations")
(root / f"ready-{number}").touch()  # at the start line
while not (root / "go").exists():
    time.sleep(0.01)
applied, refused = [], 0
deadline = time.monotonic() + 120
while time.monotonic() < deadline:
    try:
        applied += [r.version for r in runner.upgrade()]
    except ConcurrentMigrationError:
        refused += 1
        time.sleep(0.05)
        continue
    if not runner.status().pending:
        break
print(json.dumps({"applied": applied, "refused": refused}))
"""

MARK = """
import time
with open({marker!r}, "a") as marks:
    marks.write("{version}\\n")
time.sleep(0.1)  # the lock is held for a while whatever the machine's speed, so the other workers meet it
ctx.set_properties("orders", v{version}="1")
"""


def test_several_processes_upgrade_one_namespace_each_body_runs_once(tmp_path: Path, catalog_backend):
    migrations = tmp_path / "migrations"
    marker = tmp_path / "executions.log"
    write_migration(
        migrations,
        "0001_create.py",
        f'with open({str(marker)!r}, "a") as marks:\n    marks.write("0001\\n")\n'
        'ctx.create_table("orders", pa.schema([pa.field("id", pa.int64())]))',
    )
    versions = [f"{n:04d}" for n in range(2, 9)]
    for version in versions:
        write_migration(migrations, f"{version}_step.py", MARK.format(marker=str(marker), version=version))
    processes = [
        subprocess.Popen(
            [sys.executable, "-c", WORKER, str(tmp_path), catalog_backend.to_json(), str(number)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for number in range(4)
    ]
    deadline = time.monotonic() + 120
    while not all((tmp_path / f"ready-{number}").exists() for number in range(4)):  # all at the start line
        for process in processes:
            assert process.poll() is None, process.communicate()[1]
        assert time.monotonic() < deadline, "the workers did not reach the start line"
        time.sleep(0.01)
    (tmp_path / "go").touch()
    reports = []
    for process in processes:
        out, err = process.communicate(timeout=300)
        assert process.returncode == 0, err
        reports.append(json.loads(out.strip().splitlines()[-1]))

    executions = Counter(marker.read_text().split())
    assert executions == Counter({"0001": 1, **dict.fromkeys(versions, 1)})
    applied_by_workers = [version for report in reports for version in report["applied"]]
    assert sorted(applied_by_workers) == ["0001", *versions]  # each version reported by exactly one worker
    assert sum(report["refused"] for report in reports) > 0  # the lock really was contended

    catalog = catalog_backend.build()
    runner = MigrationRunner(catalog, "sales", migrations)
    history = runner.history()
    assert sorted(row.version for row in history) == ["0001", *versions]  # one row per version
    assert {row.status for row in history} == {"applied"}
    assert runner.lock.info() is None
    properties = catalog.load_table("sales.orders").properties
    assert all(properties[f"v{version}"] == "1" for version in versions)
