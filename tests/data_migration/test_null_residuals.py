"""Negated filters and partitions whose value is null: the move keeps exactly the rows the filter keeps.

PyIceberg 0.12 computes the residual of ``!=``, ``not in`` and ``not starts with`` on a partition
value in Python, where ``None != 'eu'`` holds, so a null partition's files get an always-true
residual; row by row the filter keeps no null. These moves must hold what ``scan(row_filter=...)``
reads, byte-copied or re-encoded.
"""

from __future__ import annotations

from collections import Counter

import pyarrow as pa
import pytest
from pyiceberg.expressions.parser import parse
from pyiceberg.partitioning import PartitionField, PartitionSpec
from pyiceberg.schema import Schema
from pyiceberg.transforms import BucketTransform, IdentityTransform, TruncateTransform
from pyiceberg.types import LongType, NestedField, StringType

from iceberg_ops_provider.data_migration import DataMover
from iceberg_ops_provider.data_migration.null_residuals import negated_field_ids, residual_holds
from tests.data_migration.support import row_multiset

SCHEMA = Schema(
    NestedField(1, "id", LongType(), required=False), NestedField(2, "region", StringType(), required=False)
)
ROWS = pa.table(
    {
        "id": pa.array(range(8), pa.int64()),
        "region": pa.array(["eu", "us", None, None, "eu", "asia", None, "us"], pa.string()),
    }
)
TRANSFORMS = {"identity": IdentityTransform(), "bucket": BucketTransform(4), "truncate": TruncateTransform(1)}
FILTERS = [
    "region != 'eu'",
    "region not in ('eu', 'asia')",
    "not (region = 'eu')",
    "not region like 'e%'",
    "id > 2 and region != 'us'",
    "region != 'eu' or id = 2",
]


def _source(catalog, transform):
    catalog.create_namespace_if_not_exists("src")
    table = catalog.create_table(
        "src.events",
        schema=SCHEMA,
        partition_spec=PartitionSpec(PartitionField(2, 1000, transform, "region_part")),
    )
    for start in range(0, len(ROWS), 2):  # files of two rows each, so partitions span several files
        table.append(ROWS.slice(start, 2))
    return table


@pytest.mark.parametrize("rewrite", [False, True], ids=["as-is", "rewrite"])
@pytest.mark.parametrize("transform", list(TRANSFORMS))
@pytest.mark.parametrize("where", FILTERS)
def test_a_negated_filter_moves_no_row_of_a_null_partition_it_excludes(catalog, transform, where, rewrite):
    source = _source(catalog, TRANSFORMS[transform])
    kept = source.scan(row_filter=parse(where)).to_arrow()
    expected = Counter(zip(kept.column("id").to_pylist(), kept.column("region").to_pylist(), strict=True))
    mover = DataMover(catalog, "src.events", "dst.events", create_target=True, where=where, rewrite=rewrite)
    mover.run()
    assert row_multiset(catalog.load_table("dst.events"), ["id", "region"]) == expected
    assert mover.verify("checksum").ok


def test_only_the_columns_of_negated_predicates_need_null_counts(catalog):
    from pyiceberg.expressions.visitors import bind

    def ids(where: str) -> frozenset[int]:
        return negated_field_ids(bind(SCHEMA, parse(where), case_sensitive=True))

    assert ids("region = 'eu' and id > 3") == frozenset()
    assert ids("region != 'eu'") == ids("not (region = 'eu')") == ids("region not in ('a')") == frozenset({2})
    assert ids("not (id > 3 or region = 'x')") == frozenset({2})  # rewritten: id <= 3 and region != 'x'
    assert ids("not (region != 'x')") == frozenset()  # rewritten: region = 'x', which keeps no null anyway
    source = _source(catalog, IdentityTransform())
    files = {task.file.partition[0]: task.file for task in source.scan().plan_files()}
    assert residual_holds(files["eu"], frozenset({2})) and residual_holds(files[None], frozenset())
    assert not residual_holds(files[None], frozenset({2}))  # its null count for region is 2
