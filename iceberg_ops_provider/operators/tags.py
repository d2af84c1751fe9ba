"""``IcebergTagOperator``: tag a table before a risky load, so ``iceberg-ops restore`` can set ``main`` back to it.

A thin front over :func:`iceberg_ops_provider.data_steps.tags.create_tag` (docs/tags-and-restore.md).
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import timedelta
from typing import TYPE_CHECKING, Any

from airflow.sdk import BaseOperator

from iceberg_ops_provider.hooks.catalog import IcebergCatalogHook
from iceberg_ops_provider.hooks.version_compat import AirflowFailException
from iceberg_ops_provider.operators.rendered import as_flag, optional_int, optional_text
from iceberg_ops_provider.operators.wording import operator_message

if TYPE_CHECKING:
    from airflow.sdk import Context

__all__ = ["IcebergTagOperator"]


class IcebergTagOperator(BaseOperator):
    """Tag a snapshot of ``table`` (default: its current one) as ``tag``; safe to retry.

    When the tag exists already on that snapshot (a retry after the commit), the task succeeds without
    committing; on another snapshot it fails at once, unless ``replace=True`` moves it. A branch of
    that name is never moved.

    Args:
        table: ``namespace.table`` (templated).
        tag: The tag's name, e.g. ``"before-load-{{ ds }}"`` (templated).
        max_age: How long snapshot expiry keeps the tag, from its snapshot's commit: ``"7d"``, ``"12h"``,
            ``"30m"``, a ``timedelta`` or milliseconds; default the table's ``history.expire.max-ref-age-ms``
            (forever) (templated).
        snapshot_id: The snapshot to tag; default the current one (templated).
        replace: Move a tag of that name that points at another snapshot (templated).
        iceberg_conn_id: The catalog's Airflow connection (templated).

    Returns (XCom): ``tag``, ``snapshot_id``, ``created`` (``False`` when it was there already),
    ``replaced`` (the snapshot a moved tag left), ``table`` and ``ref`` (the tag's age limit and expiry).
    """

    template_fields: Sequence[str] = ("table", "tag", "max_age", "snapshot_id", "replace", "iceberg_conn_id")
    ui_color = "#d6eaf8"

    def __init__(
        self,
        *,
        table: str,
        tag: str,
        max_age: timedelta | int | str | None = None,
        snapshot_id: int | str | None = None,
        replace: bool | str = False,
        iceberg_conn_id: str = IcebergCatalogHook.default_conn_name,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.table = table
        self.tag = tag
        self.max_age = max_age
        self.snapshot_id = snapshot_id
        self.replace = replace
        self.iceberg_conn_id = iceberg_conn_id

    def execute(self, context: Context) -> dict[str, Any]:
        """Create the tag (or find it there) and return the result's JSON for XCom.

        Raises:
            AirflowFailException: A permanent error (the tag on another snapshot, an unknown snapshot or
                table, a bad argument): retrying cannot help.
            IcebergOpsError: A transient one (the ref moved meanwhile, a silent catalog): retried.
        """
        from pyiceberg.exceptions import NoSuchTableError

        from iceberg_ops_provider.data_steps.tags import create_tag
        from iceberg_ops_provider.errors import IcebergOpsError, RefError

        try:
            replace = as_flag(self.replace, "replace")
            snapshot_id = optional_int(self.snapshot_id, "snapshot_id", "a snapshot id")
            catalog = IcebergCatalogHook(iceberg_conn_id=self.iceberg_conn_id).catalog_for("write")
            try:
                table = catalog.load_table(self.table)
            except NoSuchTableError as exc:
                raise AirflowFailException(
                    f"Table {self.table!r} does not exist in the catalog of connection "
                    f"{self.iceberg_conn_id!r} ({exc}). "
                    "Check the `table` argument (namespace.table)."
                ) from exc
            result = create_tag(
                table,
                self.tag,
                snapshot_id=snapshot_id,
                max_age=optional_text(self.max_age),  # type: ignore[arg-type]
                exist_ok=True,
                replace=replace,
            )
        except RefError as exc:
            movable = exc.reason == "exists" and exc.ref in exc.tags and not replace
            advice = " Pass replace=True to move the tag." if movable else ""
            raise AirflowFailException(operator_message(exc) + advice) from exc
        except IcebergOpsError as exc:
            if exc.transient:
                raise
            raise AirflowFailException(operator_message(exc)) from exc
        except ValueError as exc:  # a bad argument: the same on every try
            raise AirflowFailException(operator_message(exc)) from exc
        done = "tagged" if result.created else "was tagged already:"
        moved = f" (moved from snapshot {result.replaced})" if result.replaced is not None else ""
        self.log.info("%s %s snapshot %s as %s%s", self.table, done, result.tag.snapshot_id, self.tag, moved)
        return result.to_json()
