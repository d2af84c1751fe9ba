"""Sensors of iceberg-ops: wait for a migration version or for committed data, deferrable as Airflow is set up."""

from iceberg_ops_provider.sensors.migration import IcebergMigrationSensor
from iceberg_ops_provider.sensors.partition import IcebergPartitionSensor

__all__ = ["IcebergMigrationSensor", "IcebergPartitionSensor"]
