"""Questions about a table's partitions answered from its metadata alone, without reading data files.

* :mod:`~iceberg_ops_provider.partitions.probe`: has a partition committed rows (since a snapshot)?
  ``partition_rows``, ``probe_partition``, ``snapshot_mark``, ``PartitionProbe``.
* :mod:`~iceberg_ops_provider.partitions.values`: the partition values a data file holds, per transform.
* :mod:`~iceberg_ops_provider.partitions.deletes`: which delete files apply to a data file.
"""
