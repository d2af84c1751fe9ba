"""How a table's data files are spread: a size histogram and the most skewed partitions.

Taken from a :class:`~iceberg_ops_provider.maintenance.health.TableHealthReport`, whose one streamed pass over
the current snapshot's manifests already aggregated every file; nothing is read again.
"""

from __future__ import annotations

import statistics
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from iceberg_ops_provider.maintenance.health import TableHealthReport

__all__ = ["DEFAULT_TOP", "FileLayout", "PartitionSize", "SizeRange", "file_layout"]

DEFAULT_TOP = 10
"""Partitions listed at most, the largest first."""


@dataclass(frozen=True)
class SizeRange:
    """Data files of a size in ``[min_bytes, max_bytes)``; ``small``: the whole range is under the small limit."""

    min_bytes: int
    max_bytes: int
    files: int
    bytes: int
    small: bool


@dataclass(frozen=True)
class PartitionSize:
    """One partition's data (``path`` empty when unpartitioned); ``times_median``: its bytes over the median's."""

    spec_id: int
    path: str
    data_files: int
    data_bytes: int
    records: int
    small_files: int
    times_median: float | None


@dataclass(frozen=True)
class FileLayout:
    """The live data files of the current snapshot by size, and the largest partitions against the median one.

    ``histogram`` has power-of-two ranges (empty ones left out); ``small_file_bytes`` is the size under which a
    file counts as small; ``skew`` is the largest partition's bytes over the median's (``None`` with fewer than two).
    """

    table: str
    snapshot_id: int | None
    files: int
    bytes: int
    target_file_size_bytes: int
    small_file_bytes: int
    histogram: tuple[SizeRange, ...]
    partitions: int
    median_partition_bytes: int | None
    skew: float | None
    largest: tuple[PartitionSize, ...]

    def to_json(self) -> dict[str, Any]:
        """JSON-able form."""
        return {
            **asdict(self),
            "histogram": [asdict(r) for r in self.histogram],
            "largest": [asdict(p) for p in self.largest],
        }


def file_layout(report: TableHealthReport, *, top: int = DEFAULT_TOP) -> FileLayout:
    """The file-size histogram and the ``top`` largest partitions of the table ``report`` measured."""
    small = int(report.target_file_size_bytes * report.thresholds.small_file_fraction)
    histogram = tuple(
        SizeRange(b.min_bytes, b.max_bytes, b.files, b.bytes, b.max_bytes <= small) for b in report.data_files.histogram
    )
    sizes = [p.data_bytes for p in report.partitions if p.data_files]
    median = int(statistics.median(sizes)) if sizes else None
    largest = sorted((p for p in report.partitions if p.data_files), key=lambda p: (-p.data_bytes, p.path))
    return FileLayout(
        table=report.table,
        snapshot_id=report.snapshot_id,
        files=report.data_files.files,
        bytes=report.data_files.bytes,
        target_file_size_bytes=report.target_file_size_bytes,
        small_file_bytes=small,
        histogram=histogram,
        partitions=len(sizes),
        median_partition_bytes=median,
        skew=report.partition_skew,
        largest=tuple(
            PartitionSize(
                p.spec_id,
                p.path,
                p.data_files,
                p.data_bytes,
                p.records,
                p.small_files,
                round(p.data_bytes / median, 2) if median else None,
            )
            for p in largest[: max(0, top)]
        ),
    )
