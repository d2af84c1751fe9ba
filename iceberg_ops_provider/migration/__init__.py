"""The per-migration API: :class:`BaseMigration` and :class:`MigrationContext`.

A migration file defines ``class Migration(BaseMigration)`` with ``upgrade(self, ctx)`` and ``downgrade(self, ctx)``
(docs/migrations.md, "Writing migrations").
"""

from __future__ import annotations

from iceberg_ops_provider.errors import IrreversibleMigrationError
from iceberg_ops_provider.migration.base import BaseMigration
from iceberg_ops_provider.migration.context import MigrationContext

__all__ = ["BaseMigration", "IrreversibleMigrationError", "MigrationContext"]
