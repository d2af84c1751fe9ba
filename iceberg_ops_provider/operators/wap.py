"""Write-audit-publish operators: audit a move's branch, then publish it onto ``main`` (or discard it).

Thin fronts over :meth:`DataMover.audit`, :meth:`DataMover.publish` and :meth:`DataMover.discard` for a move that
:class:`~iceberg_ops_provider.operators.data_move.IcebergDataMoveOperator` ran with ``branch=...``
(``docs/data_mover.md``, "Write-audit-publish"). Both take the move's ``move_id`` (the move task's
``.output["move_id"]``) and ``branch``: the move task's default id belongs to its own task instance.
"""

from __future__ import annotations

import ast
import json
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from iceberg_ops_provider.hooks.version_compat import AirflowFailException, AirflowSkipException
from iceberg_ops_provider.operators.data_move import MOVE_TEMPLATE_FIELDS, _MoveOperator, _text
from iceberg_ops_provider.operators.rendered import optional_int

if TYPE_CHECKING:
    from airflow.sdk import Context

    from iceberg_ops_provider.data_migration import AuditReport, DataMover

__all__ = ["IcebergAuditOperator", "IcebergDiscardOperator", "IcebergPublishOperator"]

SCOPES = ("move", "branch")


def _named_move(move_id: str | None, branch: str | None) -> tuple[str, str]:
    """The move id and branch a task was given; a clear error when a template rendered either empty."""
    given_id, given_branch = _text(move_id), _text(branch)
    if given_id is None:
        raise ValueError(
            "move_id is empty: pass the id of the move that wrote the branch, e.g. move_id=move.output['move_id'] "
            "from its IcebergDataMoveOperator task."
        )
    if given_branch is None:
        raise ValueError("branch is empty: pass the branch the move task was given (its branch=...).")
    return given_id, given_branch


def _names(value: Sequence[Any] | str | None, field: str) -> list[Any]:
    """A list of columns (or keys) as given, or as a template rendered it (JSON text, a Python list, or one name).

    Raises:
        ValueError: Text starting with ``[`` that is not a list, naming ``field``.
    """
    if value is None:
        return []
    if isinstance(value, str):
        text = value.strip()
        if not text:
            return []
        if text.startswith("["):
            for read in (json.loads, ast.literal_eval):  # a list param renders as Python's repr: ['id', 'day']
                try:
                    found = read(text)
                except (ValueError, SyntaxError):
                    continue
                if isinstance(found, list):
                    return found
            raise ValueError(
                f"{field}={value!r} is not a list of column names: render it as JSON, such as "
                '["id", "customer"], or give one column name.'
            )
        return [text]
    return list(value)


def _describe(report: AuditReport) -> str:
    """The report for the task's log: the verdict, then each check with a sample of its offending rows."""
    verdict = "passed" if report.ok else f"FAILED ({len(report.failed)} of {len(report.checks)} checks)"
    lines = [
        f"Audit of move {report.move_id} on branch {report.branch} of {report.table}: {verdict}; "
        f"{report.rows} rows read (scope {report.scope}) at snapshot {report.snapshot_id}"
    ]
    for check in report.checks:
        lines.append(f"  {'ok' if check.ok else 'FAILED'}  {check.name}: {check.failed_rows} offending row(s)")
        lines.extend(f"      {row}" for row in check.sample)
    return "\n".join(lines)


class _BranchOperator(_MoveOperator):
    """A step on the branch of a move the arguments identify, as the move task ran it."""

    def __init__(self, *, source: str, target: str, move_id: str, branch: str, **kwargs: Any) -> None:
        super().__init__(source=source, target=target, move_id=move_id, branch=branch, **kwargs)

    def _branch_mover(self) -> DataMover:
        move_id, _ = _named_move(self.move_id, self.branch)
        return self._mover(move_id)

    def _record_target(self, mover: DataMover, snapshot_id: int | None, *, written: bool) -> None:
        """Record the target at ``snapshot_id``: read (the audit) or written (the publish)."""
        from iceberg_ops_provider.lineage import table_lineage

        target = mover.target_catalog.load_table(mover.target)
        table = table_lineage(mover.target_catalog, target, snapshot_id=snapshot_id)
        self.record_lineage([] if written else [table], [table] if written else [])


class IcebergAuditOperator(_BranchOperator):
    """Check the rows a finished move wrote on its branch; fail the task (no retry) when a check fails.

    A passing audit is recorded on the branch, and :class:`IcebergPublishOperator` publishes exactly
    the snapshot it read. A failing one leaves ``main`` untouched and keeps the branch for inspection.

    Args:
        source, target, source_conn_id, target_conn_id, where, columns, rename, mode: As the move ran.
        move_id: The move's id (templated), e.g. ``move.output["move_id"]``.
        branch: The move's branch (templated).
        not_null: Columns without nulls (templated).
        unique: Columns, or tuples of columns together, that must be unique; rows with a null in the
            key are ignored (templated).
        no_rows_where: A filter no row may match, e.g. ``"amount < 0"`` (templated).
        min_rows, max_rows: Bounds on the rows read (templated).
        checks: Functions of a ``pyarrow.RecordBatch`` returning its number of offending rows (named
            by ``__name__``), or ``{name: function}``; Python DAGs only.
        scope: ``move`` (default: the rows added on the branch since it was cut) or ``branch`` (every row of it).
        sample_size: Offending rows kept per check.

    Returns (XCom): the ``AuditReport`` JSON (``ok``, ``rows``, ``checks``: each ``name``,
    ``failed_rows``, ``sample``). When a check fails the report is pushed under the XCom key ``report``
    instead (a failed task returns nothing) and written to the log, and the task fails with
    ``AirflowFailException``. A move published already (a DAG run again) skips the task, and so the
    publish task after it.
    """

    template_fields: Sequence[str] = (
        *MOVE_TEMPLATE_FIELDS,
        "not_null",
        "unique",
        "no_rows_where",
        "min_rows",
        "max_rows",
        "scope",
    )
    ui_color = "#fcf3cf"

    def __init__(
        self,
        *,
        source: str,
        target: str,
        move_id: str,
        branch: str,
        not_null: Sequence[str] | str = (),
        unique: Sequence[str | Sequence[str]] | str = (),
        no_rows_where: str | None = None,
        min_rows: int | str | None = None,
        max_rows: int | str | None = None,
        checks: Sequence[Callable[..., int]] | Mapping[str, Callable[..., int]] = (),
        scope: str = "move",
        sample_size: int = 5,
        **kwargs: Any,
    ) -> None:
        super().__init__(source=source, target=target, move_id=move_id, branch=branch, **kwargs)
        if scope not in SCOPES and "{{" not in str(scope):
            raise ValueError(f"scope={scope!r} is not an audit scope; use one of {', '.join(SCOPES)}.")
        self.not_null = not_null
        self.unique = unique
        self.no_rows_where = no_rows_where
        self.min_rows = min_rows
        self.max_rows = max_rows
        self.checks = checks
        self.scope = scope
        self.sample_size = sample_size

    def _execute(self, context: Context) -> dict[str, Any]:
        from iceberg_ops_provider.errors import MoveStateError

        mover = self._branch_mover()
        self.log.info("Auditing move %s on branch %s of %s", mover.move_id, mover.branch, self.target)
        try:
            report = mover.audit(
                not_null=_names(self.not_null, "not_null"),
                unique=[tuple(key) if isinstance(key, list) else key for key in _names(self.unique, "unique")],
                no_rows_where=_text(self.no_rows_where),
                min_rows=optional_int(self.min_rows, "min_rows", "a number of rows"),
                max_rows=optional_int(self.max_rows, "max_rows", "a number of rows"),
                checks=self.checks,
                scope=str(self.scope),
                sample_size=self.sample_size,
            )
        except MoveStateError as exc:
            if exc.reason != "published":
                raise
            raise AirflowSkipException(
                f"Move {mover.move_id!r} was published to main already and its branch {mover.branch!r} removed: "
                "nothing to audit (the publish task after this one is skipped too)."
            ) from exc
        self.collect_lineage(lambda: self._record_target(mover, report.snapshot_id, written=False))
        payload = report.to_json()
        if report.ok:
            self.log.info("%s", _describe(report))
            return payload
        self.log.error("%s", _describe(report))
        if "ti" in context:
            context["ti"].xcom_push(key="report", value=payload)
        failed = ", ".join(f"{check.name} ({check.failed_rows} rows)" for check in report.failed)
        raise AirflowFailException(
            f"The audit of move {report.move_id!r} on branch {report.branch!r} of {report.table} failed: {failed}. "
            "main is untouched and the branch kept: the report (with sample rows) is in this task's log and in "
            "XCom under 'report'. Fix the data and audit again, or discard the branch."
        )


class IcebergPublishOperator(_BranchOperator):
    """Make a move's audited branch ``main``'s in one commit, then remove the branch; safe to retry.

    A second publish (a retry after the commit, a rerun of the task) finds the move published and
    commits nothing. A refusal (not audited, the branch moved after the audit, ``main`` changed in a way
    the rows cannot be added to) changes nothing and fails the task without retrying.

    Args:
        source, target, source_conn_id, target_conn_id, where, columns, rename, mode: As the move ran.
        move_id: The move's id (templated), e.g. ``move.output["move_id"]``.
        branch: The move's branch (templated).

    Returns (XCom): the ``Published`` JSON: ``how`` (``fast_forward``, ``append`` or
    ``already_published``), ``snapshot_id`` (the audited snapshot; null for ``already_published`` once the
    branch is gone), ``main_before``, ``main_after``,
    ``files`` (appended; 0 for a fast-forward).
    """

    ui_color = "#d5f5e3"

    def _execute(self, context: Context) -> dict[str, Any]:
        mover = self._branch_mover()
        published = mover.publish()
        self.log.info(
            "Move %s, branch %s of %s: %s",
            published.move_id,
            published.branch,
            published.table,
            {
                "fast_forward": f"main fast-forwarded from {published.main_before} to {published.main_after}",
                "append": f"{published.files} file(s) appended to main ({published.main_before} -> "
                f"{published.main_after})",
            }.get(published.how, "published already; nothing committed"),
        )
        if published.how != "already_published":
            self.collect_lineage(lambda: self._record_target(mover, published.main_after, written=True))
            self.publish_asset_extras(
                context,
                {"target": self.target, "move_id": published.move_id, "snapshot_id": published.main_after},
                {"move_id": published.move_id, "published": published.how},
            )
        return published.to_json()


class IcebergDiscardOperator(_BranchOperator):
    """Remove a move's branch and its records, leaving ``main`` untouched; safe to retry.

    For a DAG that gives up on a backfill (e.g. ``trigger_rule="all_failed"`` after the audit, once the
    report was looked at): the data files only the branch referenced go with snapshot expiry and
    orphan-file removal. A branch gone already (discarded or published) is nothing to do. Running the
    move again afterwards starts it anew on a new branch.

    Args:
        source, target, source_conn_id, target_conn_id, where, columns, rename, mode: As the move ran.
        move_id: The move's id (templated), e.g. ``move.output["move_id"]``.
        branch: The move's branch (templated).

    Returns (XCom): the ``Discarded`` JSON: ``dropped`` (whether a branch was removed), ``snapshot_id``
    (its head when removed).
    """

    ui_color = "#f5b7b1"

    def _execute(self, context: Context) -> dict[str, Any]:
        mover = self._branch_mover()
        discarded = mover.discard()
        if discarded.dropped:
            self.log.info(
                "Move %s: branch %s of %s removed at snapshot %s; main untouched",
                discarded.move_id,
                discarded.branch,
                discarded.table,
                discarded.snapshot_id,
            )
        else:
            self.log.info(
                "Move %s: %s has no branch %s of this move (discarded or published already); nothing to do",
                discarded.move_id,
                discarded.table,
                discarded.branch,
            )
        return discarded.to_json()
