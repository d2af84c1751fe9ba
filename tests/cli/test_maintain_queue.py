"""``iceberg-ops maintain queue``: real processes on a SQLite catalog."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pyarrow as pa

from tests.cli.ops_support import run
from tests.support.lake import Lake

SCHEMA = pa.schema([pa.field("id", pa.int64())])


def _ops(lake: Lake, *args: str) -> subprocess.CompletedProcess[str]:
    return run(lake.root, *lake.flags, *args)


def _appends(catalog, identifier: str, count: int, properties: dict[str, str] | None = None):
    table = catalog.create_table(identifier, schema=SCHEMA, properties=properties or {})
    for n in range(count):
        table.append(pa.table({"id": [n]}, schema=SCHEMA))
    return table


def test_queue_ranks_degraded_tables_holds_policy_and_reports_a_broken_one(lake: Lake):
    catalog = lake.catalog()
    catalog.create_namespace("sales")
    catalog.create_namespace("ops")
    _appends(catalog, "sales.few", 6)
    _appends(catalog, "ops.many", 12)
    _appends(catalog, "sales.healthy", 1)
    _appends(catalog, "sales.off", 6, {"iceberg-ops.maintenance.enabled": "false"})
    _appends(catalog, "sales.quiet", 6, {"iceberg-ops.maintenance.quiet-hours": "00-24"})
    catalog.close()

    done = _ops(lake, "maintain", "queue", "--json")
    assert done.returncode == 0, done.stderr
    found = json.loads(done.stdout)
    assert set(found) == {"namespaces", "generated_at", "ranked", "held", "errors", "healthy"}
    assert found["namespaces"] == ["ops", "sales"]
    assert [entry["table"] for entry in found["ranked"]] == ["ops.many", "sales.few"]
    first = found["ranked"][0]
    assert (first["needs"], first["files_removed"], first["score"], first["held"]) == (["compact"], 11, 11.0, None)
    assert isinstance(first["rewrite_bytes"], int) and first["rewrite_bytes"] > 0
    assert first["recommendations"][0]["function"] == "compact_small_files_streaming"
    assert {entry["table"]: entry["held"] for entry in found["held"]} == {
        "sales.off": "disabled",
        "sales.quiet": "quiet_hours",
    }
    assert found["healthy"] == ["sales.healthy"] and found["errors"] == []

    human = _ops(lake, "maintain", "queue", "--namespace", "sales")
    assert human.returncode == 0, human.stderr
    lines = human.stdout.splitlines()
    assert lines[0].startswith("Maintenance queue of sales: 1 table(s) need work, 2 held by policy")
    assert lines[1].split() == [
        "rank",
        "table",
        "score",
        "needs",
        "files",
        "-",
        "manifests",
        "-",
        "snapshots",
        "-",
        "rewrites",
    ]
    assert lines[2].split()[:4] == ["1", "sales.few", "5", "compact"]
    assert "ops.many" not in human.stdout
    assert "held: sales.off: maintenance off by its policy" in human.stdout
    assert "held: sales.quiet: inside its quiet hours (UTC); would need compact" in human.stdout

    catalog = lake.catalog()
    damaged = catalog.load_table("sales.few")
    Path(damaged.current_snapshot().manifest_list.removeprefix("file://")).unlink()
    catalog.close()
    broken = _ops(lake, "--json", "maintain", "queue")
    assert broken.returncode == 1, broken.stderr
    found = json.loads(broken.stdout)
    assert [entry["table"] for entry in found["ranked"]] == ["ops.many"]
    assert found["errors"][0]["table"] == "sales.few" and found["errors"][0]["error"] == "FileNotFoundError"
    text = _ops(lake, "maintain", "queue")
    assert text.returncode == 1 and "could not be read: sales.few: metadata (FileNotFoundError)" in text.stdout


def test_queue_of_an_unknown_namespace_is_a_usage_error(lake: Lake):
    lake.catalog().create_namespace("sales")
    done = _ops(lake, "maintain", "queue", "--namespace", "nowhere")
    assert done.returncode == 2, (done.returncode, done.stdout, done.stderr)
    assert "namespace 'nowhere' does not exist in the catalog (existing namespaces: sales)" in done.stderr


def test_the_text_names_a_table_over_its_budget_and_a_bad_policy_once(lake: Lake):
    catalog = lake.catalog()
    catalog.create_namespace("sales")
    _appends(catalog, "sales.tight", 6, {"iceberg-ops.maintenance.max-rewrite-bytes": "1000"})
    _appends(catalog, "sales.bad", 1, {"iceberg-ops.maintenance.small-file-share": "2"})
    catalog.close()

    text = _ops(lake, "maintain", "queue")
    assert text.returncode == 1, (text.stdout, text.stderr)
    lines = text.stdout.splitlines()
    (over,) = [line for line in lines if line.startswith("over budget: ")]
    assert over.startswith("over budget: sales.tight: its compaction rewrites ")
    assert "more than the 1,000 B one run may rewrite (iceberg-ops.maintenance.max-rewrite-bytes)" in over
    (bad,) = [line for line in lines if line.startswith("could not be read: ")]
    assert bad.startswith("could not be read: sales.bad: policy (MaintenancePolicyError): maintenance policy: ")
    assert bad.count("sales.bad") == 1
