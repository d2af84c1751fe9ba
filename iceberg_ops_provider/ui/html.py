"""Plain HTML builders for the pages: every value is escaped unless it is markup made here (:class:`Markup`).

The pages are server-rendered and work without JavaScript. Their style (:data:`STYLE`) and one small
script (:data:`SCRIPT`) are files the application serves itself (``/static/pages.css`` and
``/static/pages.js``), so the pages' Content-Security-Policy allows nothing inline and nothing from
elsewhere. The script makes links to Airflow's own pages (a DAG, a task instance, the login) open in
Airflow's window when a page is shown inside the UI's frame, instead of inside the frame.
"""

from __future__ import annotations

import html
import re
from collections.abc import Iterable
from datetime import datetime
from typing import Any
from urllib.parse import quote

from iceberg_ops_provider.progress import size_text

__all__ = ["Markup", "badge", "errors_once", "esc", "link", "page", "panel", "table"]


class Markup(str):
    """Text that is already HTML (built by these functions)."""


def esc(value: Any) -> Markup:
    """``value`` as HTML text (``None`` as an empty string); markup passes unchanged."""
    if isinstance(value, Markup):
        return value
    return Markup(html.escape("" if value is None else str(value)))


def join(parts: Iterable[Any], sep: str = "") -> Markup:
    """Parts (escaped unless markup) joined by ``sep`` (markup)."""
    return Markup(sep.join(esc(part) for part in parts))


def tag(name: str, *children: Any, **attributes: Any) -> Markup:
    """``<name attributes>children</name>``; ``class_`` for ``class``, ``data_x`` for ``data-x``, ``None`` dropped."""
    attrs = "".join(
        f' {key.rstrip("_").replace("_", "-")}="{html.escape(str(value))}"'
        if value is not True
        else f" {key.rstrip('_').replace('_', '-')}"
        for key, value in attributes.items()
        if value is not None and value is not False
    )
    return Markup(f"<{name}{attrs}>{join(children)}</{name}>")


def link(
    href: str,
    text: Any,
    *,
    top: bool = False,
    title: str | None = None,
    new_tab: bool = False,
    login: str | None = None,
) -> Markup:
    """A link.

    ``top``: a page of Airflow's own, opened in Airflow's window when shown in its frame; ``new_tab``:
    opened in a tab of its own (a JSON document, whose address the reader wants to see); ``login``:
    Airflow's login returning to the page as Airflow shows it, which the page's script opens at once
    in Airflow's window (``href``, the login returning to the page itself, is what a click opens
    where the script cannot run).
    """
    if login is not None:
        return tag("a", text, href=href, title=title, data_login=login)
    if new_tab:
        return tag("a", text, href=href, title=title, target="_blank", rel="noopener")
    return tag("a", text, href=href, title=title, data_top="1" if top else None)


def errors_once(view: dict[str, Any]) -> dict[str, Any]:
    """``view`` with each error in full once: a later part failing the same way says so.

    A catalog that does not answer fails every part of a page with the same message. The pages using
    this show one catalog, so its silence is one fact whether the page's own bound or the catalog's
    (``The catalog at URL did not answer within ...``) spoke first.
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


def badge(text: Any, tone: str = "neutral") -> Markup:
    """A small label: tone ``ok``, ``warn``, ``bad``, ``info`` or ``neutral``."""
    return tag("span", text, class_=f"badge {tone}")


def table(headers: list[str], rows: list[list[Any]], *, empty: str = "Nothing to show.", cls: str = "") -> Markup:
    """A table of rows (cells escaped unless markup)."""
    if not rows:
        return tag("p", empty, class_="muted")
    head = tag("tr", *(tag("th", header) for header in headers))
    body = join(tag("tr", *(tag("td", cell) for cell in row)) for row in rows)
    return tag("table", tag("thead", head), tag("tbody", body), class_=f"grid {cls}".strip())


def panel(title: str, *body: Any, error: str | None = None, panel_id: str | None = None, note: Any = None) -> Markup:
    """A titled section; with ``error``, the error instead of the body."""
    heading = tag("h2", title, tag("span", note, class_="note") if note else "")
    if error:
        content = tag("div", tag("strong", "Could not read this part. "), error, class_="error", role="alert")
    else:
        content = join(body)
    return tag("section", heading, content, class_="panel", id=panel_id)


def dl(items: list[tuple[str, Any]]) -> Markup:
    """A list of facts."""
    return tag("dl", join(Markup(tag("dt", key) + tag("dd", value)) for key, value in items), class_="facts")


def when(value: str | None) -> Markup:
    """An ISO time as ``2026-11-30 10:00:05 UTC`` with the full value as a tooltip."""
    if not value:
        return esc("")
    try:
        parsed = datetime.fromisoformat(value)
    except ValueError:
        return esc(value)
    return tag("time", parsed.strftime("%Y-%m-%d %H:%M:%S UTC"), datetime=value, title=value)


def size(value: int | None) -> str:
    """Bytes in the project's one size format, ``-`` when unknown."""
    return "-" if value is None else size_text(value)


def count(value: int | None) -> str:
    """A count with thousands separators, ``-`` when unknown."""
    return "-" if value is None else f"{value:,}"


def duration_ms(value: int | None) -> str:
    """Milliseconds as seconds."""
    return "" if value is None else f"{value / 1000:.2f}s"


def short(text: str | None, keep: int = 14) -> Markup:
    """A long value (a checksum, a run id) shortened, the whole of it as a tooltip."""
    if not text:
        return esc("")
    if len(text) <= keep + 1:
        return tag("code", text)
    return tag("code", text[:keep] + "…", title=text)


def path(*parts: str) -> str:
    """URL path segments, each percent-encoded."""
    return "/".join(quote(part, safe="") for part in parts)


STYLE = """
:root { color-scheme: light dark; --fg:#1a202c; --muted:#64748b; --bg:#fff; --line:#e2e8f0; --panel:#f8fafc;
  --ok:#15803d; --warn:#b45309; --bad:#b91c1c; --info:#1d4ed8; --link:#0369a1; }
@media (prefers-color-scheme: dark) { :root { --fg:#e2e8f0; --muted:#94a3b8; --bg:#0f172a; --line:#334155;
  --panel:#1e293b; --ok:#4ade80; --warn:#fbbf24; --bad:#f87171; --info:#93c5fd; --link:#7dd3fc; } }
* { box-sizing: border-box; }
body { font: 14px/1.45 system-ui, -apple-system, "Segoe UI", Roboto, sans-serif; color: var(--fg);
  background: var(--bg); margin: 0; padding: 16px 20px 40px; }
a { color: var(--link); text-decoration: none; } a:hover { text-decoration: underline; }
header.top { display:flex; align-items:baseline; gap:12px; flex-wrap:wrap; margin-bottom: 12px; }
header.top h1 { font-size: 20px; margin: 0; }
nav.crumbs { color: var(--muted); } nav.crumbs a { margin: 0 2px; }
.read-at { color: var(--muted); font-size: 12px; margin-left: auto; }
section.panel { border:1px solid var(--line); border-radius:8px; background: var(--panel); padding:12px 14px;
  margin: 12px 0; }
section.panel h2 { font-size: 15px; margin: 0 0 8px; } .note { color: var(--muted); font-weight: normal;
  font-size: 12px; margin-left: 8px; }
table.grid { border-collapse: collapse; width: 100%; background: var(--bg); }
table.grid th, table.grid td { border-bottom: 1px solid var(--line); padding: 5px 8px; text-align: left;
  vertical-align: top; }
table.grid th { font-weight: 600; font-size: 12px; color: var(--muted); white-space: nowrap; }
td.num, th.num { text-align: right; }
.badge { display:inline-block; border-radius: 10px; padding: 0 8px; font-size: 12px; border:1px solid; }
.badge.ok { color: var(--ok); } .badge.warn { color: var(--warn); } .badge.bad { color: var(--bad); }
.badge.info { color: var(--info); } .badge.neutral { color: var(--muted); }
.error { color: var(--bad); border-left: 3px solid var(--bad); padding: 6px 10px; background: var(--bg);
  white-space: pre-wrap; word-break: break-word; }
.muted { color: var(--muted); }
dl.facts { display:grid; grid-template-columns: max-content 1fr; gap: 2px 14px; margin: 0; }
dl.facts dt { color: var(--muted); } dl.facts dd { margin: 0; word-break: break-word; }
code { font-family: ui-monospace, SFMono-Regular, Menlo, monospace; font-size: 12px; }
progress.bar { width: 160px; height: 8px; vertical-align: middle; margin-right: 6px; accent-color: var(--info); }
.pager { display:flex; gap: 12px; margin-top: 8px; }
.cols { display:grid; grid-template-columns: repeat(auto-fit, minmax(320px, 1fr)); gap: 0 12px; }
"""

SCRIPT = """
(function () {
  var framed = false;
  try { framed = window.top !== window && !!window.top.document; } catch (e) { framed = false; }
  // Airflow's frame is sandboxed without allow-top-navigation: a link of Airflow's own document, clicked,
  // navigates Airflow's window where this frame may not.
  function openOnTop(href) {
    var outer = window.top.document.createElement("a");
    outer.href = href;
    window.top.document.body.appendChild(outer);
    outer.click();
    outer.remove();
  }
  var login = document.querySelector("a[data-login]");
  if (login) {
    if (framed) openOnTop(login.getAttribute("data-login"));
    else window.location.assign(login.getAttribute("data-login"));
    return;
  }
  if (!framed) return;
  document.addEventListener("click", function (event) {
    var anchor = event.target.closest ? event.target.closest("a[data-top]") : null;
    if (!anchor || event.defaultPrevented || event.button !== 0 || event.metaKey || event.ctrlKey) return;
    event.preventDefault();
    openOnTop(anchor.href);
  });
})();
"""


def page(title: str, crumbs: list[tuple[str, str | None]], body: Any, *, root: str, read_at: str | None = None) -> str:
    """A whole page: ``crumbs`` are ``(text, href or None)``; ``root`` is where the application serves its files."""
    trail = join(
        (link(href, text) if href else tag("span", text) for text, href in crumbs),
        sep=" / ",
    )
    stamp = tag("span", "read ", when(read_at), class_="read-at") if read_at else ""
    document = "<!DOCTYPE html>" + tag(
        "html",
        tag(
            "head",
            Markup('<meta charset="utf-8">'),
            Markup('<meta name="viewport" content="width=device-width, initial-scale=1">'),
            tag("title", f"{title} - Iceberg"),
            Markup(f'<link rel="stylesheet" href="{html.escape(root)}/static/pages.css">'),
        ),
        tag(
            "body",
            tag("header", tag("h1", title), tag("nav", trail, class_="crumbs"), stamp, class_="top"),
            tag("main", body),
            tag("script", src=f"{root}/static/pages.js"),
        ),
        lang="en",
    )
    return document
