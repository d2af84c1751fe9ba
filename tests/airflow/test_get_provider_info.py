"""Airflow lists the provider's sensors and triggers, and every listed module holds what it names."""

from __future__ import annotations

import importlib
import json
import os
import subprocess
import sys
from pathlib import Path

import jsonschema
import pytest

from iceberg_ops_provider.get_provider_info import get_provider_info

BIN = Path(sys.executable).parent
INTEGRATION = "Apache Iceberg (iceberg-ops)"
SENSOR_MODULES = ["iceberg_ops_provider.sensors.migration", "iceberg_ops_provider.sensors.partition"]
TRIGGER_MODULES = [
    "iceberg_ops_provider.triggers.health",
    "iceberg_ops_provider.triggers.migration",
    "iceberg_ops_provider.triggers.partition",
]


def _airflow(tmp_path: Path, *args: str) -> list[dict]:
    """Run ``airflow providers ARGS -o json`` in a fresh home (no database needed) and read its JSON."""
    env = {**os.environ, "AIRFLOW_HOME": str(tmp_path), "AIRFLOW__CORE__LOAD_EXAMPLES": "False"}
    result = subprocess.run(
        [str(BIN / "airflow"), "providers", *args, "-o", "json"], capture_output=True, text=True, env=env, timeout=300
    )
    assert result.returncode == 0, result.stderr[-3000:]
    return json.loads(next(line for line in result.stdout.splitlines() if line.startswith("[")))


def test_airflow_lists_the_triggers(tmp_path):
    listed = [row for row in _airflow(tmp_path, "triggers") if row["package_name"] == "iceberg-ops"]
    assert sorted(row["class"] for row in listed) == TRIGGER_MODULES
    assert {row["integration_name"] for row in listed} == {INTEGRATION}


def test_airflow_shows_the_sensors_in_the_provider_details(tmp_path):
    (details,) = _airflow(tmp_path, "get", "iceberg-ops", "--full")
    assert details["sensors"] == [{"integration-name": INTEGRATION, "python-modules": SENSOR_MODULES}]
    assert details["triggers"] == [{"integration-name": INTEGRATION, "python-modules": TRIGGER_MODULES}]
    assert INTEGRATION in {integration["integration-name"] for integration in details["integrations"]}


def test_the_provider_info_fits_airflows_schema():
    import airflow

    schema = json.loads((Path(airflow.__file__).parent / "provider_info.schema.json").read_text())
    jsonschema.validate(get_provider_info(), schema)


@pytest.mark.parametrize(
    ("module", "name", "base"),
    [
        ("iceberg_ops_provider.sensors.migration", "IcebergMigrationSensor", "airflow.sdk.BaseSensorOperator"),
        ("iceberg_ops_provider.sensors.partition", "IcebergPartitionSensor", "airflow.sdk.BaseSensorOperator"),
        ("iceberg_ops_provider.triggers.migration", "IcebergMigrationTrigger", "airflow.triggers.base.BaseTrigger"),
        ("iceberg_ops_provider.triggers.partition", "IcebergPartitionTrigger", "airflow.triggers.base.BaseTrigger"),
        ("iceberg_ops_provider.triggers.health", "TableHealthTrigger", "airflow.triggers.base.BaseEventTrigger"),
    ],
)
def test_each_listed_module_holds_its_class(module, name, base):
    base_module, base_name = base.rsplit(".", 1)
    cls = getattr(importlib.import_module(module), name)
    assert issubclass(cls, getattr(importlib.import_module(base_module), base_name))
    assert module in SENSOR_MODULES + TRIGGER_MODULES
