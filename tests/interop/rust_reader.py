"""Run by the iceberg-rust peer's interpreter (tests/interop/rust_peer.py), not by the test process:
``rust_reader.py METADATA_LOCATION SQL`` registers the table at that metadata file as ``t`` through
iceberg-rust's DataFusion table provider and prints the rows of ``SQL`` as one JSON list."""

from __future__ import annotations

import json
import sys

import datafusion
from pyiceberg_core.datafusion import IcebergDataFusionTable


def main(metadata_location: str, sql: str) -> None:
    """Print the rows ``sql`` selects from the table at ``metadata_location``."""
    context = datafusion.SessionContext()
    # The identifier only names the table inside the provider; the metadata file says everything else.
    context.register_table("t", IcebergDataFusionTable(["peer", "t"], metadata_location, {}))
    rows = context.sql(sql).to_arrow_table().to_pylist()
    json.dump(rows, sys.stdout, default=str)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
