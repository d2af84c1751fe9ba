"""Compaction's byte budget between the reader and the files: the reader's queue makes room only for
what the writer does not hold (rows gathered into a row group, row groups being encoded)."""

from __future__ import annotations

import threading
import time
from pathlib import Path

from iceberg_ops_provider.core import parquet_output
from iceberg_ops_provider.maintenance import streaming
from iceberg_ops_provider.maintenance.compaction import compact_small_files_streaming
from tests.support.lake import Lake
from tests.support.tables import rows, small_files_table

KIB = 1024


def test_the_queue_makes_room_only_for_what_the_consumer_does_not_hold() -> None:
    queue = streaming._ByteQueue(100, 10)
    assert queue.put("a", 5)
    queue.consumer_holds(95)
    blocked = threading.Thread(target=queue.put, args=("b", 8), daemon=True)
    blocked.start()
    blocked.join(0.3)
    assert blocked.is_alive()  # 5 + 8 bytes queued would pass max(10, 100 - 95)
    queue.consumer_holds(40)
    blocked.join(5)
    assert not blocked.is_alive()
    assert [queue.get(), queue.get()] == ["a", "b"]
    queue.consumer_holds(1000)
    assert queue.put("large", 500)  # an empty queue takes one item, whatever the consumer holds


def test_a_compaction_keeps_queued_and_held_rows_within_the_budget(tmp_path: Path, monkeypatch) -> None:
    row_group, minimum = 48 * KIB, 8 * KIB
    budget = 2 * row_group + minimum
    monkeypatch.setattr(streaming, "ENCODE_THREADS", 2)
    monkeypatch.setattr(streaming, "ROW_GROUP_BYTES", row_group)
    monkeypatch.setattr(streaming, "QUEUE_BYTES", minimum)
    monkeypatch.setattr(streaming, "PIPELINE_BYTES", budget)
    monkeypatch.setattr(parquet_output, "MIN_BYTES_PER_COLUMN", 0)  # these row groups are small
    encode = parquet_output.encode_part

    def slow_encoder(*args, **kwargs):  # the real encoder, slower than the reader, as on large row groups
        time.sleep(0.05)
        return encode(*args, **kwargs)

    monkeypatch.setattr(parquet_output, "encode_part", slow_encoder)
    seen: list[tuple[int, int, int, int]] = []  # after each put: items, bytes queued, held by the writer, item size
    put = streaming._ByteQueue.put

    def noting(self, item, nbytes):
        added = put(self, item, nbytes)
        with self._changed:
            seen.append((len(self._items), self._bytes, self._held, nbytes))
        return added

    monkeypatch.setattr(streaming._ByteQueue, "put", noting)
    catalog = Lake(tmp_path).catalog()
    try:
        table = small_files_table(catalog, "sales.events", appends=40, rows=150)
        before = rows(table)
        result = compact_small_files_streaming(table, min_input_files=2)
        assert result.failed_groups_count == 0 and rows(table) == before
    finally:
        catalog.close()
    largest_item = max(size for *_, size in seen)
    assert largest_item < minimum  # so the budget, not the one-item rule, bounds the queue
    # The writer reports what it holds: at times a row group gathered and one being encoded.
    assert max(held for _, _, held, _ in seen) > row_group
    for items, queued, held, _ in seen:
        # Bytes put while the writer held more were rows read ahead for nothing: the budget forbids them.
        assert items <= 1 or queued + held <= budget or queued <= minimum, (items, queued, held)
