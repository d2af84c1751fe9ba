"""The per-migration API: :class:`BaseMigration` and :class:`MigrationContext`.

Example migration file ``migrations/0001_create_orders.py``::

    import pyarrow as pa
    from iceberg_ops_provider.migration import BaseMigration

    class Migration(BaseMigration):
        description = "create orders"

        def upgrade(self, ctx):
            ctx.create_table("orders", schema=pa.schema([pa.field("id", pa.int64(), nullable=False)]))

        def downgrade(self, ctx):
            ctx.drop_table("orders")
"""

from __future__ import annotations

from iceberg_ops_provider.errors import IrreversibleMigrationError
from iceberg_ops_provider.migration.base import BaseMigration
from iceberg_ops_provider.migration.context import MigrationContext

__all__ = ["BaseMigration", "IrreversibleMigrationError", "MigrationContext"]
