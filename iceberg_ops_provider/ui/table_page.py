"""The table's page: what its metadata says, its health and recommendations, its last maintenance, the moves into it.

Rendered from :func:`.views.table_view`; the pages of catalogs and namespaces, and the URLs and
breadcrumbs every page shares, are in :mod:`.pages`.
"""

from __future__ import annotations

import json
from typing import Any

from iceberg_ops_provider.ui.html import (
    Markup,
    badge,
    count,
    dl,
    errors_once,
    join,
    page,
    panel,
    path,
    short,
    size,
    table,
    tag,
    when,
)
from iceberg_ops_provider.ui.pages import Urls, crumbs, json_link

__all__ = ["table_page"]


def _params(params: dict[str, Any]) -> Markup:
    return tag("code", ", ".join(f"{key}={json.dumps(value)}" for key, value in params.items()))


def _health_panel(view: dict[str, Any]) -> Markup:
    health = view.get("health")
    if health is None:
        return panel("Health", error=view["errors"].get("health") or "not read")
    needs = health["needs"]
    head = (
        join([badge(f"needs {need.replace('_', ' ')}", "warn") for need in needs], " ")
        if needs
        else badge("healthy", "ok")
    )
    data, deletes, snapshots, manifests = (
        health["data_files"],
        health["delete_files"],
        health["snapshots"],
        health["manifests"],
    )
    fraction = float((health.get("thresholds") or {}).get("small_file_fraction") or 0.75)
    target = int(health["target_file_size_bytes"])
    facts = [
        ("verdict", head),
        (
            "data files",
            f"{count(data.get('files'))} files, {size(data.get('bytes'))}; {count(data.get('small_files'))} small "
            f"(under {size(int(target * fraction))} of the {size(target)} target)",
        ),
        (
            "delete files",
            f"{count(deletes.get('position_delete_files'))} position, "
            f"{count(deletes.get('equality_delete_files'))} equality",
        ),
        (
            "snapshots",
            f"{count(snapshots.get('snapshots'))}, {count(snapshots.get('expirable_snapshots'))} expirable now",
        ),
        (
            "manifests",
            f"{count(manifests.get('manifests'))} in the current snapshot, "
            f"{count(manifests.get('small_manifests'))} small",
        ),
        (
            "partitions",
            f"{count(health.get('partitions_total'))}, "
            f"{count(health.get('partitions_needing_compaction'))} need compaction",
        ),
    ]
    rows = []
    for recommendation in health["recommendations"]:
        rows.append(
            [
                badge(
                    recommendation["action"].replace("_", " "),
                    "warn" if recommendation["needed"] else "neutral",
                ),
                "needed"
                if recommendation["needed"]
                else "advice"
                if recommendation["action"] == "remove_orphan_files"
                else "not needed",
                recommendation["reason"],
                _params(recommendation["params"]),
            ]
        )
    warnings = [tag("div", warning, class_="error") for warning in health.get("warnings") or []]
    return panel(
        "Health",
        dl(facts),
        tag("h3", "Recommendations"),
        table(["action", "", "why", "parameters the maintenance DAG would use"], rows, empty="No recommendation."),
        *warnings,
        note=f"measured in {health.get('duration_seconds', 0):.2f}s at snapshot {health.get('snapshot_id')}",
        panel_id="health",
    )


def _maintenance_text(commit: dict[str, Any]) -> str:
    details = commit["details"]
    kind = commit["kind"]
    if kind == "compaction":
        text = (
            f"group {details.get('group', '?')}: {count(details.get('rewritten_data_files'))} files "
            f"({size(details.get('rewritten_bytes'))}) rewritten into {count(details.get('added_data_files'))}"
        )
        if details.get("partition"):
            text += f" in partition {details['partition']}"
        return text + f", {details.get('strategy', '')}"
    if kind == "rewrite_data_files":
        rewritten, added = count(details.get("rewritten_data_files")), count(details.get("added_data_files"))
        return f"{rewritten} files rewritten into {added}"
    if kind == "rewrite_manifests":
        replaced, created = count(details.get("manifests_replaced")), count(details.get("manifests_created"))
        return f"{replaced} manifests replaced by {created}"
    return f"{count(details.get('expired_snapshots'))} snapshot(s) expired"


def _maintenance_panel(view: dict[str, Any]) -> Markup:
    history = view.get("maintenance")
    if history is None:
        return panel("Maintenance history", error=view["errors"].get("maintenance") or "not read")
    rows = [
        [
            when(commit["at"]),
            badge(commit["kind"].replace("_", " "), "info"),
            _maintenance_text(commit),
            short(str(commit["snapshot_id"]), 20) if commit["snapshot_id"] else "",
        ]
        for commit in history["commits"]
    ]
    since = history.get("expiries_searched_since")
    note = "from snapshot summaries" + (", expiries from the metadata log since " if since else "")
    return panel(
        "Maintenance history",
        table(["when", "what", "details", "snapshot"], rows, empty="No compaction, manifest rewrite or expiry found."),
        note=join([note, when(since) if since else ""]),
        panel_id="maintenance",
    )


def _moves_panel(facts: dict[str, Any] | None) -> Markup:
    if not facts or not facts.get("moves"):
        return Markup("")
    rows = []
    for move in facts["moves"]:
        planned = move["units_planned"] or 0
        done = move["units_committed"]
        share = 100 * done / planned if planned else 0
        bar = tag("progress", f"{share:.0f}%", value=f"{share:.0f}", max="100", class_="bar")
        rows.append(
            [
                tag("code", move["move_id"]),
                move["source"] or "",
                join([bar, f"{done} of {planned} units"]),
                count(move["rows"]),
                size(move["bytes"]),
                badge("complete", "ok") if move["complete"] else badge("in progress", "warn"),
                when(move["last_commit_at"]),
                tag("span", move["error"], class_="error") if move["error"] else "",
            ]
        )
    return panel(
        "Data moves into this table",
        table(["move", "source", "progress", "rows", "bytes", "state", "last commit", "error"], rows),
        note="from the move state in the table's snapshot summaries and properties",
        panel_id="moves",
    )


def table_page(view: dict[str, Any], urls: Urls) -> str:
    """A table: facts, health and recommendations, maintenance history, data moves."""
    view = errors_once(view)
    conn_id, namespace, name = view["catalog"]["conn_id"], view["namespace"], view["table"]
    facts = view.get("facts")
    if facts is None:
        overview_panel = panel("Table", error=view["errors"].get("facts") or "not read")
    else:
        overview = facts["overview"]
        overview_panel = panel(
            "Table",
            dl(
                [
                    ("format version", overview["format_version"]),
                    ("location", tag("code", overview["location"])),
                    ("current snapshot", overview["snapshot_id"] or "none"),
                    ("last commit", join([when(overview["last_commit_at"]), " ", overview["last_operation"] or ""])),
                    ("data files", f"{count(overview['data_files'])} ({size(overview['bytes'])})"),
                    ("records", count(overview["records"])),
                    ("snapshots kept", count(overview["snapshots"])),
                ]
            ),
        )
    body = join(
        [
            overview_panel,
            _health_panel(view),
            _maintenance_panel(view),
            _moves_panel(facts),
            json_link(urls, f"c/{path(conn_id)}/ns/{path(namespace)}/t/{path(name)}"),
        ]
    )
    return page(
        f"Table {namespace}.{name}", crumbs(urls, conn_id, namespace), body, root=urls.root, read_at=view["read_at"]
    )
