"""BaseMigration: the class every migration file's ``Migration`` derives from."""

from __future__ import annotations

from typing import TYPE_CHECKING, ClassVar

from iceberg_ops_provider.errors import IrreversibleMigrationError, MigrationError

if TYPE_CHECKING:
    from iceberg_ops_provider.migration.context import MigrationContext

__all__ = ["BaseMigration"]


class BaseMigration:
    """One versioned change to a namespace.

    A migration file ``NNNN_slug.py`` defines ``class Migration(BaseMigration)`` with an
    :meth:`upgrade` and, where the change can be undone, a :meth:`downgrade`. Both receive a
    :class:`~iceberg_ops_provider.migration.MigrationContext`; the changes they stage are committed
    when they return, one atomic commit per table.

    Attributes:
        description: A short human description, shown by ``status`` and recorded in the history.
            Defaults to the class docstring's first line, then to the file's slug.
        version: Set by the runner from the file name (``"0003"``).
    """

    description: ClassVar[str] = ""
    version: str = ""

    def upgrade(self, ctx: MigrationContext) -> None:
        """Apply the change."""
        raise MigrationError(f"Migration {self.version or type(self).__name__} defines no upgrade().")

    def downgrade(self, ctx: MigrationContext) -> None:
        """Undo :meth:`upgrade`; by default raise :class:`IrreversibleMigrationError` (it cannot be undone)."""
        raise IrreversibleMigrationError(
            f"Migration {self.version or type(self).__name__} defines no downgrade(); it cannot be rolled back."
        )
