"""The commit of one compaction group (or data step unit): an atomic snapshot with Spark's ``RewriteFiles`` rules.

PyIceberg 0.12 has no rewrite commit, so :class:`RewriteFiles` is a snapshot producer of its own. It relies
on private parts of PyIceberg 0.12 (pinned; the tests exercise each).
"""

from __future__ import annotations

import logging
from collections import defaultdict
from collections.abc import Callable, Iterable, Mapping
from typing import TYPE_CHECKING, Any

from pyiceberg.exceptions import ValidationException
from pyiceberg.expressions.visitors import manifest_evaluator
from pyiceberg.manifest import (
    DataFile,
    DataFileContent,
    ManifestContent,
    ManifestEntry,
    ManifestEntryStatus,
    ManifestFile,
    ManifestWriter,
    ManifestWriterV2,
)
from pyiceberg.table.delete_file_index import _applies_to_data_file, _referenced_data_file_path
from pyiceberg.table.refs import MAIN_BRANCH
from pyiceberg.table.snapshots import Operation, Summary
from pyiceberg.table.update import AssertDefaultSpecId
from pyiceberg.table.update.snapshot import _SnapshotProducer
from pyiceberg.typedef import EMPTY_DICT

from iceberg_ops_provider.core.transactions import cached_transaction
from iceberg_ops_provider.maintenance.files import ManifestReader

if TYPE_CHECKING:
    from pyiceberg.io import FileIO
    from pyiceberg.table import Table, Transaction
    from pyiceberg.table.metadata import TableMetadata
    from pyiceberg.table.snapshots import Snapshot
    from pyiceberg.typedef import Record

__all__ = ["DeleteManifestWriterV2", "RewriteFiles", "RewriteValidator", "commit_rewrite", "delete_manifest_writer"]

log = logging.getLogger(__name__)


class DeleteManifestWriterV2(ManifestWriterV2):
    """A v2 manifest of delete files (PyIceberg 0.12 writes data manifests only)."""

    def content(self) -> ManifestContent:
        """What the manifest lists: delete files."""
        return ManifestContent.DELETES

    @property
    def _meta(self) -> dict[str, str]:
        return {**super()._meta, "content": "deletes"}


def delete_manifest_writer(producer: _SnapshotProducer[Any], spec_id: int) -> ManifestWriter:
    """A manifest writer for delete files in ``producer``'s snapshot (v2 tables only)."""
    metadata = producer._transaction.table_metadata
    if metadata.format_version != 2:
        raise ValidationException(f"Delete files exist only in format v2 tables, not v{metadata.format_version}.")
    return DeleteManifestWriterV2(
        producer.spec(spec_id),
        producer.schema(),
        producer.new_manifest_output(),
        producer.snapshot_id,
        producer._compression,
    )


class RewriteValidator:
    """Checks the commits that landed since a rewrite was planned on ``base_snapshot_id``, Java ``RewriteFiles`` style.

    ``cache`` holds manifest entries already read (manifests never change), shared by the groups of a run;
    a commit that changed the table's default spec from ``spec_id`` (the new files' spec) conflicts.
    ``what`` names the rewrite in messages (``compaction``, ``data step``); ``own`` tells the rewrite's own
    earlier commits (a data step's units), which are not read: they add no delete file and remove
    only files of other units, which the liveness check of :class:`RewriteFiles` covers anyway.
    """

    def __init__(
        self,
        io: FileIO,
        base_snapshot_id: int,
        data_files: Iterable[DataFile],
        delete_files: Iterable[DataFile],
        cache: dict[str, list[ManifestEntry]],
        spec_id: int,
        what: str = "compaction",
        own: Callable[[Snapshot], bool] | None = None,
    ) -> None:
        self.io = io
        self.spec_id = spec_id
        self.what = what
        self.own = own
        self.base_snapshot_id = base_snapshot_id
        self.data_files = {data_file.file_path: data_file for data_file in data_files}
        self.delete_paths = {delete_file.file_path for delete_file in delete_files}
        self._cache = cache
        self._reader = ManifestReader(io)

    def _entries(self, manifest: ManifestFile) -> list[ManifestEntry]:
        path = manifest.manifest_path
        if path not in self._cache:
            self._cache[path] = manifest.fetch_manifest_entry(self.io, discard_deleted=False)
        return self._cache[path]

    def _window(self, metadata: TableMetadata, head_id: int | None) -> list[Snapshot]:
        """The snapshots committed on ``main`` after the base, newest first."""
        window: list[Snapshot] = []
        snapshot_id = head_id
        while snapshot_id != self.base_snapshot_id:
            if snapshot_id is None:
                raise ValidationException(
                    f"Snapshot {self.base_snapshot_id}, which the {self.what} planned on, is no longer an ancestor "
                    "of main (the table was rolled back or replaced meanwhile)."
                )
            snapshot = metadata.snapshot_by_id(snapshot_id)
            if snapshot is None:
                raise ValidationException(
                    f"Snapshot {snapshot_id}, committed after the {self.what} planned, was expired before it "
                    "committed, so what changed meanwhile cannot be checked."
                )
            window.append(snapshot)
            snapshot_id = snapshot.parent_snapshot_id
        return window

    def _new_delete_applies(self, delete_file: DataFile) -> str | None:
        """The rewritten file that a concurrently added delete file may apply to, if any."""
        if delete_file.content == DataFileContent.EQUALITY_DELETES:
            return next(iter(self.data_files), "")
        target = _referenced_data_file_path(delete_file)
        if target is not None:
            return target if target in self.data_files else None
        for path, data_file in self.data_files.items():
            same_scope = data_file.spec_id == delete_file.spec_id and data_file.partition == delete_file.partition
            if (same_scope or data_file.spec_id != delete_file.spec_id) and _applies_to_data_file(
                delete_file, data_file
            ):
                return path
        return None

    def check(self, metadata: TableMetadata, head_id: int | None) -> None:
        """Raise ``ValidationException`` if a commit after the base conflicts with the rewrite."""
        if metadata.default_spec_id != self.spec_id:
            raise ValidationException(
                f"The table's partition spec changed (from {self.spec_id} to {metadata.default_spec_id}) after the "
                f"{self.what} planned."
            )
        for snapshot in self._window(metadata, head_id):
            if self.own is not None and self.own(snapshot):
                continue
            operation = snapshot.summary.operation.value if snapshot.summary else "unknown"
            for manifest in self._reader.manifests(snapshot):
                if manifest.added_snapshot_id != snapshot.snapshot_id:
                    continue
                is_data = manifest.content == ManifestContent.DATA
                if is_data and not (manifest.deleted_files_count is None or manifest.deleted_files_count > 0):
                    continue  # an append: it only adds files, which the rewrite keeps
                for entry in self._entries(manifest):
                    if entry.snapshot_id != snapshot.snapshot_id:
                        continue
                    path = entry.data_file.file_path
                    if entry.status == ManifestEntryStatus.DELETED and (
                        path in self.data_files or path in self.delete_paths
                    ):
                        raise ValidationException(
                            f"{path} was removed or replaced by snapshot {snapshot.snapshot_id} ({operation}) after "
                            f"the {self.what} planned."
                        )
                    if not is_data and entry.status == ManifestEntryStatus.ADDED:
                        hit = self._new_delete_applies(entry.data_file)
                        if hit is not None:
                            raise ValidationException(
                                f"Snapshot {snapshot.snapshot_id} ({operation}) added delete file {path}, which may "
                                f"delete rows of {hit or 'a rewritten file'}, after the {self.what} planned."
                            )


class RewriteFiles(_SnapshotProducer["RewriteFiles"]):
    """Snapshot producer that removes given files and adds others in one snapshot on ``main``.

    Add files with ``append_data_file``, remove data or delete files with ``delete_data_file``;
    ``commit()`` stages it in the transaction, ``validator`` checking the commits since the plan first.
    ``operation`` labels the snapshot: ``replace`` (the default, compaction) when the table's rows do
    not change, ``overwrite`` when rows change, ``delete`` when files are only removed.
    """

    def __init__(
        self,
        transaction: Transaction,
        io: FileIO,
        validator: RewriteValidator,
        snapshot_properties: dict[str, str] = EMPTY_DICT,
        operation: Operation = Operation.REPLACE,
    ) -> None:
        # PyIceberg's summary code knows no ``replace``: build it as an overwrite, relabel in _summary.
        super().__init__(
            Operation.OVERWRITE, transaction, io, snapshot_properties=snapshot_properties, branch=MAIN_BRANCH
        )
        self._validator = validator
        self._label = operation

    def _validate_concurrency(self) -> None:
        """Done in :meth:`_commit`, on the first attempt as well as on retries."""

    def _deleted_entries(self) -> list[ManifestEntry]:
        raise NotImplementedError("computed in _manifests")  # pragma: no cover

    def _existing_manifests(self) -> list[ManifestFile]:
        raise NotImplementedError("computed in _manifests")  # pragma: no cover

    def _relevance(self, metadata: TableMetadata) -> Callable[[ManifestFile], bool]:
        """Which manifests may list a removed file (by spec, then by partition summaries)."""
        by_spec: dict[int, set[Record]] = defaultdict(set)
        for data_file in self._deleted_data_files:
            by_spec[data_file.spec_id].add(data_file.partition)
        evaluators: dict[int, Callable[[ManifestFile], bool]] = {}
        for spec_id, partitions in by_spec.items():
            spec = metadata.specs()[spec_id]
            if spec.is_unpartitioned():
                evaluators[spec_id] = lambda _manifest: True
                continue
            predicate = self._transaction._build_partition_predicate(partitions, [field.name for field in spec.fields])
            try:
                evaluators[spec_id] = manifest_evaluator(spec, metadata.schema(), predicate)
            except Exception:  # an old spec the current schema cannot bind: read its manifests
                evaluators[spec_id] = lambda _manifest: True
        return lambda manifest: (
            manifest.partition_spec_id in evaluators and evaluators[manifest.partition_spec_id](manifest)
        )

    def _manifests(self) -> list[ManifestFile]:
        metadata = self._transaction.table_metadata
        parent = metadata.snapshot_by_id(self._parent_snapshot_id) if self._parent_snapshot_id is not None else None
        if parent is None:
            raise ValidationException("The table has no current snapshot any more; nothing to rewrite.")
        removed = {data_file.file_path for data_file in self._deleted_data_files}
        relevant = self._relevance(metadata)
        kept: list[ManifestFile] = []
        touched: list[tuple[ManifestFile, list[ManifestEntry], list[ManifestEntry]]] = []
        found: set[str] = set()
        for manifest in parent.manifests(self._io):
            if not relevant(manifest):
                kept.append(manifest)
                continue
            entries = manifest.fetch_manifest_entry(self._io, discard_deleted=True)
            hits = [entry for entry in entries if entry.data_file.file_path in removed]
            if not hits:
                kept.append(manifest)
                continue
            found.update(entry.data_file.file_path for entry in hits)
            touched.append((manifest, hits, [entry for entry in entries if entry.data_file.file_path not in removed]))
        if missing := sorted(removed - found):
            raise ValidationException(f"Files to rewrite are no longer in the table: {', '.join(missing[:5])}")

        def writer(spec_id: int, content: ManifestContent) -> ManifestWriter:
            if content == ManifestContent.DELETES:
                return delete_manifest_writer(self, spec_id)
            return self.new_manifest_writer(self.spec(spec_id))

        deleted: dict[tuple[int, ManifestContent], list[ManifestEntry]] = defaultdict(list)
        for manifest, hits, rest in touched:
            deleted[(manifest.partition_spec_id, manifest.content)].extend(hits)
            if rest:
                with writer(manifest.partition_spec_id, manifest.content) as rewritten:
                    for entry in rest:
                        rewritten.existing(entry)
                kept.append(rewritten.to_manifest_file())
        written: list[ManifestFile] = []
        if self._added_data_files:
            with self.new_manifest_writer(self.spec(self._validator.spec_id)) as added:
                for data_file in self._added_data_files:
                    added.add(
                        ManifestEntry.from_args(
                            status=ManifestEntryStatus.ADDED,
                            snapshot_id=self._snapshot_id,
                            sequence_number=None,
                            file_sequence_number=None,
                            data_file=data_file,
                        )
                    )
            written.append(added.to_manifest_file())
        for (spec_id, content), entries in deleted.items():
            with writer(spec_id, content) as deletions:
                for entry in entries:
                    deletions.delete(entry)
            written.append(deletions.to_manifest_file())
        return written + kept

    def _summary(self, snapshot_properties: dict[str, str] = EMPTY_DICT) -> Summary:
        summary = super()._summary(snapshot_properties)
        return Summary(self._label, **summary.additional_properties)

    def _commit(self) -> Any:
        self._validator.check(self._transaction.table_metadata, self._parent_snapshot_id)
        return super()._commit()


def commit_rewrite(
    table: Table,
    validator: RewriteValidator,
    *,
    removed: Iterable[DataFile],
    added: Iterable[DataFile],
    snapshot_properties: Mapping[str, str],
    operation: Operation = Operation.REPLACE,
) -> int:
    """Commit one snapshot on ``main`` labelled ``operation`` (``replace`` by default): ``removed`` out, ``added`` in.

    Concurrent appends are kept (PyIceberg retries with the table's ``commit.retry.*`` settings);
    conflicting commits raise ``ValidationException`` and nothing is committed.

    Returns:
        The new snapshot's id.
    """
    transaction = cached_transaction(table)
    # Checked by the catalog itself, so a spec change that lands after the last refresh conflicts too.
    transaction._stage((), (AssertDefaultSpecId(default_spec_id=validator.spec_id),))
    producer = RewriteFiles(transaction, table.io, validator, dict(snapshot_properties), operation)
    for data_file in removed:
        producer.delete_data_file(data_file)
    for data_file in added:
        producer.append_data_file(data_file)
    try:
        producer.commit()
    except BaseException:
        producer._clean_all_uncommitted()
        raise
    transaction.commit_transaction()
    return producer.snapshot_id
