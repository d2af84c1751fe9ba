"""The parts of a table's page computed from its metadata, each kept per metadata location.

The table is loaded once per view (one catalog call, shared by the parts); what each part computes from that
state is taken from :class:`~iceberg_ops_provider.ui.metadata_cache.MetadataCache` while the metadata location
stays the same. The health report also says what is expirable *now*: it is kept at most
:data:`~iceberg_ops_provider.ui.metadata_cache.CLOCK_SECONDS` (the page shows when it was measured). The policy
is read on every view (it is the properties, parsed; and whether it is quiet *now*).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Hashable
from typing import Any

from iceberg_ops_provider.maintenance.activity import maintenance_history
from iceberg_ops_provider.maintenance.file_layout import file_layout
from iceberg_ops_provider.maintenance.health import table_health_report
from iceberg_ops_provider.maintenance.policy import table_policy
from iceberg_ops_provider.maintenance.table_details import table_details
from iceberg_ops_provider.maintenance.timeline import snapshot_timeline
from iceberg_ops_provider.ui.metadata_cache import MetadataCache, clock_kind

__all__ = ["shared_load", "split_measures", "table_parts"]

Job = tuple[tuple[Hashable, ...], Callable[[], Any]]


def shared_load(load: Callable[[], Any]) -> Callable[[], Any]:
    """``load`` called once, by whichever part asks first; the others wait for it and share its table (or error)."""
    lock = threading.Lock()
    done: list[tuple[Any, BaseException | None]] = []

    def once() -> Any:
        with lock:
            if not done:
                try:
                    done.append((load(), None))
                except BaseException as exc:  # every part reports the one failure
                    done.append((None, exc))
        table, error = done[0]
        if error is not None:
            raise error
        return table

    return once


def _kept(cache: MetadataCache, kind: str, catalog: str, identifier: str, table: Any, compute: Callable[[], Any]):
    return cache.get(kind, catalog, identifier, table.metadata_location, compute)


def _measures(table: Any) -> dict[str, Any]:
    report = table_health_report(table, kept_snapshots=False)  # the page shows none of their figures
    return {"health": {**report.to_json(), "budget": _budget(table, report)}, "files": file_layout(report).to_json()}


def _budget(table: Any, report: Any) -> dict[str, Any]:
    """The due compaction's bytes against the policy's ``max-rewrite-bytes``, as the namespace's list words it."""
    from iceberg_ops_provider.maintenance.policy import table_policy
    from iceberg_ops_provider.maintenance.queue import compaction_bytes

    due, cap = compaction_bytes(report), table_policy(table).max_rewrite_bytes
    return {"compaction_bytes": due, "max_rewrite_bytes": cap, "over_budget": cap is not None and due > cap}


def table_parts(
    cache: MetadataCache, catalog: str, identifier: str, load: Callable[[], Any], parallelism: int
) -> dict[str, Job]:
    """The page's parts ``{name: (key, read)}`` read from the table ``load`` gives.

    They are ``health`` (with ``files``), ``maintenance``, ``details``, ``timeline`` and ``policy``.
    """

    def kept(kind: str, compute: Callable[[Any], Any]) -> Callable[[], Any]:
        def read() -> Any:
            table = load()
            return _kept(cache, kind, catalog, identifier, table, lambda: compute(table))

        return read

    health_kind = clock_kind("health")
    key = (identifier,)
    return {
        "health": (key, kept(health_kind, _measures)),
        "maintenance": (key, kept("maintenance", lambda t: maintenance_history(t, parallelism=parallelism).to_json())),
        "details": (key, kept("details", lambda t: table_details(t).to_json())),
        "timeline": (key, kept("timeline", lambda t: snapshot_timeline(t, parallelism=parallelism).to_json())),
        "policy": (key, lambda: table_policy(load()).to_json()),
    }


def split_measures(view: dict[str, Any]) -> dict[str, Any]:
    """``view`` with its ``health`` part split into ``health`` and ``files`` (and its error, if any, on both)."""
    measured = view.get("health")
    view["health"] = None if measured is None else measured["health"]
    view["files"] = None if measured is None else measured["files"]
    if "health" in view.get("errors", {}):
        view["errors"]["files"] = view["errors"]["health"]
    return view
