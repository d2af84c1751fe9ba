"""Add a fee column and fill it for the rows already loaded: a schema change and a data change in one migration.

The column is added first; then the backfill runs as a tracked data step, one commit per unit of files,
so a killed or retried task finishes it with the next run instead of filling a row twice.
"""

import pyarrow.compute as pc

from iceberg_ops_provider.migration import BaseMigration


def fee(batch):
    """2.9% of the amount, rounded to whole cents; 0 for missing amounts."""
    cents = pc.round(pc.multiply(pc.cast(batch["amount_cents"], "float64"), 0.029))
    return pc.fill_null(pc.cast(cents, "int64"), 0)


class Migration(BaseMigration):
    description = "add fee, backfill it"

    def upgrade(self, ctx):
        ctx.add_column("payments", "fee_cents", "long", doc="processing fee in cents")
        ctx.backfill("payments", "fee_cents", fee)

    def downgrade(self, ctx):
        ctx.restore_data("payments")  # the rows as they were before the backfill
        ctx.drop_column("payments", "fee_cents")
