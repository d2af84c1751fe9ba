"""Manifest rewrite: merge many small manifests into few, as Spark's ``rewrite_manifests`` does.

Entries keep their files, snapshot ids and sequence numbers; one ``replace`` commit asserts ``main`` did not
move (the rules and the retry: ``docs/maintenance/rewrite_manifests.md``).
"""

from __future__ import annotations

import contextlib
import logging
import time
import uuid
from dataclasses import asdict, dataclass, replace
from typing import TYPE_CHECKING, Any

import pyarrow as pa
from pyiceberg.conversions import from_bytes
from pyiceberg.exceptions import CommitFailedException
from pyiceberg.io import OutputFile, OutputStream
from pyiceberg.manifest import ManifestContent, ManifestFile, ManifestWriter, write_manifest, write_manifest_list
from pyiceberg.table.refs import MAIN_BRANCH, SnapshotRef, SnapshotRefType
from pyiceberg.table.snapshots import Operation, Snapshot, Summary
from pyiceberg.table.update import AddSnapshotUpdate, AssertRefSnapshotId, AssertTableUUID, SetSnapshotRefUpdate

from iceberg_ops_provider.errors import MaintenanceConflictError, MaintenanceError
from iceberg_ops_provider.maintenance.files import ManifestReader, delete_files, size_property, window_map
from iceberg_ops_provider.maintenance.rewrite_commit import DeleteManifestWriterV2
from iceberg_ops_provider.messages import Arg

if TYPE_CHECKING:
    from pyiceberg.partitioning import PartitionSpec
    from pyiceberg.schema import Schema
    from pyiceberg.table import Table
    from pyiceberg.table.metadata import TableMetadata

__all__ = ["TARGET_SIZE_PROPERTY", "RewriteManifestsResult", "rewrite_manifests"]

log = logging.getLogger(__name__)

TARGET_SIZE_PROPERTY = "commit.manifest.target-size-bytes"
DEFAULT_TARGET_SIZE = 8 * 1024 * 1024  # Iceberg's default
_ATTEMPTS = 4


@dataclass(frozen=True)
class RewriteManifestsResult:
    """What :func:`rewrite_manifests` did (or, with ``dry_run``, would do).

    Counts use the names of Spark's ``rewrite_manifests`` procedure.
    """

    table: str
    dry_run: bool
    rewritten_manifests_count: int = 0
    added_manifests_count: int = 0
    kept_manifests_count: int = 0
    """Manifests of the current snapshot left as they are."""
    processed_entries_count: int = 0
    """Live entries moved into the new manifests."""
    target_manifest_size_bytes: int = DEFAULT_TARGET_SIZE
    snapshot_id: int | None = None
    """The ``replace`` snapshot committed (``None`` for a dry run or when nothing needed a rewrite)."""

    def to_json(self) -> dict[str, Any]:
        """JSON-able form (also what the operator pushes to XCom)."""
        return asdict(self)


class _CountingOutput(OutputFile):
    """An output file that only counts bytes (a dry run sizes manifests exactly, writing nothing)."""

    def __init__(self, location: str) -> None:
        super().__init__(location)
        self.stream = pa.MockOutputStream()

    def __len__(self) -> int:
        return self.stream.size()

    def exists(self) -> bool:
        return False

    def to_input_file(self) -> Any:
        raise NotImplementedError("a dry run writes nothing to read back")

    def create(self, overwrite: bool = False) -> OutputStream:
        return self.stream  # type: ignore[return-value]


def _partition_key(spec: PartitionSpec | None, schema: Schema, manifest: ManifestFile) -> tuple[Any, ...]:
    """Sort key from a manifest's partition lower bounds, so merged manifests cover narrow ranges."""
    if spec is None or not manifest.partitions:
        return ()
    try:
        fields = spec.partition_type(schema).fields
        return tuple(
            (1, None) if summary.lower_bound is None else (0, from_bytes(field.field_type, summary.lower_bound))
            for field, summary in zip(fields, manifest.partitions, strict=True)
        )
    except Exception:  # an unreadable bound only costs clustering
        return ()


def _schema_for(metadata: TableMetadata, spec: PartitionSpec) -> Schema:
    """The newest schema that still has every source column of ``spec`` (a dropped one is in older schemas)."""
    for schema in [metadata.schema(), *reversed(metadata.schemas)]:
        try:
            spec.partition_type(schema)
            return schema
        except Exception:
            continue
    raise MaintenanceError(f"No schema of the table has the source columns of partition spec {spec.spec_id}.")


@dataclass
class _Plan:
    """The manifests of ``main``'s head to rewrite, in groups, and those kept."""

    head: Snapshot
    groups: list[list[ManifestFile]]
    kept: list[ManifestFile]

    @property
    def rewritten(self) -> list[ManifestFile]:
        return [m for group in self.groups for m in group]


def _plan(table: Table, metadata: TableMetadata, target: int) -> _Plan | None:
    head = metadata.snapshot_by_name(MAIN_BRANCH)
    if head is None:
        return None
    manifests = ManifestReader(table.io).manifests(head)
    by_group: dict[tuple[int, int], list[ManifestFile]] = {}
    for manifest in manifests:
        by_group.setdefault((manifest.partition_spec_id, int(manifest.content)), []).append(manifest)
    groups: list[list[ManifestFile]] = []
    specs = metadata.specs()
    for (spec_id, _), members in sorted(by_group.items()):
        small = [m for m in members if m.manifest_length < target]
        if len(small) < 2:
            continue
        spec = specs.get(spec_id)
        schema = _schema_for(metadata, spec) if spec is not None else metadata.schema()
        order = {m.manifest_path: i for i, m in enumerate(small)}
        groups.append(sorted(small, key=lambda m: (_partition_key(spec, schema, m), order[m.manifest_path])))
    rewritten = {m.manifest_path for group in groups for m in group}
    return _Plan(head, groups, [m for m in manifests if m.manifest_path not in rewritten])


class _Writer:
    """Writes the new manifests of one rewrite attempt and remembers them for cleanup."""

    def __init__(self, table: Table, metadata: TableMetadata, snapshot_id: int, target: int, dry_run: bool) -> None:
        self.table = table
        self.metadata = metadata
        self.snapshot_id = snapshot_id
        self.target = target
        self.dry_run = dry_run
        self.commit_uuid = uuid.uuid4()
        self.compression = metadata.properties.get("write.avro.compression-codec", "gzip")
        self.written: list[str] = []
        self.entries = 0
        self._counter = 0

    def _output(self, name: str) -> OutputFile:
        location = self.table.location_provider().new_metadata_location(name)
        if self.dry_run:
            return _CountingOutput(location)
        self.written.append(location)
        return self.table.io.new_output(location)

    def _new_writer(self, spec: PartitionSpec, schema: Schema, content: ManifestContent) -> ManifestWriter:
        self._counter += 1
        output = self._output(f"optimized-m-{self.commit_uuid}-{self._counter}.avro")
        if content == ManifestContent.DELETES:
            return DeleteManifestWriterV2(spec, schema, output, self.snapshot_id, self.compression)  # type: ignore[arg-type]
        return write_manifest(
            format_version=self.metadata.format_version,  # type: ignore[arg-type]
            spec=spec,
            schema=schema,
            output_file=output,
            snapshot_id=self.snapshot_id,
            avro_compression=self.compression,  # type: ignore[arg-type]
        )

    def rewrite(self, group: list[ManifestFile]) -> list[ManifestFile]:
        """Write the live entries of ``group`` into manifests rolled at the target size."""
        spec = self.metadata.specs()[group[0].partition_spec_id]
        schema = _schema_for(self.metadata, spec)
        content = group[0].content
        done: list[ManifestFile] = []
        writer: ManifestWriter | None = None
        try:
            io = self.table.io
            # At most 8 input manifests read while the previous ones are written.
            for entries in window_map(lambda m: m.fetch_manifest_entry(io, True), group, workers=4):
                for entry in entries:
                    if writer is None:
                        writer = self._new_writer(spec, schema, content).__enter__()
                    writer.existing(entry)
                    self.entries += 1
                    if writer.tell() >= self.target:
                        writer.__exit__(None, None, None)
                        done.append(writer.to_manifest_file())
                        writer = None
        except BaseException:
            if writer is not None:
                # Close the half-written file before it is deleted: an object-store upload left open
                # could otherwise complete when the stream is garbage-collected, after the delete.
                with contextlib.suppress(Exception):
                    writer._writer.__exit__(None, None, None)
            raise
        if writer is not None:
            writer.__exit__(None, None, None)
            done.append(writer.to_manifest_file())
        return done

    def manifest_list(
        self, attempt: int, parent: Snapshot, metadata: TableMetadata, manifests: list[ManifestFile]
    ) -> str:
        """Write the manifest list of the new snapshot on top of ``parent``."""
        name = f"snap-{self.snapshot_id}-{attempt}-{self.commit_uuid}.avro"
        output = self._output(name)
        with write_manifest_list(
            format_version=metadata.format_version,  # type: ignore[arg-type]
            output_file=output,
            snapshot_id=self.snapshot_id,
            parent_snapshot_id=parent.snapshot_id,
            sequence_number=metadata.next_sequence_number(),
            avro_compression=self.compression,  # type: ignore[arg-type]
        ) as writer:
            writer.add_manifests(manifests)
        return output.location

    def forget(self, location: str) -> None:
        """Delete one file this attempt wrote (a manifest list whose commit failed)."""
        with contextlib.suppress(Exception):
            self.table.io.delete(location)
        self.written.remove(location)

    def discard(self) -> None:
        """Delete every file this attempt wrote (best effort: they are orphans otherwise)."""
        delete_files(self.table.io, self.written, what="files of an abandoned manifest rewrite")
        self.written.clear()


def _summary(parent: Snapshot, created: int, replaced: int, kept: int, entries: int) -> Summary:
    previous = parent.summary.additional_properties if parent.summary else {}
    carried = {k: v for k, v in previous.items() if k.startswith("total-")}  # the data is the same
    return Summary(
        Operation.REPLACE,
        **carried,
        **{
            "manifests-created": str(created),
            "manifests-replaced": str(replaced),
            "manifests-kept": str(kept),
            "entries-processed": str(entries),
        },
    )


def _commit(table: Table, writer: _Writer, plan: _Plan, new: list[ManifestFile], head: Snapshot, attempt: int) -> int:
    """One commit of the rewrite on top of ``head``: the manifests it kept (``CommitFailedException`` if it moved)."""
    metadata = table.metadata
    main = metadata.refs.get(MAIN_BRANCH) or SnapshotRef(snapshot_id=head.snapshot_id, type=SnapshotRefType.BRANCH)
    rewritten = {m.manifest_path for m in plan.rewritten}
    others = [m for m in ManifestReader(table.io).manifests(head) if m.manifest_path not in rewritten]
    manifest_list = writer.manifest_list(attempt, head, metadata, [*new, *others])
    snapshot = Snapshot(
        snapshot_id=writer.snapshot_id,
        parent_snapshot_id=head.snapshot_id,
        sequence_number=metadata.next_sequence_number(),
        timestamp_ms=int(time.time() * 1000),
        manifest_list=manifest_list,
        summary=_summary(head, len(new), len(rewritten), len(others), writer.entries),
        schema_id=metadata.current_schema_id,
    )
    updates = (
        AddSnapshotUpdate(snapshot=snapshot),
        # main keeps its own retention settings
        SetSnapshotRefUpdate(
            ref_name=MAIN_BRANCH, **{**main.model_dump(by_alias=True), "snapshot-id": writer.snapshot_id}
        ),
    )
    requirements = (
        AssertTableUUID(uuid=metadata.table_uuid),
        AssertRefSnapshotId(ref=MAIN_BRANCH, snapshot_id=head.snapshot_id),
    )
    log.info("%s: committing %d manifests in place of %d", ".".join(table.name()), len(new), len(rewritten))
    try:
        table._do_commit(updates=updates, requirements=requirements)
    except CommitFailedException:
        writer.forget(manifest_list)
        raise
    return len(others)


def _still_applies(table: Table, plan: _Plan, snapshot_id: int) -> Snapshot | None:
    """``main``'s new head if the written rewrite can go on top of it (every rewritten manifest still there)."""
    metadata = table.metadata
    head = metadata.snapshot_by_name(MAIN_BRANCH)
    if head is None or metadata.snapshot_by_id(snapshot_id) is not None:
        return None
    present = {m.manifest_path for m in ManifestReader(table.io).manifests(head)}
    return head if all(m.manifest_path in present for m in plan.rewritten) else None


def rewrite_manifests(
    table: Table, target_manifest_size_bytes: int | None = None, dry_run: bool = False
) -> RewriteManifestsResult:
    """Merge the small manifests of ``table``'s current snapshot into few near the target size.

    Args:
        table: The table (refreshed by the call).
        target_manifest_size_bytes: Size of the manifests written; default: the table's
            ``commit.manifest.target-size-bytes`` (8 MiB).
        dry_run: Report what would be rewritten and how many manifests would be written (sized
            exactly, by encoding them without storing them); change nothing.

    Raises:
        ValueError: A target that is not a positive number.
        MaintenanceError: A format version this cannot write (v3).
        MaintenanceConflictError: Concurrent commits replaced the manifests being rewritten on every
            attempt (nothing was committed; the manifests written were deleted).
    """
    name = ".".join(table.name())
    table.refresh()
    if table.metadata.format_version > 2:
        raise MaintenanceError(
            f"Table {name} has format version {table.metadata.format_version}; PyIceberg 0.12 writes manifests "
            "up to version 2, so its manifests cannot be rewritten here. Use Spark's rewrite_manifests."
        )
    if target_manifest_size_bytes is not None and target_manifest_size_bytes <= 0:
        raise ValueError(f"target_manifest_size_bytes must be positive, got {target_manifest_size_bytes}.")
    target = target_manifest_size_bytes or size_property(
        table.metadata.properties, TARGET_SIZE_PROPERTY, DEFAULT_TARGET_SIZE, Arg("target_manifest_size_bytes")
    )
    writer: _Writer | None = None
    for attempt in range(1, _ATTEMPTS + 1):
        if writer is None:
            metadata = table.metadata
            plan = _plan(table, metadata, target)
            if plan is None or not plan.groups:
                kept = len(plan.kept) if plan is not None else 0
                log.info("%s: no partition spec has two manifests below %d bytes; nothing to rewrite", name, target)
                return RewriteManifestsResult(
                    name, dry_run, kept_manifests_count=kept, target_manifest_size_bytes=target
                )
            writer = _Writer(table, metadata, metadata.new_snapshot_id(), target, dry_run)
            log.info("%s: rewriting %d manifests in %d group(s)", name, len(plan.rewritten), len(plan.groups))
            try:
                new = [manifest for group in plan.groups for manifest in writer.rewrite(group)]
            except BaseException:
                writer.discard()
                raise
            result = RewriteManifestsResult(
                table=name,
                dry_run=dry_run,
                rewritten_manifests_count=len(plan.rewritten),
                added_manifests_count=len(new),
                kept_manifests_count=len(plan.kept),
                processed_entries_count=writer.entries,
                target_manifest_size_bytes=target,
            )
            if dry_run:
                return result
            head = plan.head
        try:
            kept = _commit(table, writer, plan, new, head, attempt)
        except CommitFailedException as exc:
            table.refresh()
            moved = _still_applies(table, plan, writer.snapshot_id)
            if moved is not None and attempt < _ATTEMPTS:
                log.info("%s: main moved during the rewrite; committing the rewrite on top of it", name)
                head = moved
                continue
            writer.discard()
            writer = None
            if attempt == _ATTEMPTS:
                raise MaintenanceConflictError(
                    f"Rewriting the manifests of {name} conflicted with concurrent commits {_ATTEMPTS} times; "
                    "nothing was committed and the manifests written were deleted. Run it again when writes "
                    "to the table pause."
                ) from exc
            log.info("%s: a concurrent commit replaced manifests being rewritten; planning again", name)
            continue
        log.info("%s: replaced %d manifests with %d", name, len(plan.rewritten), len(new))
        return replace(result, kept_manifests_count=kept, snapshot_id=writer.snapshot_id)
    raise AssertionError("unreachable")  # pragma: no cover
