"""Create the payments table."""

import pyarrow as pa

from iceberg_ops_provider.migration import BaseMigration


class Migration(BaseMigration):
    description = "create payments"

    def upgrade(self, ctx):
        schema = pa.schema(
            [
                pa.field("id", pa.int64(), nullable=False),
                pa.field("country", pa.string()),
                pa.field("amount_cents", pa.int64()),
            ]
        )
        ctx.create_table("payments", schema, partition_by=["country"])

    def downgrade(self, ctx):
        ctx.drop_table("payments")
