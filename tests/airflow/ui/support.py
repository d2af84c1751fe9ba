"""What the tests of the Iceberg pages share: the connections (with secrets to look for), a catalog
that stalls, and a small lake with history, small files, maintenance and a move.

The secrets are configured in every place a connection can hold one (password, a REST credential,
secret-named extra keys, a password in a URL); :func:`leaked` finds any of them, in any of the forms
a page could carry it, in a response.
"""

from __future__ import annotations

import html
import json
from pathlib import Path
from typing import Any
from urllib.parse import quote, quote_plus

import pyarrow as pa

REPOSITORY = Path(__file__).resolve().parents[3]
EXAMPLE_MIGRATIONS = REPOSITORY / "dags_examples" / "migrations"

SECRETS = (
    "pw-SECRET-ops-4711",  # iceberg_ops_default's password
    "s3key-SECRET-0815",  # iceberg_ops_default's extra s3.secret-access-key
    "rest-SECRET-pw-2718",  # iceberg_stalled's password (its REST credential is login:password)
    "tok-SECRET-3141",  # iceberg_stalled's extra token
    "db-SECRET-pw-1618",  # other_db's password in its URL (a connection of another type: never read)
)

CONTEXT = {"dag_id": "migrate_then_load", "run_id": "manual__2026-11-30", "task_id": "migrate", "try_number": "1"}


def connections(catalog_root: Path, stalled_uri: str) -> dict[str, str]:
    """``AIRFLOW_CONN_*`` variables: the lake's catalog, a stalled REST catalog, and one of another type."""
    lake = {
        "conn_type": "iceberg_ops",
        "login": "lake-user",
        "password": SECRETS[0],
        "extra": {
            "kind": "sqlite",
            "db_path": str(catalog_root / "catalog.db"),
            "warehouse_dir": str(catalog_root / "warehouse"),
            "s3.secret-access-key": SECRETS[1],
            "timeout": "20",
        },
    }
    stalled = {
        "conn_type": "iceberg",
        "host": stalled_uri,
        "login": "client-id",
        "password": SECRETS[2],
        "extra": {"token": SECRETS[3], "timeout": "1.5"},
    }
    other = {"conn_type": "postgres", "host": f"postgresql://app:{SECRETS[4]}@127.0.0.1:1/db"}
    return {
        "AIRFLOW_CONN_ICEBERG_OPS_DEFAULT": json.dumps(lake),
        "AIRFLOW_CONN_ICEBERG_STALLED": json.dumps(stalled),
        "AIRFLOW_CONN_OTHER_DB": json.dumps(other),
    }


def leaked(text: str) -> list[str]:
    """The configured secrets found in ``text``, in any form a page or JSON could carry them."""
    found = []
    for secret in SECRETS:
        forms = {secret, html.escape(secret), json.dumps(secret)[1:-1], quote(secret, safe=""), quote_plus(secret)}
        if any(form in text for form in forms):
            found.append(secret)
    return found


EVENTS_SCHEMA = pa.schema([pa.field("id", pa.int64()), pa.field("kind", pa.string())])


def small_files_table(catalog: Any, identifier: str, files: int = 8) -> Any:
    """A table of ``files`` one-row appends: many small files, so its health report asks for compaction."""
    table = catalog.create_table_if_not_exists(identifier, schema=EVENTS_SCHEMA)
    for n in range(files):
        table.append(pa.table({"id": [n], "kind": [f"k{n % 3}"]}, schema=EVENTS_SCHEMA))
    return table


def build_lake(catalog: Any, *, maintained: bool = True) -> dict[str, Any]:
    """Namespace ``shop``: 0001 applied by an Airflow task (0002 pending), a table of small files
    (compacted, its manifests rewritten and its snapshots expired when ``maintained``), and a move
    into ``shop.events_copy``; namespace ``empty`` with no table and no history."""
    from iceberg_ops_provider.data_migration import DataMover
    from iceberg_ops_provider.maintenance import compact_small_files_streaming, expire_snapshots, rewrite_manifests
    from iceberg_ops_provider.runner import MigrationRunner

    runner = MigrationRunner(catalog, "shop", EXAMPLE_MIGRATIONS, lock_context=CONTEXT)
    runner.upgrade("0001")
    small = small_files_table(catalog, "shop.events", files=8)
    catalog.create_namespace_if_not_exists("empty")
    built: dict[str, Any] = {"runner": runner}
    if maintained:
        built["compaction"] = compact_small_files_streaming(small, target_file_size_bytes=1024 * 1024)
        small.refresh()
        built["manifests"] = rewrite_manifests(small)
        small.refresh()
        built["expiry"] = expire_snapshots(small, older_than="0s", retain_last=1)
    mover = DataMover(catalog, "shop.events", "shop.events_copy", create_target=True, move_id="copy-events")
    built["move"] = mover.run()
    return built
