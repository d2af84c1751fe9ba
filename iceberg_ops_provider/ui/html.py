"""The pages' HTML: Jinja2 templates (``ui/templates``) with autoescaping, and the filters they use.

Every value is escaped unless a template or a filter made it markup. The pages work without JavaScript; their
style and one script (links to Airflow's pages open in Airflow's window, not in the UI's frame) are files the
application serves (``ui/static``), so the Content-Security-Policy allows nothing inline.
"""

from __future__ import annotations

import json
import re
from datetime import datetime
from functools import cache
from importlib.resources import files
from typing import Any
from urllib.parse import quote

from jinja2 import Environment, PackageLoader, StrictUndefined
from markupsafe import Markup, escape

from iceberg_ops_provider.progress import size_text
from iceberg_ops_provider.ui import words

__all__ = ["SCRIPT", "STYLE", "Markup", "errors_once", "path", "render"]

STYLE = files("iceberg_ops_provider.ui").joinpath("static/pages.css").read_text(encoding="utf-8")
"""The pages' style sheet."""
SCRIPT = files("iceberg_ops_provider.ui").joinpath("static/pages.js").read_text(encoding="utf-8")
"""The pages' one script."""


def errors_once(view: dict[str, Any]) -> dict[str, Any]:
    """``view`` with each error in full once: a later part failing the same way says so.

    A silent catalog fails every part of its page alike, whichever bound (the page's or its own) spoke first.
    """
    seen: set[str] = set()
    errors: dict[str, str] = {}
    for name, error in view.get("errors", {}).items():
        match = _NOT_ANSWERING.search(error)
        key = match.group(1) if match else error
        errors[name] = "The same as above." if key in seen else error
        seen.add(key)
    return {**view, "errors": errors}


_NOT_ANSWERING = re.compile(r"^The catalog (?:of connection|at) .*?(did not answer within [\d.]+ s)")


def path(*parts: str) -> str:
    """URL path segments, each percent-encoded."""
    return "/".join(quote(part, safe="") for part in parts)


def _when(value: str | None) -> Markup:
    """An ISO time as ``2026-11-30 10:00:05 UTC`` with the full value as a tooltip."""
    if not value:
        return Markup("")
    try:
        parsed = datetime.fromisoformat(value)
    except ValueError:
        return escape(value)
    return Markup('<time datetime="{0}" title="{0}">{1}</time>').format(value, parsed.strftime("%Y-%m-%d %H:%M:%S UTC"))


def _short(text: str | None, keep: int = 14) -> Markup:
    """A long value (a checksum, a run id) shortened, the whole of it as a tooltip."""
    if not text:
        return Markup("")
    if len(text) <= keep + 1:
        return Markup("<code>{0}</code>").format(text)
    return Markup('<code title="{0}">{1}…</code>').format(text, text[:keep])


def _maintenance_text(commit: dict[str, Any]) -> str:
    details, kind = commit["details"], commit["kind"]
    rewritten, added = _count(details.get("rewritten_data_files")), _count(details.get("added_data_files"))
    if kind == "compaction":
        partition = f" in partition {details['partition']}" if details.get("partition") else ""
        size, group = _size(details.get("rewritten_bytes")), details.get("group", "?")
        strategy = details.get("strategy", "")
        return f"group {group}: {rewritten} files ({size}) rewritten into {added}{partition}, {strategy}"
    if kind == "rewrite_data_files":
        return f"{rewritten} files rewritten into {added}"
    if kind == "rewrite_manifests":
        replaced, created = _count(details.get("manifests_replaced")), _count(details.get("manifests_created"))
        return f"{replaced} manifests replaced by {created}"
    return f"{_count(details.get('expired_snapshots'))} snapshot(s) expired"


def _size(value: int | None) -> str:
    return "-" if value is None else size_text(value)


def _count(value: int | None) -> str:
    return "-" if value is None else f"{value:,}"


@cache
def _environment() -> Environment:
    environment = Environment(
        loader=PackageLoader("iceberg_ops_provider.ui", "templates"),
        autoescape=True,
        undefined=StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    environment.filters.update(
        when=_when,
        short=_short,
        size=_size,
        count_text=_count,
        duration_ms=lambda value: "" if value is None else f"{value / 1000:.2f}s",
        path=path,
        params=lambda params: ", ".join(f"{key}={json.dumps(value)}" for key, value in params.items()),
        tojson_sorted=lambda value: json.dumps(value, sort_keys=True),
        tojson_pretty=lambda value: json.dumps(value, indent=2, sort_keys=True, default=str),
        maintenance_text=_maintenance_text,
        need_text=words.need_text,
        health_badges=words.health_badges,
        policy_badge=words.policy_badge,
        lock_badge=words.lock_badge,
        move_badge=words.move_badge,
    )
    environment.globals["lock_causes"] = words.LOCK_CAUSES
    return environment


def render(template: str, **context: Any) -> str:
    """The page ``template`` (a file of ``ui/templates``) rendered with ``context``."""
    return _environment().get_template(template).render(**context)
