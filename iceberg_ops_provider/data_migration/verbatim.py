"""Source data files copied byte for byte into the target, when nothing about their rows has to change.

Iceberg reads a Parquet file's columns by field id, so a file whose columns the target numbers, names and
types alike holds exactly the rows re-encoding would write. The rules are in ``docs/data_mover.md``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from pyiceberg.partitioning import PartitionSpec
from pyiceberg.schema import Schema
from pyiceberg.typedef import Record

if TYPE_CHECKING:
    from pyiceberg.io import OutputFile

__all__ = ["COPY_CHUNK_BYTES", "PartitionPath", "copy_stream", "partition_as_is", "schema_blocker"]

COPY_CHUNK_BYTES = 8 * 1024 * 1024
"""Bytes read and written at a time by a byte-for-byte copy."""


def schema_blocker(source: Schema, target: Schema, *, rename: Mapping[str, str], all_columns: bool) -> str | None:
    """Why the files of a move cannot be copied as they are, or ``None`` when the two current schemas allow it."""
    if any(source_name != target_name for source_name, target_name in rename.items()):
        return "the move renames columns"
    if not all_columns:
        return "the move selects columns"
    for field in source.fields:
        try:
            counterpart = target.find_field(field.field_id)
        except ValueError:
            return f"the target has no field with id {field.field_id} (source column {field.name!r})"
        if counterpart.name != field.name:
            return f"field id {field.field_id} is {field.name!r} in the source and {counterpart.name!r} in the target"
        if counterpart.field_type != field.field_type:
            source_type, target_type = field.field_type, counterpart.field_type
            return f"column {field.name!r} is {source_type} in the source and {target_type} in the target"
        if counterpart.required and not field.required:
            return f"column {field.name!r} is optional in the source and required in the target"
        if target.find_column_name(field.field_id) != field.name:
            return f"column {field.name!r} is not a top-level column of the target"
    source_ids = {field.field_id for field in source.fields}
    for field in target.fields:
        if field.field_id in source_ids:
            continue
        if field.required:
            return f"the target requires column {field.name!r}, which the source lacks"
        if getattr(field, "initial_default", None) is not None:
            return f"the target's column {field.name!r} has a default the copied files would not show"
    return None


def partition_as_is(partition: Record, file_spec: PartitionSpec | None, target_spec: PartitionSpec) -> Record | None:
    """The partition value a file keeps in the target, or ``None`` when the target partitions differently.

    ``file_spec`` is the spec the file was written under (``None``: unknown to the source).
    """
    if target_spec.is_unpartitioned():
        return Record()
    if file_spec is None:
        return None

    def layout(spec: PartitionSpec) -> list[tuple[int, Any]]:
        return [(field.source_id, field.transform) for field in spec.fields]

    if layout(file_spec) != layout(target_spec):
        return None
    return partition


@dataclass(frozen=True)
class PartitionPath:
    """A partition value's folder name under a spec, where a location provider asks for a ``PartitionKey``."""

    spec: PartitionSpec
    schema: Schema
    partition: Record

    def to_path(self) -> str:
        """The partition's folder, as PyIceberg names it (``day=2026-11-30``)."""
        return self.spec.partition_to_path(self.partition, self.schema)


def copy_stream(
    stream: Any,
    output: OutputFile,
    *,
    on_bytes: Callable[[int], None] | None = None,
    stop: Callable[[], bool] | None = None,
    chunk_bytes: int = COPY_CHUNK_BYTES,
) -> int:
    """Copy the rest of ``stream`` into a new file ``output`` a chunk at a time; the bytes copied.

    An existing ``output`` is an error (names are never reused). ``on_bytes`` gets each chunk's size;
    when ``stop`` returns true before a chunk the copy raises :class:`InterruptedError` and the partial
    file stays for the caller to delete.
    """
    copied = 0
    with output.create(overwrite=False) as sink:
        while True:
            if stop is not None and stop():
                raise InterruptedError(f"copy to {output.location} stopped after {copied} bytes")
            chunk = stream.read(chunk_bytes)
            if not chunk:
                return copied
            sink.write(chunk)
            copied += len(chunk)
            if on_bytes is not None:
                on_bytes(len(chunk))
