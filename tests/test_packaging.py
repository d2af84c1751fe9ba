"""The installed distribution: entry points, provider discovery, and an engine free of Airflow."""

from __future__ import annotations

import json
import os
import pkgutil
import subprocess
import sys
from importlib.metadata import distribution
from pathlib import Path

import iceberg_ops_provider
from iceberg_ops_provider.get_provider_info import get_provider_info

BIN = Path(sys.executable).parent
ADAPTER_PACKAGES = {"hooks", "operators", "sensors", "triggers", "ui"}  # ui: the Iceberg pages of Airflow's UI
ADAPTER_MODULES = {"get_provider_info", "assets"}  # Airflow-facing modules outside the packages


def engine_modules() -> list[str]:
    """Every module of the package except the Airflow adapters (packages and modules)."""
    names = []
    for info in pkgutil.walk_packages(iceberg_ops_provider.__path__, prefix="iceberg_ops_provider."):
        parts = info.name.split(".")
        if ADAPTER_PACKAGES & set(parts) or parts[-1] in ADAPTER_MODULES:
            continue
        names.append(info.name)
    return names


def test_provider_info_names_the_distribution():
    dist = distribution("iceberg-ops")
    info = get_provider_info()
    assert info["package-name"] == dist.metadata["Name"] == "iceberg-ops"
    assert info["versions"] == [iceberg_ops_provider.__version__] == [dist.version]
    entry_points = {ep.group: ep.value for ep in dist.entry_points}
    assert entry_points["apache_airflow_provider"] == "iceberg_ops_provider.get_provider_info:get_provider_info"
    assert entry_points["console_scripts"] == "iceberg_ops_provider.cli:main"


def test_airflow_discovers_the_provider(tmp_path):
    env = {**os.environ, "AIRFLOW_HOME": str(tmp_path), "AIRFLOW__CORE__LOAD_EXAMPLES": "False"}
    result = subprocess.run(
        [str(BIN / "airflow"), "providers", "list", "-o", "json"], capture_output=True, text=True, env=env, timeout=300
    )
    assert result.returncode == 0, result.stderr
    listed = json.loads(next(line for line in result.stdout.splitlines() if line.startswith("[{")))
    providers = {p["package_name"]: p for p in listed}
    assert providers["iceberg-ops"]["version"] == iceberg_ops_provider.__version__


def test_console_script_runs():
    result = subprocess.run([str(BIN / "iceberg-ops"), "--version"], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == f"iceberg-ops, version {iceberg_ops_provider.__version__}"


def test_engine_imports_without_airflow_and_without_optional_extras():
    modules = engine_modules()
    assert "iceberg_ops_provider.catalogs.open" in modules
    blocked = ["airflow", "boto3", "botocore", "hive_metastore", "thrift", "sqlalchemy", "pyiceberg.catalog.sql"]
    code = f"""
import importlib, sys
for name in {blocked!r}:
    sys.modules[name] = None  # makes `import name` raise ImportError, as if not installed
for module in {[m for m in modules if not m.rsplit(".", 1)[-1].startswith("_")]!r}:
    importlib.import_module(module)
leaked = sorted(m for m in sys.modules if m.startswith("airflow."))
assert not leaked, leaked
print("ok", len({modules!r}))
"""
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("ok")


def test_no_engine_module_mentions_airflow_imports():
    root = Path(iceberg_ops_provider.__file__).parent
    for module in engine_modules():
        path = root.joinpath(*module.split(".")[1:])
        source = (path / "__init__.py") if path.is_dir() else path.with_suffix(".py")
        for line in source.read_text().splitlines():
            stripped = line.strip()
            assert not stripped.startswith(("import airflow", "from airflow")), f"{module}: {stripped}"


def test_the_pages_templates_and_static_files_are_package_data():
    import fnmatch
    import tomllib

    root = Path(iceberg_ops_provider.__file__).parent
    config = tomllib.loads((root.parent / "pyproject.toml").read_text())
    patterns = config["tool"]["setuptools"]["package-data"]["iceberg_ops_provider.ui"]
    shipped = [path.relative_to(root / "ui").as_posix() for path in (root / "ui").glob("*/*") if path.is_file()]
    data = [name for name in shipped if not name.endswith((".py", ".pyc"))]
    assert {"templates/base.html", "static/pages.css", "static/pages.js"} <= set(data)
    assert [name for name in data if not any(fnmatch.fnmatch(name, pattern) for pattern in patterns)] == []
