"""Fixtures for the migration engine: throwaway migration folders and a runner on a real catalog."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from iceberg_ops_provider.migration import MigrationContext
from iceberg_ops_provider.runner import MigrationRunner


def migrate(catalog, *steps, namespace: str = "sales") -> None:
    """Run ``steps`` (each a function of the context) as one migration of ``namespace`` and commit it."""
    ctx = MigrationContext(catalog, namespace)
    for step in steps:
        step(ctx)
    ctx.commit()


def write_migration(
    folder: Path,
    name: str,
    upgrade: str = "pass",
    downgrade: str | None = None,
    description: str | None = None,
) -> Path:
    """Write ``folder/name`` as a migration whose methods run the given code (``ctx`` in scope)."""
    folder.mkdir(parents=True, exist_ok=True)
    lines = [
        "import pyarrow as pa",
        "from iceberg_ops_provider.migration import BaseMigration, IrreversibleMigrationError",
        "",
        "",
        "class Migration(BaseMigration):",
    ]
    if description is not None:
        lines.append(f"    description = {description!r}")
    lines += ["", "    def upgrade(self, ctx):", textwrap.indent(textwrap.dedent(upgrade).strip(), " " * 8)]
    if downgrade is not None:
        lines += ["", "    def downgrade(self, ctx):", textwrap.indent(textwrap.dedent(downgrade).strip(), " " * 8)]
    path = folder / name
    path.write_text("\n".join(lines) + "\n")
    return path


@pytest.fixture
def migrations_dir(tmp_path: Path) -> Path:
    folder = tmp_path / "migrations"
    folder.mkdir()
    return folder


@pytest.fixture
def runner(catalog, migrations_dir) -> MigrationRunner:
    return MigrationRunner(catalog, namespace="sales", migrations_dir=migrations_dir)


ORDERS = """
ctx.create_table(
    "orders",
    schema=pa.schema([pa.field("id", pa.int64(), nullable=False), pa.field("ts", pa.timestamp("us", tz="UTC"))]),
)
"""


@pytest.fixture
def three_migrations(migrations_dir: Path) -> Path:
    """0001 creates orders, 0002 adds a column, 0003 sets a property; all reversible."""
    write_migration(migrations_dir, "0001_create_orders.py", ORDERS, 'ctx.drop_table("orders")', "create orders")
    write_migration(
        migrations_dir,
        "0002_add_email.py",
        'ctx.add_column("orders", "email", "string")',
        'ctx.drop_column("orders", "email")',
        "add email",
    )
    write_migration(
        migrations_dir,
        "0003_owner.py",
        'ctx.set_properties("orders", owner="sales")',
        'ctx.remove_properties("orders", "owner")',
        "set owner",
    )
    return migrations_dir
