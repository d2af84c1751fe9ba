"""What a migration's staged changes would send to the catalog, named and shaped as the REST spec does.

Catalog operations and each table's requirements and updates, in commit order with sorted keys; the run's
receipt shows as ``<receipt>`` (docs/plan-format.md).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from iceberg_ops_provider.core.atomic.changes import TableChange
from iceberg_ops_provider.history.intent import RECEIPT_PROPERTY

if TYPE_CHECKING:
    from pyiceberg.catalog import Catalog
    from pyiceberg.typedef import Identifier


__all__ = ["RECEIPT_PLACEHOLDER", "staged_changes"]

RECEIPT_PLACEHOLDER = "<receipt>"
"""What a plan shows for the receipt the run sets on each table it commits."""


def _dump(model: Any) -> dict[str, Any]:
    return model.model_dump(mode="json", by_alias=True, exclude_none=True)  # type: ignore[no-any-return]


def staged_changes(
    queue: Any, fold: Callable[[Identifier], None], catalog: Catalog, *, with_receipt: bool = True
) -> list[dict[str, Any]]:
    """The changes ``queue`` (a :class:`~.commit_queue.CommitQueue`) holds, in commit order, as the catalog gets them.

    ``fold`` folds a table's pending schema changes into its transaction; ``catalog`` says which
    namespaces exist; ``with_receipt`` adds the runner's receipt update to each table change.
    """
    changes: list[dict[str, Any]] = []
    namespaces_created: set[tuple[str, ...]] = set()

    def ensure_namespace(namespace: tuple[str, ...]) -> None:
        if namespace not in namespaces_created and not catalog.namespace_exists(namespace):
            namespaces_created.add(namespace)
            changes.append({"operation": "create-namespace", "namespace": ".".join(namespace)})

    for item in queue.items:
        label = ".".join(item.identifier)
        if item.kind == "drop":
            changes.append({"operation": "drop-table", "table": label, "purge": bool(item.purge)})
        elif item.kind == "rename":
            target = tuple(item.target or ())
            ensure_namespace(target[:-1])
            changes.append({"operation": "rename-table", "source": label, "destination": ".".join(target)})
        elif (transaction := queue.pending.get(item.identifier)) is not None:
            fold(item.identifier)
            metadata = transaction.table_metadata
            properties = dict(sorted(metadata.properties.items()))
            if with_receipt:
                properties[RECEIPT_PROPERTY] = RECEIPT_PLACEHOLDER
            if item.identifier in queue.created:
                ensure_namespace(tuple(item.identifier[:-1]))
                changes.append(
                    {
                        "operation": "create-table",
                        "table": label,
                        "format-version": metadata.format_version,
                        # Created once in its final shape, the table's first schema, spec and order get
                        # the first ids, whatever the migration staged on its placeholder before.
                        "schema": {**_dump(metadata.schema()), "schema-id": 0},
                        "partition-spec": {**_dump(metadata.spec()), "spec-id": 0},
                        "write-order": {**_dump(order := metadata.sort_order()), "order-id": 1 if order.fields else 0},
                        "properties": properties,
                    }
                )
                continue
            change = TableChange.of(transaction)
            updates = [_dump(update) for update in change.updates]
            if with_receipt:
                updates.append({"action": "set-properties", "updates": {RECEIPT_PROPERTY: RECEIPT_PLACEHOLDER}})
            changes.append(
                {
                    "operation": "update-table",
                    "table": label,
                    "requirements": [_dump(requirement) for requirement in change.requirements],
                    "updates": updates,
                }
            )
    return changes
