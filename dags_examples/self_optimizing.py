"""Self-optimizing tables: the triggerer watches a namespace, and exactly the tables that fall due get maintained.

No schedule fires this DAG. It is scheduled on an asset whose watcher is a ``TableHealthTrigger``
(docs/maintenance/watch.md): the triggerer looks at the namespace's tables every poll interval, from
metadata alone, and fires an asset event naming the tables whose policy newly calls for work and what
work (compaction, manifest rewrite, snapshot expiry). A run reads the events that triggered it and maps
each step over just the tables that need it, with the parameters their health report recommends, at
most ``MAX_CONCURRENT_TABLES`` tables at a time per step. Each table's policy still holds
(``iceberg-ops.maintenance.*``, docs/maintenance/policy.md): its byte budget caps what one compaction
rewrites (what is left is announced again once the run commits), and a table whose policy turned
maintenance off or entered its quiet hours since the event is skipped by the task. Every task is
retry-safe; a run with nothing left to do finishes in seconds. See docs/maintenance/self_optimizing.md.

The watched namespace and the poll interval are read when the file is parsed, from the environment of
the dag-processor: ``ICEBERG_OPS_SELF_OPTIMIZING_NAMESPACE`` (default ``demo``) and
``ICEBERG_OPS_SELF_OPTIMIZING_POLL_SECONDS`` (default 300). The catalog is the ``iceberg_ops_default``
connection, which the triggerer must be able to read too. It starts paused: the watcher starts when
the file is parsed after the DAG was unpaused, and stops when it is parsed after it was paused.
"""

from __future__ import annotations

import os
from datetime import UTC, datetime, timedelta

from airflow.sdk import Asset, AssetWatcher, dag, task

from iceberg_ops_provider.operators.maintenance import (
    IcebergCompactOperator,
    IcebergExpireSnapshotsOperator,
    IcebergRewriteManifestsOperator,
)
from iceberg_ops_provider.triggers import TableHealthTrigger

NAMESPACE = os.environ.get("ICEBERG_OPS_SELF_OPTIMIZING_NAMESPACE", "demo")
POLL_SECONDS = float(os.environ.get("ICEBERG_OPS_SELF_OPTIMIZING_POLL_SECONDS", "300"))
# Tables one step maintains at the same time (across all workers); the others wait for a slot.
MAX_CONCURRENT_TABLES = 4

TABLE_HEALTH = Asset(
    name=f"iceberg_ops_table_health_{NAMESPACE}",
    uri=f"iceberg-ops://iceberg_ops_default/{NAMESPACE}",
    watchers=[
        AssetWatcher(
            name=f"iceberg_ops_table_health_{NAMESPACE}_watcher",
            trigger=TableHealthTrigger(namespace=NAMESPACE, poll_interval=POLL_SECONDS),
        )
    ],
)

RETRIES = {"retries": 2, "retry_delay": timedelta(seconds=30)}
# One step's tables at a time, at most MAX_CONCURRENT_TABLES of them; a step runs when the earlier ones
# did not fail (a step no table needs is skipped, and counts as done).
EACH_TABLE = {
    "trigger_rule": "none_failed",
    "max_active_tis_per_dagrun": MAX_CONCURRENT_TABLES,
    "map_index_template": "{{ task.table }}",
    **RETRIES,
}


@dag(
    schedule=[TABLE_HEALTH],
    start_date=datetime(2026, 1, 1, tzinfo=UTC),
    catchup=False,
    # Events that arrive while a run is active wait for it, and the next run takes all of them: a table
    # is never maintained by two runs at once.
    max_active_runs=1,
    is_paused_upon_creation=True,
    tags=["iceberg-ops", "example", "maintenance", "self-optimizing"],
)
def self_optimizing():
    @task
    def due_tables(triggering_asset_events=None) -> list[dict]:
        """The tables the triggering events announced, each once (its latest announcement), highest score first."""
        latest: dict[str, dict] = {}
        for events in (triggering_asset_events or {}).values():
            for event in events:
                payload = (event.extra or {}).get("payload") or {}
                for entry in payload.get("tables") or ():
                    latest[entry["table"]] = entry  # events come oldest first: the latest wins
                for error in payload.get("errors") or ():
                    print(f"{error['table']} could not be measured: {error['error']} {error.get('message') or ''}")
        due = sorted(latest.values(), key=lambda entry: (-entry["score"], entry["table"]))
        for entry in due:
            print(f"{entry['table']}: {', '.join(entry['needs'])} (score {entry['score']})")
        if not due:
            print("No table is due: nothing to do.")
        return due

    @task
    def needing(action: str, due: list[dict]) -> list[dict]:
        """The keyword arguments of each due table needing ``action``: the table and its report's parameters."""
        calls = []
        for entry in due:
            advice = [r for r in entry.get("recommendations") or () if r["action"] == action]
            if action in entry["needs"] and advice:
                calls.append({"table": entry["table"], **advice[0]["params"]})
        print(f"{action}: {', '.join(call['table'] for call in calls) or 'no table needs it'}")
        return calls

    due = due_tables()

    def each(action: str) -> object:
        return needing.override(task_id=f"needs_{action}")(action, due)

    # The compaction honours the table policy's byte budget (iceberg-ops.maintenance.max-rewrite-bytes).
    compact = IcebergCompactOperator.partial(task_id="compact", **EACH_TABLE).expand_kwargs(each("compact"))
    rewrite = IcebergRewriteManifestsOperator.partial(task_id="rewrite_manifests", **EACH_TABLE).expand_kwargs(
        each("rewrite_manifests")
    )
    expire = IcebergExpireSnapshotsOperator.partial(task_id="expire_snapshots", **EACH_TABLE).expand_kwargs(
        each("expire_snapshots")
    )
    compact >> rewrite >> expire


self_optimizing()
