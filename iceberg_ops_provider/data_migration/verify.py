"""Whether the target holds the source's rows: three ways to compare two streams of Arrow record batches.

Rows are compared as multisets over the given columns: ``count``, ``checksum`` (streaming, in constant
memory) and ``sample``; their odds and costs are in ``docs/data_mover.md`` (Verification).
"""

from __future__ import annotations

import math
import random
from collections.abc import Callable, Hashable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from iceberg_ops_provider.data_migration.results import VerifyReport
from iceberg_ops_provider.data_migration.row_hash import canonical_values, column_arrays, hash_columns, row_hashes

__all__ = ["ContentChecksum", "row_hashes", "verify_rows"]

Stream = Callable[[], Iterable[pa.RecordBatch]]
"""A function returning a fresh iterator over the rows each time it is called."""

MISSING_REPORTED = 100
"""At most this many unmatched sampled rows are listed in a ``sample`` report (all are counted)."""

_LOW32 = pa.scalar(0xFFFFFFFF, pa.uint64())
_SHIFT32 = pa.scalar(32, pa.uint64())


class ContentChecksum:
    """An order-independent checksum of rows over fixed columns, updated batch by batch in constant memory.

    The sum modulo ``2**64`` of :func:`~iceberg_ops_provider.data_migration.row_hash.row_hashes`
    over every row, kept with the row count (``rows``).
    """

    def __init__(self, columns: Sequence[str], *, side: str = "rows") -> None:
        """Start an empty checksum; ``side`` names the rows in error messages (``source rows``)."""
        self.columns = tuple(columns)
        self.rows = 0
        self._side = side
        self._low = 0
        self._high = 0

    def update(self, batch: pa.RecordBatch | pa.Table) -> None:
        """Add the rows of ``batch``; a ``ValueError`` when it lacks one of the columns."""
        for part in batch.to_batches() if isinstance(batch, pa.Table) else (batch,):
            arrays = column_arrays(part, self.columns, side=self._side)
            if not part.num_rows:
                continue
            hashes = hash_columns(arrays)
            # Each half sums without overflow for any batch under 2**32 rows; Python ints carry the rest.
            self._low += pc.sum(pc.bit_wise_and(hashes, _LOW32)).as_py()
            self._high += pc.sum(pc.shift_right(hashes, _SHIFT32)).as_py()
            self.rows += part.num_rows

    @property
    def value(self) -> int:
        """The sum of the row hashes modulo ``2**64``."""
        return (self._low + (self._high << 32)) % 2**64

    def digest(self) -> str:
        """The checksum as text: ``<rows>-<sum as 16 hex digits>``."""
        return f"{self.rows}-{self.value:016x}"


def verify_rows(
    method: str,
    source: Stream,
    target: Stream,
    *,
    columns: Sequence[str],
    sample_size: int = 100,
    seed: int | None = None,
) -> VerifyReport:
    """Compare the source's rows with the target's as multisets over ``columns``.

    ``source`` and ``target`` return a fresh iterator over their rows (named as in the target) each
    call; ``seed`` seeds the ``sample`` method's choice (a random one, recorded, when ``None``). The
    report's ``details`` hold ``difference`` (target rows minus source rows); for ``checksum`` also both
    checksums and ``columns``; for ``sample`` also ``seed``, ``sample_size``, ``sampled``, ``matched``,
    ``missing_count`` and ``missing`` (at most :data:`MISSING_REPORTED` unmatched rows, with their
    source position and values).

    Raises:
        ValueError: A batch without one of the columns.
    """
    names = tuple(columns)
    if method == "count":
        source_rows = _count(source, names, "source rows")
        target_rows = _count(target, names, "target rows")
        return VerifyReport(
            ok=source_rows == target_rows,
            method=method,
            source_rows=source_rows,
            target_rows=target_rows,
            details={"difference": target_rows - source_rows},
        )
    if method == "checksum":
        return _verify_checksum(source, target, names)
    if seed is None:
        seed = random.SystemRandom().getrandbits(32)
    return _verify_sample(source, target, names, sample_size, seed)


def _batches(stream: Stream) -> Iterator[pa.RecordBatch]:
    for batch in stream():
        yield from batch.to_batches() if isinstance(batch, pa.Table) else (batch,)


def _count(stream: Stream, columns: Sequence[str], side: str) -> int:
    rows = 0
    for batch in _batches(stream):
        column_arrays(batch, columns, side=side)
        rows += batch.num_rows
    return rows


def _verify_checksum(source: Stream, target: Stream, columns: tuple[str, ...]) -> VerifyReport:
    source_sum, target_sum = ContentChecksum(columns, side="source rows"), ContentChecksum(columns, side="target rows")
    for checksum, stream in ((source_sum, source), (target_sum, target)):
        for batch in stream():
            checksum.update(batch)  # tables too
    return VerifyReport(
        ok=source_sum.digest() == target_sum.digest(),
        method="checksum",
        source_rows=source_sum.rows,
        target_rows=target_sum.rows,
        details={
            "source_checksum": source_sum.digest(),
            "target_checksum": target_sum.digest(),
            "columns": list(columns),
            "difference": target_sum.rows - source_sum.rows,
        },
    )


@dataclass
class _SampledRow:
    position: int
    hash: int
    values: tuple[Hashable, ...]
    shown: dict[str, Any]


class _Reservoir:
    """Reservoir sampling (Li's algorithm L): which positions of a stream to keep, in O(k log(n/k)) steps."""

    def __init__(self, size: int, rng: random.Random) -> None:
        self.size = size
        self.seen = 0
        self._rng = rng
        self._weight = 0.0
        self._next = size  # the next position to keep once the reservoir is full

    def offer(self, count: int) -> dict[int, int]:
        """Slots replaced by the next ``count`` rows: slot -> index of the row within them (the last one wins)."""
        start, end = self.seen, self.seen + count
        picks: dict[int, int] = {}
        for position in range(start, min(end, self.size)):
            picks[position] = position - start
            if position == self.size - 1:
                self._weight = math.exp(math.log(self._uniform()) / self.size)
                self._next = position + self._skip()
        while self._next < end:  # never true before the reservoir is full: _next starts at its size
            picks[self._rng.randrange(self.size)] = self._next - start
            self._weight *= math.exp(math.log(self._uniform()) / self.size)
            self._next += self._skip()
        self.seen = end
        return picks

    def _uniform(self) -> float:
        value = self._rng.random()
        return value if value > 0.0 else 5e-324

    def _skip(self) -> int:
        if self._weight >= 1.0:  # rounding with a huge reservoir: keep the very next row
            return 1
        return math.floor(math.log(self._uniform()) / math.log1p(-self._weight)) + 1


def _verify_sample(
    source: Stream, target: Stream, columns: tuple[str, ...], sample_size: int, seed: int
) -> VerifyReport:
    reservoir = _Reservoir(sample_size, random.Random(seed))
    sampled: dict[int, _SampledRow] = {}
    for batch in _batches(source):
        arrays = [_takeable(array) for array in column_arrays(batch, columns, side="source rows")]
        picks = reservoir.offer(batch.num_rows)
        if picks:
            slots = list(picks)
            indices = pa.array([picks[slot] for slot in slots], pa.int64())
            taken = [array.take(indices) for array in arrays]
            start = reservoir.seen - batch.num_rows
            hashes = hash_columns(taken).to_pylist()
            values = zip(*(canonical_values(array) for array in taken), strict=True)
            shown = zip(*(_shown_values(array) for array in taken), strict=True)
            for slot, hash_, row, display in zip(slots, hashes, values, shown, strict=True):
                sampled[slot] = _SampledRow(start + picks[slot], hash_, row, dict(zip(columns, display, strict=True)))
    source_rows = reservoir.seen

    wanted: dict[int, list[_SampledRow]] = {}
    for row in sampled.values():
        wanted.setdefault(row.hash, []).append(row)
    target_rows = 0
    for batch in _batches(target):
        arrays = [_takeable(array) for array in column_arrays(batch, columns, side="target rows")]
        target_rows += batch.num_rows
        if wanted and batch.num_rows:
            _match(arrays, wanted)

    missing = sorted((row for rows in wanted.values() for row in rows), key=lambda row: row.position)
    return VerifyReport(
        ok=not missing and source_rows == target_rows,
        method="sample",
        source_rows=source_rows,
        target_rows=target_rows,
        details={
            "seed": seed,
            "sample_size": sample_size,
            "sampled": len(sampled),
            "matched": len(sampled) - len(missing),
            "missing_count": len(missing),
            "missing": [{"position": row.position, "values": row.shown} for row in missing[:MISSING_REPORTED]],
            "columns": list(columns),
            "difference": target_rows - source_rows,
        },
    )


def _takeable(array: pa.Array) -> pa.Array:
    """The array, with view layouts (which Arrow cannot ``take`` from) as plain ones."""
    if pa.types.is_string_view(array.type):
        return array.cast(pa.large_string())
    if pa.types.is_binary_view(array.type):
        return array.cast(pa.large_binary())
    return array


def _match(arrays: Sequence[pa.Array], wanted: dict[int, list[_SampledRow]]) -> None:
    """Strike from ``wanted`` the sampled rows that rows of this batch equal (each row matches one)."""
    hashes = hash_columns(arrays)
    candidates = pc.indices_nonzero(pc.is_in(hashes, value_set=pa.array(list(wanted), pa.uint64())))
    if not len(candidates):
        return
    candidate_values = zip(*(canonical_values(array.take(candidates)) for array in arrays), strict=True)
    for hash_, values in zip(hashes.take(candidates).to_pylist(), candidate_values, strict=True):
        rows = wanted.get(hash_)
        if not rows:
            continue
        for i, row in enumerate(rows):
            if row.values == values:
                del rows[i]
                if not rows:
                    del wanted[hash_]
                break


def _shown_values(array: pa.Array) -> list[Any]:
    """The values as JSON-serializable Python values (``str()`` of the others), for a report."""
    kind = array.type
    if pa.types.is_timestamp(kind) or pa.types.is_time(kind) or pa.types.is_date(kind):
        return array.cast(pa.string()).to_pylist()  # also nanoseconds, which datetime cannot hold
    try:
        values = array.to_pylist()
    except (pa.ArrowException, ValueError):  # e.g. nanoseconds nested in a struct
        return [_scalar_text(value) for value in array]
    return [_jsonable(value) for value in values]


def _scalar_text(value: pa.Scalar) -> str:
    try:
        return str(value)
    except (pa.ArrowException, ValueError):
        return f"<{value.type} value>"


def _jsonable(value: Any) -> Any:
    if value is None or isinstance(value, bool | int | str):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else str(value)
    if isinstance(value, dict):
        return {str(key): _jsonable(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [_jsonable(item) for item in value]
    return str(value)  # json cannot hold it (Decimal, bytes, datetime, ...)
