"""A table that is not there is a 404 naming it, in JSON and as a page, not an empty 200.

(A namespace that is not in the catalog still answers: with migration files configured, it is a namespace
whose migrations are all pending.)
"""

from __future__ import annotations

import pytest

pytestmark = [pytest.mark.slow, pytest.mark.long]


@pytest.mark.parametrize(
    ("path", "named"),
    [
        ("/iceberg-ops/api/c/iceberg_ops_default/ns/shop/t/nosuch", "No table shop.nosuch"),
        ("/iceberg-ops/c/iceberg_ops_default/ns/shop/t/nosuch", "No table shop.nosuch"),
        ("/iceberg-ops/api/c/iceberg_ops_default/ns/nosuch/t/events", "No table nosuch.events"),
    ],
)
def test_what_is_not_there_is_a_404_naming_it(admin, path, named):
    response = admin.get(path)
    assert response.status_code == 404, response.text
    assert named in response.text


def test_namespaces_that_exist_still_answer(admin):
    assert admin.get("/iceberg-ops/api/c/iceberg_ops_default/ns/empty").status_code == 200  # no tables, no history
    assert admin.get("/iceberg-ops/api/c/iceberg_ops_default/ns/shop/t/events").status_code == 200
