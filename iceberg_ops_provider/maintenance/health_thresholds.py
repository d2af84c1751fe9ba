"""The limits a table health report judges a table by (:class:`HealthThresholds`).

Every limit has a default that follows Iceberg or Spark where they have one (Spark's
``rewrite_data_files`` treats files under 75% of the target as too small and over 180% as too
large; Iceberg's merge-append merges manifests from 100 on; snapshots expire after the table's
``history.expire.max-snapshot-age-ms``, 5 days). Bad values are refused when the object is built,
with a message naming the field, the value and what is allowed.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, fields
from datetime import timedelta
from typing import Any

from iceberg_ops_provider.core.name_hints import closest
from iceberg_ops_provider.maintenance.binpack import min_input_files_problem

__all__ = ["HealthThresholds"]

MIB = 1024 * 1024


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)


@dataclass(frozen=True)
class HealthThresholds:
    """When :func:`~iceberg_ops_provider.maintenance.health.table_health_report` calls for maintenance.

    Attributes:
        target_file_size_bytes: The data file size to aim for; ``None``: the table's
            ``write.target-file-size-bytes`` (Iceberg's default 512 MiB).
        small_file_fraction: A data file smaller than this fraction of the target is small
            (default 0.75, Spark's ``min-file-size-bytes``); ``0 < fraction <= 1``.
        large_file_factor: A data file larger than this multiple of the target is counted as large
            (default 1.8, Spark's ``max-file-size-bytes``); reported only, ``>= 1``.
        min_input_files: A partition needs compaction only with at least this many small files
            (default 5; also passed to ``compact_small_files_streaming``, whose rule it follows:
            ``>= 1``, as a lone small file is worth rewriting to sort it or apply its deletes).
        max_small_file_ratio: ... and only when small files are more than this share of its data
            files (default 0.1); ``0 <= ratio < 1``.
        max_position_delete_files: More position delete files than this in the table (each scan reads
            them) gives a warning (default 10); ``>= 0``.
        target_manifest_size_bytes: The manifest size to aim for; ``None``: the table's
            ``commit.manifest.target-size-bytes`` (Iceberg's default 8 MiB).
        small_manifest_fraction: A manifest smaller than this fraction of the manifest target is
            small (default 1: ``rewrite_manifests`` merges every manifest below the target);
            ``0 < fraction <= 1``.
        min_manifests_to_rewrite: ``rewrite_manifests`` is needed when the current snapshot has at
            least this many small manifests (default 100, Iceberg's
            ``commit.manifest.min-count-to-merge``); ``>= 2``.
        max_snapshot_age: Snapshots older than this are due for expiry; ``None``: the table's
            ``history.expire.max-snapshot-age-ms`` (5 days), the default ``expire_snapshots`` applies.
        retain_last: Snapshots each branch keeps whatever their age (default 1; passed to
            ``expire_snapshots``); ``>= 1``.
        max_snapshots: When set, more snapshots than this (after age-based expiry) need expiry down
            to this many per branch, whatever their age; ``None`` (default): no count limit.
        max_metadata_file_bytes: A current ``metadata.json`` larger than this gives a warning (default
            10 MiB: every commit rewrites it, every reader loads it); ``>= 1``.
        max_partition_skew: The largest partition holding more than this multiple of the median
            partition's bytes gives a warning (default 10); ``>= 1``.
    """

    target_file_size_bytes: int | None = None
    small_file_fraction: float = 0.75
    large_file_factor: float = 1.8
    min_input_files: int = 5
    max_small_file_ratio: float = 0.1
    max_position_delete_files: int = 10
    target_manifest_size_bytes: int | None = None
    small_manifest_fraction: float = 1.0
    min_manifests_to_rewrite: int = 100
    max_snapshot_age: timedelta | None = None
    retain_last: int = 1
    max_snapshots: int | None = None
    max_metadata_file_bytes: int = 10 * MIB
    max_partition_skew: float = 10.0

    def __post_init__(self) -> None:
        problems: list[str] = []

        def integer(name: str, minimum: int, optional: bool = False) -> None:
            value = getattr(self, name)
            if value is None and optional:
                return
            if not _is_int(value) or value < minimum:
                allowed = f"an integer >= {minimum}" + (" or None" if optional else "")
                problems.append(f"{name} must be {allowed}, got {value!r}")

        def number(name: str, low: float, high: float | None, low_open: bool, high_open: bool) -> None:
            value = getattr(self, name)
            ok = _is_number(value)
            if ok:
                ok = value > low if low_open else value >= low
            if ok and high is not None:
                ok = value < high if high_open else value <= high
            if not ok:
                lower = f"{'>' if low_open else '>='} {low}"
                upper = "" if high is None else f" and {'<' if high_open else '<='} {high}"
                problems.append(f"{name} must be a number {lower}{upper}, got {value!r}")

        integer("target_file_size_bytes", 1, optional=True)
        number("small_file_fraction", 0, 1, low_open=True, high_open=False)
        number("large_file_factor", 1, None, low_open=False, high_open=False)
        problem = min_input_files_problem(self.min_input_files)
        if problem is not None:
            problems.append(f"min_input_files {problem}")
        number("max_small_file_ratio", 0, 1, low_open=False, high_open=True)
        integer("max_position_delete_files", 0)
        integer("target_manifest_size_bytes", 1, optional=True)
        number("small_manifest_fraction", 0, 1, low_open=True, high_open=False)
        integer("min_manifests_to_rewrite", 2)
        age = self.max_snapshot_age
        if age is not None and (not isinstance(age, timedelta) or age < timedelta(0)):
            problems.append(f"max_snapshot_age must be a timedelta >= 0 or None, got {age!r}")
        integer("retain_last", 1)
        integer("max_snapshots", 1, optional=True)
        integer("max_metadata_file_bytes", 1)
        number("max_partition_skew", 1, None, low_open=False, high_open=False)
        if problems:
            raise ValueError("Invalid HealthThresholds: " + "; ".join(problems) + ".")

    @classmethod
    def from_json(cls, data: Mapping[str, Any] | None) -> HealthThresholds:
        """Build thresholds from a JSON-able mapping (an operator argument, a DAG param).

        ``max_snapshot_age`` may be a ``timedelta`` or a number of seconds. Keys left out keep their
        defaults.

        Raises:
            ValueError: An unknown key (the message lists the known ones) or a bad value.
        """
        if data is None:
            return cls()
        if isinstance(data, cls):
            return data
        if not isinstance(data, Mapping):
            raise ValueError(f"HealthThresholds.from_json takes a mapping of threshold names, got {data!r}.")
        known = [f.name for f in fields(cls)]
        unknown = sorted(set(data) - set(known))
        if unknown:
            guesses = [(name, closest(name, known)) for name in unknown]
            guessed = ", ".join(
                f"{guess!r}" + (f" for {name!r}" if len(unknown) > 1 else "") for name, guess in guesses if guess
            )
            raise ValueError(
                f"Unknown health threshold(s) {unknown}; the known ones are {known}."
                + (f" Did you mean {guessed}?" if guessed else "")
            )
        values = dict(data)
        age = values.get("max_snapshot_age")
        if _is_number(age):
            if age < 0:
                raise ValueError(f"max_snapshot_age must be >= 0 seconds, got {age!r}.")
            values["max_snapshot_age"] = timedelta(seconds=age)
        return cls(**values)

    def to_json(self) -> dict[str, Any]:
        """JSON-able form (``max_snapshot_age`` in seconds); :meth:`from_json` reads it back."""
        values = {f.name: getattr(self, f.name) for f in fields(self)}
        age = values["max_snapshot_age"]
        values["max_snapshot_age"] = None if age is None else age.total_seconds()
        return values
