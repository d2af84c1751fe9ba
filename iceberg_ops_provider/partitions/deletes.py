"""Which delete files apply to a data file, and how many of its rows they may remove, judged from manifests alone.

The partition check (:mod:`iceberg_ops_provider.partitions.probe`) walks a snapshot's manifest
entries itself rather than planning a scan, so that tables with equality deletes (as Flink upserts
write them) can be judged too. :class:`DeleteScope` collects the delete entries of that walk and
answers, per data file entry, without reading any file:

* **Position deletes** apply to the data files of their spec and partition whose data sequence
  number is at most theirs, or to the one data file their ``file_path`` bounds name. Each removes at
  most its record count of rows from a data file it applies to.
* **Equality deletes** apply to the data files whose data sequence number is below theirs, in their
  partition (anywhere, when written unpartitioned), unless the bounds of an equality column show that
  no row of the data file can hold a deleted value. They may remove any number of rows.

What this gives is a bound, never an exact count: rows a data file certainly still has are its record
count less the record counts of the position delete files that apply (none, when equality deletes
apply), and at most its record count.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from pyiceberg.conversions import from_bytes
from pyiceberg.manifest import INITIAL_SEQUENCE_NUMBER, DataFileContent
from pyiceberg.table.delete_file_index import DeleteFileIndex
from pyiceberg.types import DoubleType, FloatType, PrimitiveType

if TYPE_CHECKING:
    from pyiceberg.manifest import DataFile, ManifestEntry
    from pyiceberg.partitioning import PartitionSpec
    from pyiceberg.schema import Schema

__all__ = ["AppliedDeletes", "DeleteScope"]


@dataclass(frozen=True)
class AppliedDeletes:
    """The delete files that apply to one data file.

    Attributes:
        files: How many delete files apply.
        position_rows: At most this many of its rows are removed by position deletes.
        equality: Whether equality deletes apply (any number of its rows may be gone).
    """

    files: int = 0
    position_rows: int = 0
    equality: bool = False


def _sequence(entry: ManifestEntry) -> int:
    return entry.sequence_number if entry.sequence_number is not None else INITIAL_SEQUENCE_NUMBER


class DeleteScope:
    """The delete files of one snapshot's manifests, matched to data files on request.

    Args:
        schema: The table's current schema (to read the bounds of equality columns).
        specs: The table's partition specs by id.
    """

    def __init__(self, schema: Schema, specs: dict[int, PartitionSpec]) -> None:
        self._schema = schema
        self._unpartitioned = {spec_id for spec_id, spec in specs.items() if spec.is_unpartitioned()}
        self._positions = DeleteFileIndex()
        self._equality: list[tuple[int, DataFile]] = []

    def add(self, entry: ManifestEntry) -> None:
        """Take a delete entry (position or equality) of the snapshot's manifests."""
        delete_file = entry.data_file
        if delete_file.content == DataFileContent.POSITION_DELETES:
            self._positions.add_delete_file(entry, partition_key=delete_file.partition)
        elif delete_file.content == DataFileContent.EQUALITY_DELETES:
            self._equality.append((_sequence(entry), delete_file))

    def for_data(self, entry: ManifestEntry) -> AppliedDeletes:
        """The delete files that apply to the data file of ``entry``."""
        data_file = entry.data_file
        sequence = _sequence(entry)
        positions = self._positions.for_data_file(sequence, data_file, partition_key=data_file.partition)
        equality = sum(
            1
            for deleted_at, delete_file in self._equality
            if deleted_at > sequence and self._equality_applies(delete_file, data_file)
        )
        return AppliedDeletes(
            files=len(positions) + equality,
            position_rows=sum(max(delete_file.record_count, 0) for delete_file in positions),
            equality=equality > 0,
        )

    def _equality_applies(self, delete_file: DataFile, data_file: DataFile) -> bool:
        if delete_file.spec_id not in self._unpartitioned and (
            delete_file.spec_id != data_file.spec_id or delete_file.partition != data_file.partition
        ):
            return False
        # A deleted row must equal a data row in every equality column: one column whose values
        # cannot meet rules the whole delete file out for this data file.
        return not any(self._apart(field_id, delete_file, data_file) for field_id in delete_file.equality_ids or ())

    def _apart(self, field_id: int, delete_file: DataFile, data_file: DataFile) -> bool:
        """Whether no value of column ``field_id`` in ``delete_file`` can be one of ``data_file``'s."""
        try:
            field_type = self._schema.find_field(field_id).field_type
        except ValueError:
            return False
        if not isinstance(field_type, PrimitiveType) or isinstance(field_type, FloatType | DoubleType):
            return False  # NaN and -0.0 make float bounds unreliable for this
        if _count(delete_file.null_value_counts, field_id) != 0 and _count(data_file.null_value_counts, field_id) != 0:
            return False  # nulls on both sides may meet
        bounds = [_bound(field_type, side, field_id) for side in (delete_file, data_file)]
        if any(low is None or high is None for low, high in bounds):
            return False
        (delete_low, delete_high), (data_low, data_high) = bounds
        try:
            return bool(delete_high < data_low or delete_low > data_high)
        except TypeError:
            return False


def _count(counts: dict[int, int] | None, field_id: int) -> int | None:
    """A per-column count of a data file, ``None`` when it was not recorded."""
    return counts.get(field_id) if counts else None


def _bound(field_type: PrimitiveType, data_file: DataFile, field_id: int) -> tuple[Any, Any]:
    """The lower and upper bound of a column in a file's metrics, ``None`` for a missing one."""
    found = []
    for bounds in (data_file.lower_bounds, data_file.upper_bounds):
        raw = bounds.get(field_id) if bounds else None
        try:
            found.append(from_bytes(field_type, raw) if raw is not None else None)
        except Exception:  # a bound this type cannot decode: no judgement from it
            found.append(None)
    return found[0], found[1]
