"""Triggers of iceberg-ops: the deferred halves of the sensors, polling the catalog in the triggerer."""

from iceberg_ops_provider.triggers.migration import IcebergMigrationTrigger
from iceberg_ops_provider.triggers.partition import IcebergPartitionTrigger

__all__ = ["IcebergMigrationTrigger", "IcebergPartitionTrigger"]
