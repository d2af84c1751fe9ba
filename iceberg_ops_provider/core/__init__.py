"""Building blocks every other part of iceberg-ops uses.

* :mod:`~iceberg_ops_provider.core.types`: Arrow <-> Iceberg type and schema translation.
* :mod:`~iceberg_ops_provider.core.type_strings`: types written as text (``"decimal(12,2)"``).
* :mod:`~iceberg_ops_provider.core.schema_diff`: what changed between two schemas.
* :mod:`~iceberg_ops_provider.core.contract`: does this Arrow data fit this table?
* :mod:`~iceberg_ops_provider.core.evolution`: schema evolution limited to what Iceberg allows.
* :mod:`~iceberg_ops_provider.core.snapshots`: list snapshots, time travel, roll back.
* :mod:`~iceberg_ops_provider.core.upsert`: upsert with key and schema checks.
"""
