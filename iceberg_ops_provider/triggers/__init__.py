"""Triggers of iceberg-ops: the deferred halves of the sensors, and the event trigger of asset watchers.

The sensors' triggers poll the catalog in the triggerer until done; :class:`TableHealthTrigger` watches tables forever.
"""

from iceberg_ops_provider.triggers.health import TableHealthTrigger
from iceberg_ops_provider.triggers.migration import IcebergMigrationTrigger
from iceberg_ops_provider.triggers.partition import IcebergPartitionTrigger

__all__ = ["IcebergMigrationTrigger", "IcebergPartitionTrigger", "TableHealthTrigger"]
