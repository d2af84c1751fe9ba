"""The error translation's names that left core.timeouts still import from there, warning where they went."""

from __future__ import annotations

import importlib
import re
import subprocess
import sys

import pytest

import iceberg_ops_provider.core.timeouts as timeouts

MOVED = {
    "catalog_endpoint": "iceberg_ops_provider.core.catalog_messages",
    "catalog_error": "iceberg_ops_provider.core.error_translation",
    "catalog_errors": "iceberg_ops_provider.core.error_translation",
    "unavailable_error": "iceberg_ops_provider.core.error_translation",
    "auth_error": "iceberg_ops_provider.core.auth_errors",
}


@pytest.mark.parametrize(("name", "new"), sorted(MOVED.items()))
def test_a_moved_name_imports_from_timeouts_and_warns_with_its_new_path(name, new):
    with pytest.warns(DeprecationWarning, match=re.escape(f"import it from {new} instead")) as caught:
        exec(f"from iceberg_ops_provider.core.timeouts import {name} as found", namespace := {})
    assert namespace["found"] is getattr(importlib.import_module(new), name)
    assert caught[0].filename == "<string>"  # the warning points at the importing line


def test_the_bounds_stay_in_timeouts_without_a_warning(recwarn):
    from iceberg_ops_provider.core.timeouts import (  # noqa: F401
        DEFAULT_CATALOG_TIMEOUT,
        bound_catalog_requests,
        call_with_timeout,
        check_timeout,
    )

    assert not [w for w in recwarn if issubclass(w.category, DeprecationWarning)]
    with pytest.raises(AttributeError, match="has no attribute 'no_such_name'"):
        _ = timeouts.no_such_name


def test_the_package_itself_never_uses_the_old_paths():
    # A fresh interpreter, every warning an error: importing the modules that use the translation must not warn.
    modules = [
        "iceberg_ops_provider.core.catalog",
        "iceberg_ops_provider.core.pyiceberg_catalogs",
        "iceberg_ops_provider.core.polling",
        "iceberg_ops_provider.core.atomic.commit",
        "iceberg_ops_provider.core.atomic.rest",
        "iceberg_ops_provider.core.atomic.sql",
        "iceberg_ops_provider.config",
        "iceberg_ops_provider.runner.migration_runner",
        "iceberg_ops_provider.cli",
    ]
    code = "".join(f"import {module}\n" for module in modules)
    result = subprocess.run(
        [sys.executable, "-W", "error::DeprecationWarning", "-c", code],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr
