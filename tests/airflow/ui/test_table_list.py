"""A namespace's table list on a SQLite catalog, without Airflow: sorted, filtered, paged, measured per page."""

from __future__ import annotations

from datetime import UTC, datetime

import pyarrow as pa

from iceberg_ops_provider.maintenance.table_status import table_status
from iceberg_ops_provider.ui.table_list import TableQuery, table_list

SCHEMA = pa.schema([pa.field("id", pa.int64())])
NOON = datetime(2026, 1, 1, 12, tzinfo=UTC)


def _tables(catalog) -> None:
    for name, appends in (("a", 1), ("b", 6), ("c", 3), ("empty", 0)):
        table = catalog.create_table(f"sales.{name}", schema=SCHEMA)
        for n in range(appends):
            table.append(pa.table({"id": [n]}, schema=SCHEMA))


def _list(catalog, query: TableQuery, measure=None, page_size: int = 2):
    measure = measure or (lambda table: table_status(table, NOON))
    return table_list(catalog, "sales", query, page_size=page_size, parallelism=2, measure=measure, moment=NOON)


def _names(found) -> list[str]:
    return [row["table"].removeprefix("sales.") for row in found["tables"]]


def test_only_the_page_shown_is_measured_and_unknown_values_sort_last_either_way(catalog, namespace):
    _tables(catalog)
    asked: list[str] = []

    def measure(table):
        asked.append(table.name()[-1])
        return table_status(table, NOON)

    first = _list(catalog, TableQuery(sort="commit", order="desc"), measure)
    assert _names(first) == ["c", "b"] and sorted(asked) == ["b", "c"]  # newest commit first; 2 measured
    last = _list(catalog, TableQuery(sort="commit", order="asc", page=2))
    assert _names(last) == ["c", "empty"]  # no commit: last, in either order
    assert (last["page"], last["pages"], last["total"], last["matched"]) == (2, 2, 4, 4)


def test_sorted_by_health_every_table_is_measured_and_one_that_fails_is_listed_unmeasured(catalog, namespace):
    _tables(catalog)

    def measure(table):
        if table.name()[-1] == "c":  # an unexpected failure (not the table's own state): nothing else raises it here
            raise RuntimeError("boom")
        return table_status(table, NOON)

    found = _list(catalog, TableQuery(sort="health"), measure, page_size=10)
    assert _names(found) == ["b", "a", "empty", "c"]  # due, healthy (by name), then the one not measured
    assert [row["status"] and row["status"]["state"] for row in found["tables"]] == ["due", "healthy", "healthy", None]


def test_the_filter_matches_part_of_the_name_in_any_case_and_a_page_past_the_last_is_the_last(catalog, namespace):
    _tables(catalog)
    found = _list(catalog, TableQuery(filter="EMP", page=7))
    assert _names(found) == ["empty"] and (found["page"], found["pages"], found["matched"]) == (1, 1, 1)


def test_a_table_whose_name_holds_a_dot_is_listed_by_its_whole_name_never_linked_to_another(tmp_path):
    # Iceberg allows a '.' in a table's name: ("sales", "old.a") is not sales.a, and the pages cannot open it.
    from iceberg_ops_provider.catalogs.sources import from_options
    from iceberg_ops_provider.ui import pages, views
    from iceberg_ops_provider.ui.connections import CatalogConnection
    from iceberg_ops_provider.ui.reads import Reads
    from iceberg_ops_provider.ui.settings import UiSettings
    from tests.support.lake import Lake

    lake = Lake(tmp_path)
    catalog = lake.catalog()
    catalog.create_namespace("sales")
    for name in ("a", "old.a"):
        catalog.create_table(("sales", name), schema=SCHEMA)
    found = _list(catalog, TableQuery(), page_size=10)
    assert [row["name"] for row in found["tables"]] == ["a", "old.a"]
    assert [row["name"] for row in _list(catalog, TableQuery(filter="OLD"))["tables"]] == ["old.a"]

    spec = from_options("sqlite", db_path=str(lake.db_path), warehouse_dir=str(lake.warehouse))
    conn = CatalogConnection("lake", "iceberg_ops", spec)
    settings = UiSettings(
        enabled=True, migrations_dir=None, connections=(), cache_seconds=0, events_page_size=50, parallelism=2
    )
    page = pages.namespace_page(views.namespace_view(conn, "sales", settings, Reads()), pages.Urls("/iceberg-ops", ""))
    assert page.count('href="/iceberg-ops/c/lake/ns/sales/t/a"') == 1  # sales.a's link, once
    assert ">old.a<" in page
