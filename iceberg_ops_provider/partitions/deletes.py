"""Which delete files apply to a data file, and how many of its rows they may remove, judged from manifests alone.

The result is a bound, never an exact count (the rules: docs/sensors.md, "How the partition check works").
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

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
    """The delete files that apply to one data file, the rows position deletes may remove, any equality deletes."""

    files: int = 0
    position_rows: int = 0
    equality: bool = False


class DeleteScope:
    """The delete files of one snapshot's manifests, matched to data files on request (``specs`` by id)."""

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
            self._equality.append((entry.sequence_number or INITIAL_SEQUENCE_NUMBER, delete_file))

    def for_data(self, entry: ManifestEntry) -> AppliedDeletes:
        """The delete files that apply to the data file of ``entry``."""
        data_file = entry.data_file
        sequence = entry.sequence_number or INITIAL_SEQUENCE_NUMBER
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
        if all((side.null_value_counts or {}).get(field_id) != 0 for side in (delete_file, data_file)):
            return False  # nulls on both sides may meet
        try:
            (delete_low, delete_high), (data_low, data_high) = (
                [from_bytes(field_type, (bounds or {})[field_id]) for bounds in (side.lower_bounds, side.upper_bounds)]
                for side in (delete_file, data_file)
            )
            return bool(delete_high < data_low or delete_low > data_high)
        except Exception:  # a bound missing, or one this type cannot decode or compare: no judgement from it
            return False
