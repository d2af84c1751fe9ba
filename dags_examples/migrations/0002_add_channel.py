"""Add the sales channel and widen amounts."""

from iceberg_ops_provider.migration import BaseMigration


class Migration(BaseMigration):
    description = "add channel, widen amount"

    def upgrade(self, ctx):
        ctx.add_column("orders", "channel", "string", doc="web, shop or phone", after="customer")
        ctx.alter_column("orders", "amount", type="decimal(18,2)")

    def downgrade(self, ctx):
        # Iceberg cannot narrow a type again, so only the column is undone.
        ctx.drop_column("orders", "channel")
