"""The limits a table health report judges a table by (:class:`HealthThresholds`).

Defaults follow Iceberg or Spark where they have one. Bad values are refused when the object is built,
checked strictly by pydantic (``True`` is not 1, text is not a number), naming field, value and bounds.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass, fields
from datetime import timedelta
from functools import cache
from typing import Annotated, Any, get_type_hints

from pydantic import Field, TypeAdapter, ValidationError

from iceberg_ops_provider.core.name_hints import closest
from iceberg_ops_provider.maintenance.binpack import MIN_INPUT_FILES

__all__ = ["HealthThresholds", "threshold_type"]

MIB = 1024 * 1024
_SIGNS = {"gt": ">", "ge": ">=", "lt": "<", "le": "<="}


def _limited(kind: type, optional: bool = False, words: str = "", **limits: Any) -> Any:
    """``kind`` within ``limits`` (pydantic's ``gt``, ``ge``, ``lt``, ``le``), with what it allows in words."""
    words = words or " and ".join(f"{_SIGNS[key]} {value}" for key, value in limits.items())
    allowed = {int: "an integer", float: "a number", timedelta: "a timedelta"}[kind] + f" {words}"
    inner = Annotated[kind, Field(allow_inf_nan=False, **limits) if kind is float else Field(**limits)]
    return Annotated[inner | None if optional else inner, Field(description=allowed + (" or None" if optional else ""))]


_Positive = _limited(int, ge=1)
_PositiveOrNone = _limited(int, optional=True, ge=1)
_Fraction = _limited(float, gt=0, le=1)
_Factor = _limited(float, ge=1)
_InputFiles = _limited(int, words=f"of at least {MIN_INPUT_FILES}", ge=MIN_INPUT_FILES)
_Ratio = _limited(float, ge=0, lt=1)
_Count = _limited(int, ge=0)
_Manifests = _limited(int, ge=2)
_Age = _limited(timedelta, optional=True, words=">= 0", ge=timedelta(0))


@cache
def _adapter(name: str) -> tuple[TypeAdapter[Any], str]:
    """The strict validator of threshold ``name`` (no ``True`` for 1, no text for numbers) and what it allows."""
    hint = get_type_hints(HealthThresholds, include_extras=True)[name]
    return TypeAdapter(hint, config={"strict": True}), hint.__metadata__[-1].description


def threshold_type(name: str) -> Any:
    """The annotated type of threshold ``name`` (its bounds, and what it allows in words as its description)."""
    return get_type_hints(HealthThresholds, include_extras=True)[name]


@dataclass(frozen=True)
class HealthThresholds:
    """When :func:`~iceberg_ops_provider.maintenance.health.table_health_report` calls for maintenance.

    Each field's meaning, default and bounds are in ``docs/maintenance/table_health_report.md``; ``None``
    for a target or ``max_snapshot_age`` means the table's own property. ``min_input_files`` and
    ``retain_last`` are also what the recommended calls get.
    """

    target_file_size_bytes: _PositiveOrNone = None
    small_file_fraction: _Fraction = 0.75
    large_file_factor: _Factor = 1.8
    min_input_files: _InputFiles = 5
    max_small_file_ratio: _Ratio = 0.1
    max_position_delete_files: _Count = 10
    target_manifest_size_bytes: _PositiveOrNone = None
    small_manifest_fraction: _Fraction = 1.0
    min_manifests_to_rewrite: _Manifests = 100
    max_snapshot_age: _Age = None
    retain_last: _Positive = 1
    max_snapshots: _PositiveOrNone = None
    max_metadata_file_bytes: _Positive = 10 * MIB
    max_partition_skew: _Factor = 10.0

    def __post_init__(self) -> None:
        problems = []
        for name in (f.name for f in fields(self)):
            adapter, allowed = _adapter(name)
            try:
                adapter.validate_python(getattr(self, name))
            except ValidationError:
                problems.append(f"{name} must be {allowed}, got {getattr(self, name)!r}")
        if problems:
            raise ValueError("Invalid HealthThresholds: " + "; ".join(problems) + ".")

    @classmethod
    def from_json(cls, data: Mapping[str, Any] | None) -> HealthThresholds:
        """Build thresholds from a JSON-able mapping (``max_snapshot_age`` in seconds or a ``timedelta``).

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
        if isinstance(age, int | float) and not isinstance(age, bool):
            if age < 0:
                raise ValueError(f"max_snapshot_age must be >= 0 seconds, got {age!r}.")
            values["max_snapshot_age"] = timedelta(seconds=age)
        return cls(**values)

    def to_json(self) -> dict[str, Any]:
        """JSON-able form (``max_snapshot_age`` in seconds); :meth:`from_json` reads it back."""
        age = self.max_snapshot_age
        return {**asdict(self), "max_snapshot_age": None if age is None else age.total_seconds()}
