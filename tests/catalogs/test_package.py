"""The ``catalogs`` package's names: each resolves to its module's, none shadows a module, and naming
the package imports no catalog client (PyIceberg's clients read ``.pyiceberg.yaml`` when imported)."""

from __future__ import annotations

import pkgutil
import subprocess
import sys

import iceberg_ops_provider.catalogs as catalogs


def test_every_public_name_resolves_and_none_is_also_a_module_s_name():
    modules = {module.name for module in pkgutil.iter_modules(catalogs.__path__)}
    assert modules >= {"open", "rest", "sql", "trust", "failures", "redact"}
    assert set(catalogs.__all__).isdisjoint(modules)  # `catalogs.open` must stay the module, not a function
    for name in catalogs.__all__:
        assert getattr(catalogs, name) is not None, name


def test_importing_the_package_imports_no_catalog_client():
    code = (
        "import sys, iceberg_ops_provider.catalogs as c; c.CatalogSpec; c.from_options('sqlite'); "
        "print(sorted(m for m in sys.modules if m.startswith(('pyiceberg.catalog', 'requests', 'sqlalchemy'))))"
    )
    found = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True)
    assert found.stdout.strip() == "[]", found.stdout
