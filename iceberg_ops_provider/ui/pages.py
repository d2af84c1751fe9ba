"""The pages of catalogs, a catalog and a namespace, rendered from the views (:mod:`.views`).

Also what every page shares: where things are (:class:`Urls`), the breadcrumbs, the link to the
same data as JSON, a page that only says something. The table's page is :mod:`.table_page`.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from iceberg_ops_provider.ui.html import (
    Markup,
    badge,
    count,
    dl,
    duration_ms,
    errors_once,
    join,
    link,
    page,
    panel,
    path,
    short,
    size,
    table,
    tag,
    when,
)

__all__ = [
    "Urls",
    "api_page",
    "catalog_page",
    "catalogs_page",
    "crumbs",
    "json_link",
    "message_page",
    "namespace_page",
]


@dataclass(frozen=True)
class Urls:
    """Where things are: ``root`` is this application's path (``/iceberg-ops``), ``airflow`` the UI's (``""``)."""

    root: str
    airflow: str

    def catalogs(self) -> str:
        """The catalogs page."""
        return f"{self.root}/"

    def catalog(self, conn_id: str) -> str:
        """A catalog's page."""
        return f"{self.root}/c/{path(conn_id)}/"

    def namespace(self, conn_id: str, namespace: str, page: int | None = None) -> str:
        """A namespace's page (``page``: of its audit trail)."""
        suffix = f"?page={page}" if page and page > 1 else ""
        return f"{self.root}/c/{path(conn_id)}/ns/{path(namespace)}{suffix}"

    def table(self, conn_id: str, namespace: str, name: str) -> str:
        """A table's page."""
        return f"{self.root}/c/{path(conn_id)}/ns/{path(namespace)}/t/{path(name)}"

    def api(self, suffix: str) -> str:
        """A JSON endpoint."""
        return f"{self.root}/api/{suffix}"

    def dag(self, dag_id: str) -> str:
        """A DAG's page in Airflow."""
        return f"{self.airflow}/dags/{path(dag_id)}"

    def task(self, context: dict[str, str]) -> str | None:
        """A task instance's page in Airflow, when the context names one."""
        if not all(context.get(key) for key in ("dag_id", "run_id", "task_id")):
            return None
        dag, run, task = (path(context[key]) for key in ("dag_id", "run_id", "task_id"))
        return f"{self.airflow}/dags/{dag}/runs/{run}/tasks/{task}"


def crumbs(urls: Urls, conn_id: str | None = None, namespace: str | None = None) -> list[tuple[str, str | None]]:
    """The breadcrumbs of a page: Iceberg, then the catalog and the namespace it is in."""
    trail: list[tuple[str, str | None]] = [("Iceberg", urls.catalogs())]
    if conn_id is not None:
        trail.append((conn_id, urls.catalog(conn_id)))
    if namespace is not None and conn_id is not None:
        trail.append((namespace, urls.namespace(conn_id, namespace)))
    return trail


def json_link(urls: Urls, suffix: str) -> Markup:
    """The line under a page that links to its JSON endpoint (``suffix`` after ``/api/``)."""
    return tag("p", "The same data as JSON: ", link(urls.api(suffix), urls.api(suffix), new_tab=True), class_="muted")


def message_page(
    title: str, message: str, urls: Urls, *, action: tuple[str, str] | None = None, login: str | None = None
) -> str:
    """A page that only says something (an error, a refusal).

    ``login``: the action is Airflow's login, and this is the login returning to the page as Airflow
    shows it, which the page's script follows at once (see :func:`~.html.link`).
    """
    body = [tag("p", message)]
    if action:
        body.append(tag("p", link(action[1], action[0], top=login is None, login=login)))
    return page(title, crumbs(urls), panel(title, *body), root=urls.root)


def api_page(openapi: dict[str, Any], urls: Urls) -> str:
    """The JSON endpoints, read from the OpenAPI document: what each answers, and the document itself.

    Rendered here, with no script: a page of a documentation tool would load its scripts from elsewhere.
    """
    rows = []
    for route, operations in sorted(openapi.get("paths", {}).items()):
        for method, operation in operations.items():
            parameters = ", ".join(str(item.get("name")) for item in operation.get("parameters", []))
            rows.append(
                [
                    tag("code", method.upper()),
                    tag("code", f"{urls.root}{route}"),
                    parameters,
                    operation.get("description") or operation.get("summary") or "",
                ]
            )
    body = panel(
        "JSON endpoints",
        tag("p", openapi.get("info", {}).get("description", "")),
        table(["method", "path", "parameters", "answers"], rows),
        tag("p", link(f"{urls.root}/openapi.json", "The OpenAPI document", new_tab=True)),
    )
    return page("iceberg-ops API", crumbs(urls), body, root=urls.root)


# --------------------------------------------------------------------------------------------------


def _failure_badge(catalog: dict[str, Any]) -> str:
    """A failed check in two or three words: never opened, asked and silent, or answered with an error."""
    if catalog.get("error_kind") in ("configuration", "missing"):
        return "cannot be opened"
    if catalog.get("answered"):
        return "answers with an error"
    return "does not answer"


def catalogs_page(view: dict[str, Any], urls: Urls) -> str:
    """The catalogs: each connection's kind, endpoint and whether it answers."""
    rows = []
    for catalog in view["catalogs"]:
        if catalog["answers"]:
            state = badge(f"answers: {catalog['namespaces']} namespace(s) in {catalog['seconds']:.2f}s", "ok")
        elif catalog.get("checking"):
            state = join([badge("still checking", "warn"), tag("div", catalog["error"], class_="error")])
        else:
            state = join([badge(_failure_badge(catalog), "bad"), tag("div", catalog["error"], class_="error")])
        rows.append(
            [
                link(urls.catalog(catalog["conn_id"]), catalog["conn_id"]),
                catalog["conn_type"],
                catalog["kind"],
                tag("code", catalog["endpoint"]) if catalog["endpoint"] else "",
                f"{catalog['timeout']:g}s",
                state,
            ]
        )
    problems = [tag("div", problem, class_="error") for problem in view.get("problems", [])]
    body = panel(
        "Catalogs",
        *problems,
        table(
            ["connection", "type", "kind", "endpoint", "timeout", "catalog"],
            rows,
            empty="No connection of type iceberg_ops or iceberg is defined (or you may not read any).",
        ),
        json_link(urls, "catalogs"),
        note="Airflow connections of type iceberg_ops and iceberg",
    )
    return page("Iceberg catalogs", crumbs(urls), body, root=urls.root, read_at=view["read_at"])


# --------------------------------------------------------------------------------------------------


def _version_badge(summary: dict[str, Any]) -> Markup:
    if summary.get("pending") is None:
        return badge("pending unknown", "neutral")
    if summary["pending"]:
        return badge(f"{summary['pending']} pending", "warn")
    return badge("at head", "ok")


def catalog_page(view: dict[str, Any], urls: Urls) -> str:
    """A catalog's namespaces."""
    conn_id = view["catalog"]["conn_id"]
    rows = []
    for summary in view.get("namespaces") or []:
        name = summary["namespace"]
        if summary.get("error"):
            rows.append([link(urls.namespace(conn_id, name), name), tag("div", summary["error"], class_="error")])
            continue
        flags = [_version_badge(summary)]
        if summary["failed"]:
            flags.append(badge(f"{summary['failed']} failed", "bad"))
        for key, tone in (("changed", "bad"), ("missing", "bad"), ("broken", "bad")):
            if summary[key]:
                flags.append(badge(f"{summary[key]} {key}", tone))
        if summary["locked"]:
            flags.append(badge("locked", "info"))
        if summary["interrupted"]:
            flags.append(badge("interrupted run", "bad"))
        rows.append(
            [
                link(urls.namespace(conn_id, name), name),
                summary["current"] or "base",
                join(flags, " "),
                count(summary["tables"]),
            ]
        )
    note = (
        f"migration files from {view['migrations_dir']}"
        if view.get("migrations_dir")
        else "no [iceberg_ops] ui_migrations_dir: pending migrations are not known"
    )
    body = join(
        [
            panel("Catalog", dl([(key, value) for key, value in _catalog_facts(view["catalog"])])),
            panel(
                "Namespaces",
                table(["namespace", "version", "migrations", "tables"], rows, empty="The catalog has no namespace."),
                json_link(urls, f"c/{path(conn_id)}"),
                error=view["errors"].get("namespaces"),
                note=note,
            ),
        ]
    )
    return page(f"Catalog {conn_id}", crumbs(urls, conn_id), body, root=urls.root, read_at=view["read_at"])


def _catalog_facts(catalog: dict[str, Any]) -> list[tuple[str, Any]]:
    facts = [("connection", catalog["conn_id"]), ("type", catalog["conn_type"]), ("kind", catalog["kind"])]
    if catalog["endpoint"]:
        facts.append(("endpoint", tag("code", catalog["endpoint"])))
    facts.append(("timeout", f"{catalog['timeout']:g}s per catalog call"))
    return facts


# --------------------------------------------------------------------------------------------------

_STATE_TONES = {"applied": "ok", "pending": "warn", "failed": "bad", "changed": "bad", "missing": "bad"}


def _lock_panel(status: dict[str, Any], urls: Urls) -> Markup:
    lock = status.get("lock")
    if not lock:
        return panel("Lock", tag("p", badge("free", "ok"), " No run holds the namespace's lock."))
    context = lock.get("context") or {}
    task_url = urls.task(context)
    where = [(key, value) for key, value in context.items()]
    facts = [
        ("holder", f"{lock['owner']}@{lock['host']} (pid {lock['pid']})"),
        ("run id", short(lock["run_id"], 36)),
        ("since", when(lock["acquired_at"])),
        ("lease expires", when(lock["lease_expires_at"])),
        ("lease", f"{lock['stale_after']:g}s"),
    ]
    if context.get("dag_id"):
        facts.append(("DAG", link(urls.dag(context["dag_id"]), context["dag_id"], top=True)))
    facts += [(key, value) for key, value in where if key != "dag_id"]
    if task_url:
        facts.append(("task instance", link(task_url, "open in Airflow", top=True)))
    return panel("Lock", tag("p", badge("held", "info")), dl(facts))


def _intent_panel(status: dict[str, Any]) -> Markup:
    intent = status.get("interrupted")
    if not intent:
        return Markup("")
    outcome = status.get("interrupted_outcome")
    tone = "bad" if outcome == "partial" else "warn"
    advice = (
        "A person settles it: finish or undo the changes, then `iceberg-ops stamp`."
        if outcome == "partial"
        else "The next run settles it by itself."
    )
    return panel(
        "Unsettled run",
        tag("p", badge(f"committed: {outcome}", tone), " ", advice),
        tag("pre", json.dumps(intent, indent=2, sort_keys=True, default=str)),
    )


def _migrations_panel(view: dict[str, Any], urls: Urls) -> Markup:
    migrations = view.get("migrations")
    error = view["errors"].get("migrations")
    if migrations is None:
        return panel("Migrations", error=error or "not read")
    status = migrations["status"]
    if status is None:  # the meta-namespace
        return panel(
            "Migrations",
            tag(
                "p",
                "This namespace holds the migration history and locks of the catalog's other namespaces "
                f"({migrations['meta_namespace']}.migration_history); it has no migrations of its own.",
            ),
        )
    pending = status["pending"]
    if not status["files_compared"]:
        head = badge("pending unknown", "neutral")
    elif pending:
        head = badge(f"{len(pending)} pending", "warn")
    else:
        head = badge("at head", "ok")
    facts = [
        ("current version", tag("strong", status["current"] or "base")),
        ("state", head),
        ("commit mode", join([badge(status["commit_mode"], "info"), " ", status["commit_mode_reason"]])),
        ("history", f"{migrations['meta_namespace']}.migration_history"),
    ]
    if not status["files_compared"]:
        facts.append(("files", "not compared: set [iceberg_ops] ui_migrations_dir to see pending migrations"))
    elif view.get("migrations_dir"):
        facts.append(("files", tag("code", view["migrations_dir"])))
    for key in ("changed", "missing", "out_of_order"):
        if status[key]:
            facts.append((key.replace("_", " "), ", ".join(status[key])))
    for broken in status.get("broken") or []:
        facts.append(("broken file", f"{broken.get('path')}: {broken.get('error')}"))
    rows = []
    for row in migrations["versions"]:
        checksum = row["recorded_checksum"] or row["file_checksum"]
        rows.append(
            [
                tag("code", row["version"]),
                row["description"],
                badge(row["state"].replace("_", " "), _STATE_TONES.get(row["state"], "neutral")),
                when(row["at"]),
                duration_ms(row["duration_ms"]),
                short(checksum, 18),
                row["executed_by"] or "",
                tag("span", row["error"], class_="error") if row["error"] else "",
            ]
        )
    return panel(
        "Migrations",
        dl(facts),
        tag("h3", "Versions"),
        table(
            ["version", "description", "state", "recorded", "took", "checksum", "by", "error"],
            rows,
            empty="No migration file and no history.",
        ),
        panel_id="migrations",
    )


def _origins_panel(audit: dict[str, Any] | None, urls: Urls) -> Markup:
    if not audit:
        return Markup("")
    rows = []
    for origin in audit["origins"]:
        context = origin["context"]
        dag_id = context.get("dag_id")
        task_url = urls.task(context)
        rows.append(
            [
                link(urls.dag(dag_id), dag_id, top=True) if dag_id else json.dumps(context, sort_keys=True),
                context.get("task_id", ""),
                link(task_url, context.get("run_id", ""), top=True) if task_url else context.get("run_id", ""),
                when(origin["last_at"]),
                count(origin["events"]),
            ]
        )
    return panel(
        "DAGs that migrate it",
        table(
            ["DAG", "task", "latest run", "latest event", "events"],
            rows,
            empty="No event was recorded by an Airflow task (runs from the command line record none).",
        ),
        note="from the Airflow context of the audit trail's events",
        panel_id="dags",
    )


def _audit_panel(view: dict[str, Any], urls: Urls) -> Markup:
    audit = view.get("audit")
    if audit is None and not view["errors"].get("audit") and view.get("migrations"):
        return Markup("")  # the meta-namespace: its history is the other namespaces'
    if audit is None:
        return panel("Audit trail", error=view["errors"].get("audit") or "not read")
    conn_id, namespace, current = view["catalog"]["conn_id"], view["namespace"], view["page"]
    rows = []
    for event in audit["events"]:
        context = (event.get("details") or {}).get("context") or {}
        task_url = urls.task(context)
        source = link(task_url, f"{context.get('dag_id')}.{context.get('task_id')}", top=True) if task_url else ""
        tone = "bad" if "fail" in event["event"] or "partial" in event["event"] else "neutral"
        rows.append(
            [
                when(event["at"]),
                badge(event["event"].replace("_", " "), "ok" if event["event"] == "applied" else tone),
                tag("code", event["version"]) if event["version"] else "",
                event["executed_by"] or "",
                source,
                event["message"],
                duration_ms(event["duration_ms"]),
                tag("span", event["error"], class_="error") if event["error"] else "",
            ]
        )
    first = audit["offset"] + 1 if audit["events"] else 0
    last = audit["offset"] + len(audit["events"])
    pager = []
    if audit["offset"] > 0:
        pager.append(link(urls.namespace(conn_id, namespace, current - 1), "← newer"))
    if last < audit["total"]:
        pager.append(link(urls.namespace(conn_id, namespace, current + 1), "older →"))
    return panel(
        "Audit trail",
        table(
            ["when", "event", "version", "who", "Airflow task", "what", "took", "error"],
            rows,
            empty="No event recorded yet.",
        ),
        tag("div", *pager, class_="pager") if pager else "",
        note=f"newest first; {first}-{last} of {audit['total']}",
        panel_id="events",
    )


def _tables_panel(view: dict[str, Any], urls: Urls) -> Markup:
    tables = view.get("tables")
    if tables is None:
        return panel("Tables", error=view["errors"].get("tables") or "not read")
    conn_id, namespace = view["catalog"]["conn_id"], view["namespace"]
    rows = []
    for overview in tables["tables"]:
        name = overview["table"].split(".")[-1]
        rows.append(
            [
                link(urls.table(conn_id, namespace, name), name),
                tag("span", count(overview["data_files"]), class_="num"),
                size(overview["bytes"]),
                size(overview["mean_file_bytes"]),
                count(overview["records"]),
                count(overview["delete_files"]),
                count(overview["snapshots"]),
                when(overview["last_commit_at"]),
                overview["last_operation"] or "",
            ]
        )
    for name, error in tables["errors"].items():
        rows.append([name, tag("span", error, class_="error"), "", "", "", "", "", "", ""])
    return panel(
        "Tables",
        table(
            [
                "table",
                "data files",
                "size",
                "mean file",
                "records",
                "delete files",
                "snapshots",
                "last commit",
                "operation",
            ],
            rows,
            empty="The namespace has no table."
            if tables.get("exists", True)
            else "The namespace does not exist yet: its first migration creates it.",
        ),
        note=f"{len(tables['tables'])} table(s), from each table's metadata",
        panel_id="tables",
    )


def namespace_page(view: dict[str, Any], urls: Urls) -> str:
    """A namespace: migrations, lock, unsettled run, the DAGs that migrate it, the audit trail, the tables."""
    view = errors_once(view)
    conn_id, namespace = view["catalog"]["conn_id"], view["namespace"]
    migrations = view.get("migrations") or {}
    status = migrations.get("status") or {}
    body = join(
        [
            _migrations_panel(view, urls),
            tag(
                "div",
                _lock_panel(status, urls) if status else "",
                _origins_panel(view.get("audit"), urls),
                class_="cols",
            ),
            _intent_panel(status) if status else "",
            _audit_panel(view, urls),
            _tables_panel(view, urls),
            json_link(urls, f"c/{path(conn_id)}/ns/{path(namespace)}"),
        ]
    )
    return page(f"Namespace {namespace}", crumbs(urls, conn_id), body, root=urls.root, read_at=view["read_at"])
