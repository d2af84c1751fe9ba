"""Per-migration cost of the runner in one checkout, for comparing two commits side by side.

Run it once per checkout (``git worktree add /tmp/before <commit>``), alternating, each in a fresh
process: it puts the given checkout first on ``sys.path``, applies 11 migrations to a fresh SQLite
catalog, then times the next 20 (each sets one table property) and prints milliseconds per migration.

    .venv/bin/python benchmarks/ab_against_commit.py /tmp/before
    .venv/bin/python benchmarks/ab_against_commit.py "$PWD"
"""

from __future__ import annotations

import sys
import tempfile
import time
from pathlib import Path

CREATE = (
    "import pyarrow as pa\nfrom iceberg_ops_provider.migration import BaseMigration\n\n\n"
    "class Migration(BaseMigration):\n    def upgrade(self, ctx):\n"
    '        ctx.create_table("events", pa.schema([("n", pa.int64())]))\n'
)
STEP = (
    "from iceberg_ops_provider.migration import BaseMigration\n\n\n"
    "class Migration(BaseMigration):\n    def upgrade(self, ctx):\n"
    '        ctx.set_properties("events", step="{number}")\n'
)


def main() -> None:
    """Time 20 migrations after 11 applied, with the package of the checkout given as argument."""
    checkout = Path(sys.argv[1]).resolve()
    sys.path.insert(0, str(checkout))
    import iceberg_ops_provider
    from iceberg_ops_provider.catalogs import CatalogFactory
    from iceberg_ops_provider.runner import MigrationRunner

    assert Path(iceberg_ops_provider.__file__).is_relative_to(checkout), iceberg_ops_provider.__file__
    root = Path(tempfile.mkdtemp())
    migrations = root / "migrations"
    migrations.mkdir()
    (migrations / "0001_create.py").write_text(CREATE)
    for number in range(2, 32):
        (migrations / f"{number:04d}_step.py").write_text(STEP.format(number=number))
    catalog = CatalogFactory.build("sqlite", db_path=root / "catalog.db", warehouse_dir=root / "warehouse")
    runner = MigrationRunner(catalog, "sales", migrations)
    runner.upgrade("+11")
    started = time.perf_counter()
    runner.upgrade()
    print(f"{checkout} {(time.perf_counter() - started) / 20 * 1000:.1f} ms/migration")


if __name__ == "__main__":
    main()
