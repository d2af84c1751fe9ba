"""Create the orders table."""

import pyarrow as pa

from iceberg_ops_provider.migration import BaseMigration


class Migration(BaseMigration):
    description = "create orders"

    def upgrade(self, ctx):
        ctx.create_table(
            "orders",
            schema=pa.schema(
                [
                    pa.field("id", pa.int64(), nullable=False),
                    pa.field("customer", pa.string()),
                    pa.field("amount", pa.decimal128(12, 2)),
                    pa.field("ts", pa.timestamp("us", tz="UTC")),
                ]
            ),
            partition_by=["day(ts)"],
            sort_by=["ts desc"],
            properties={"owner": "sales"},
        )
        ctx.set_identifier_fields("orders", "id")

    def downgrade(self, ctx):
        ctx.drop_table("orders")
