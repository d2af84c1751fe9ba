"""Questions about a table's partitions answered from its metadata alone, without reading data files.

:mod:`.probe` (has a partition committed rows, since a snapshot?) on :mod:`.values` (the partition
values a data file holds) and :mod:`.deletes` (which delete files apply to it).
"""
