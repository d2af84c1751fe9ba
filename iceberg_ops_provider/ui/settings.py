"""The ``[iceberg_ops]`` options of the pages (``airflow.cfg`` or ``AIRFLOW__ICEBERG_OPS__*``), read when used."""

from __future__ import annotations

from contextlib import suppress
from dataclasses import dataclass
from pathlib import Path

__all__ = ["SECTION", "UiSettings", "ui_settings"]

SECTION = "iceberg_ops"

# Option name -> (default, description); get_provider_info declares them from here.
OPTIONS: dict[str, tuple[str, str]] = {
    "ui_enabled": (
        "True",
        "Serve the Iceberg pages and their JSON under the api-server, with an 'Iceberg' entry in the navigation.",
    ),
    "ui_migrations_dir": (
        "",
        "The folder of migration files as the migrate tasks use it, readable by the api-server (the files are "
        "loaded, as `iceberg-ops status` loads them); <folder>/<namespace>/ is used when it exists. Empty: the "
        "pages show what the history says, and pending migrations are not known.",
    ),
    "ui_connections": (
        "",
        "More connection ids to list, comma-separated (connections of a secrets backend, which cannot be "
        "listed); connections of type iceberg_ops or iceberg in the metadata database and in AIRFLOW_CONN_* "
        "variables are listed anyway.",
    ),
    "ui_cache_seconds": ("5", "Seconds a page's catalog reads are reused before they are read again."),
    "ui_events_page_size": ("50", "Events of the audit trail on one page (1 to 500)."),
    "ui_tables_page_size": ("50", "Tables of a namespace's list on one page (1 to 500)."),
    "ui_parallelism": ("8", "Tables (or metadata files) whose metadata is read at the same time."),
    "ui_maintenance_dag": (
        "table_maintenance",
        "The DAG a table's page offers to trigger for the table's namespace (its run config filled in), to users "
        "who may trigger it. Empty: no link.",
    ),
}


@dataclass(frozen=True)
class UiSettings:
    """The options, parsed (a bad value falls back to the default and is reported in ``problems``)."""

    enabled: bool
    migrations_dir: Path | None
    connections: tuple[str, ...]
    cache_seconds: float
    events_page_size: int
    parallelism: int
    tables_page_size: int = 50
    maintenance_dag: str | None = None
    problems: tuple[str, ...] = ()


def _get(name: str) -> str:
    from iceberg_ops_provider.hooks.version_compat import conf

    return str(conf.get(SECTION, name, fallback=OPTIONS[name][0]))


def ui_settings() -> UiSettings:
    """The options now (Airflow's configuration is read on every call: cheap, and never stale)."""
    problems: list[str] = []

    def number(name: str, kind: type, low: float, high: float) -> float:
        text = _get(name)
        with suppress(ValueError):
            if low <= (value := kind(text)) <= high:
                return value
        problems.append(f"[{SECTION}] {name} = {text!r} is not a number from {low:g} to {high:g}; using the default")
        return kind(OPTIONS[name][0])

    enabled = _get("ui_enabled").strip().lower() not in ("false", "0", "no", "off")
    folder = _get("ui_migrations_dir").strip()
    return UiSettings(
        enabled=enabled,
        migrations_dir=Path(folder).expanduser() if folder else None,
        connections=tuple(part.strip() for part in _get("ui_connections").split(",") if part.strip()),
        cache_seconds=float(number("ui_cache_seconds", float, 0, 3600)),
        events_page_size=int(number("ui_events_page_size", int, 1, 500)),
        parallelism=int(number("ui_parallelism", int, 1, 64)),
        tables_page_size=int(number("ui_tables_page_size", int, 1, 500)),
        maintenance_dag=_get("ui_maintenance_dag").strip() or None,
        problems=tuple(problems),
    )
