"""A page of one catalog shows its silence in full once, whichever bound spoke first: the page's own
read bound (``The catalog of connection ...``) or the catalog's (``The catalog at URL ...``)."""

from __future__ import annotations

from iceberg_ops_provider.ui.html import errors_once

PAGE_BOUND = (
    "The catalog of connection 'lake' did not answer within 1.5 s (the connection's timeout); the rest of the "
    "page is shown without it."
)
CATALOG_BOUND = "The catalog at http://127.0.0.1:8181 did not answer within 1.5 s (GET /v1/config)."


def test_both_wordings_of_one_silence_are_shown_once():
    view = errors_once({"errors": {"migrations": PAGE_BOUND, "lock": CATALOG_BOUND, "tables": PAGE_BOUND}})
    assert view["errors"] == {"migrations": PAGE_BOUND, "lock": "The same as above.", "tables": "The same as above."}


def test_other_errors_are_each_shown():
    other = "The catalog at http://127.0.0.1:8181 refused access (403)."
    view = errors_once({"errors": {"migrations": CATALOG_BOUND, "lock": other}})
    assert view["errors"] == {"migrations": CATALOG_BOUND, "lock": other}
