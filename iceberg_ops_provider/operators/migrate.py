"""IcebergMigrateOperator: migrate a namespace as a retryable, observable Airflow task."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from airflow.sdk import BaseOperator

from iceberg_ops_provider.history.lock import DEFAULT_STALE_AFTER
from iceberg_ops_provider.hooks.catalog import IcebergCatalogHook
from iceberg_ops_provider.hooks.version_compat import AirflowException, AirflowFailException
from iceberg_ops_provider.operators.lineage import IcebergLineageMixin, table_extra
from iceberg_ops_provider.operators.wording import operator_message

if TYPE_CHECKING:
    from airflow.sdk import Context

__all__ = ["ACTIONS", "IcebergMigrateOperator"]

ACTIONS: tuple[str, ...] = ("upgrade", "downgrade", "plan", "check", "unlock", "repair")
"""The operator's actions, each run by its method of the same name (``_upgrade``, ...)."""


class IcebergMigrateOperator(IcebergLineageMixin, BaseOperator):
    """Run the migrations of one namespace: ``upgrade``, ``downgrade``, ``plan`` or ``check``.

    Retries are safe: a retried task resumes where the failed attempt stopped and never applies a
    migration twice (see ``docs/recovery.md``). A lock held by another live run fails the task, for
    Airflow's retries to try again later. ``on_kill`` releases the lock and stops before the next commit.

    Args:
        namespace: The namespace to migrate (templated).
        migrations_dir: The folder of migration files, on the worker (templated).
        target: ``head``, ``base``, a version, ``+N`` or ``-N`` (templated).
        action: ``upgrade`` (default), ``downgrade``, ``plan`` (changes nothing), ``check`` (fails the
            task while migrations are pending or files disagree with history, so a DAG can gate loads
            on it), ``unlock`` (releases the namespace's lock whoever holds it, for a run known to be gone)
            or ``repair`` (re-records checksums of changed applied files and clears failed attempts).
        iceberg_conn_id: The Airflow connection of the catalog.
        meta_namespace: Where history and locks live: this, else the connection extra's ``meta_namespace``,
            else ``_iceberg_ops`` (``iceberg_ops`` on S3 Tables).
        allow_changed: Let ``upgrade``/``downgrade`` run although applied files changed.
        allow_missing: Let ``upgrade`` run although applied files are missing.
        allow_out_of_order: Let ``upgrade`` apply files numbered below the current version.
        stale_after: Lease length of the namespace lock in seconds (a lock not renewed is taken over).
        allow_destructive: Let ``downgrade`` drop tables or columns that hold rows.
        models_dir: With ``check``: a folder of table models whose drift fails the check too (templated).
        atomic_commits: Where the catalog can, commit each migration's table changes and its history
            record all or nothing (default); ``False`` commits table by table.

    Returns (XCom):
        ``{"namespace", "action", "target", "version_before", "version_after", "migrations": [...]}``
        where ``migrations`` lists what was applied or rolled back (or planned / pending).

    Lineage: every table an ``upgrade``/``downgrade`` touched is an OpenLineage output at its snapshot
    afterwards (see ``docs/lineage.md``).
    """

    template_fields: Sequence[str] = ("namespace", "migrations_dir", "target", "iceberg_conn_id", "models_dir")
    ui_color = "#cfe8fc"

    def __init__(
        self,
        *,
        namespace: str,
        migrations_dir: str,
        target: str = "head",
        action: str = "upgrade",
        iceberg_conn_id: str = IcebergCatalogHook.default_conn_name,
        meta_namespace: str | None = None,
        allow_changed: bool = False,
        allow_missing: bool = False,
        allow_out_of_order: bool = False,
        stale_after: float = DEFAULT_STALE_AFTER,
        models_dir: str | None = None,
        allow_destructive: bool = False,
        atomic_commits: bool = True,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        if action not in ACTIONS:
            raise ValueError(f"action must be one of {', '.join(ACTIONS)}, got {action!r}.")
        self.namespace = namespace
        self.migrations_dir = migrations_dir
        self.target = target
        self.action = action
        self.iceberg_conn_id = iceberg_conn_id
        self.meta_namespace = meta_namespace
        self.allow_changed = allow_changed
        self.allow_missing = allow_missing
        self.allow_out_of_order = allow_out_of_order
        self.stale_after = stale_after
        self.models_dir = models_dir
        self.allow_destructive = allow_destructive
        self.atomic_commits = atomic_commits
        self._runner: Any = None

    def execute(self, context: Context) -> dict[str, Any]:
        """Run the action and return a small JSON-able summary for XCom.

        Raises:
            AirflowFailException: A permanent error: retrying cannot help.
            IcebergOpsError: A transient one (the lock is held, a commit conflict): Airflow's retries apply.
        """
        from iceberg_ops_provider.errors import IcebergOpsError

        try:
            return self._execute(context)
        except IcebergOpsError as exc:
            if exc.transient:
                raise
            raise AirflowFailException(operator_message(exc)) from exc

    def _execute(self, context: Context) -> dict[str, Any]:
        from iceberg_ops_provider.runner.migration_runner import MigrationRunner

        self.record_lineage()
        hook = IcebergCatalogHook(iceberg_conn_id=self.iceberg_conn_id)
        # Each step is logged on the iceberg_ops_provider.runner.migration_runner logger, which reaches the task log.
        runner = MigrationRunner(
            self._catalog(hook),
            self.namespace,
            self.migrations_dir,
            self.meta_namespace or hook.meta_namespace(),
            stale_after=self.stale_after,
            lock_context=_task_identity(context),
            atomic_commits=self.atomic_commits,
        )
        self._runner = runner
        try:
            summary = self._run(runner)
        finally:
            if self.action in ("upgrade", "downgrade"):
                self.collect_lineage(lambda: self._record_touched(runner))
        self.publish_asset_extras(
            context,
            {
                "namespace": self.namespace,
                "action": self.action,
                "version_before": summary["version_before"],
                "version_after": summary["version_after"],
                "tables": [table_extra(table) for table in self.lineage_outputs],
            },
            {"namespace": self.namespace, "version": summary["version_after"]},
        )
        return summary

    def _record_touched(self, runner: Any) -> None:
        from iceberg_ops_provider.lineage import touched_lineage

        self.record_lineage(outputs=touched_lineage(runner.catalog, runner.touched))

    def _run(self, runner: Any) -> dict[str, Any]:
        before = runner.current()
        self.log.info(
            "Namespace %r is at %s; action %s to %s", self.namespace, before or "base", self.action, self.target
        )
        outcome: dict[str, Any] = getattr(self, f"_{self.action}")(runner)  # the fields it adds to the summary
        report = runner.last_run if self.action in ("upgrade", "downgrade") else None
        summary = {
            "namespace": self.namespace,
            "action": self.action,
            "target": self.target,
            # For a change, what the run saw under its lock (another run may have moved it in between).
            "version_before": report.version_before if report else before,
            "version_after": report.version_after if report else runner.current(),
            **outcome,
        }
        self.log.info("Namespace %r is now at %s", self.namespace, summary["version_after"] or "base")
        return summary

    def _refuse_data_loss(self, runner: Any) -> None:
        from iceberg_ops_provider.errors import ConfirmationRequiredError
        from iceberg_ops_provider.runner.commands import refuse_data_loss

        try:
            refuse_data_loss(runner, self.target, allow_destructive=self.allow_destructive)
        except ConfirmationRequiredError as refused:
            raise AirflowFailException(operator_message(refused)) from refused

    def on_kill(self) -> None:
        """Release the namespace's lock and stop the run before its next commit (task killed or timed out)."""
        if self._runner is not None:
            self.log.warning("Task killed: releasing the migration lock of %r", self.namespace)
            self._runner.stop()

    def _catalog(self, hook: IcebergCatalogHook) -> Any:
        """The catalog, created for the actions that change it; only read (empty if missing) for ``plan``, ``check``."""
        from iceberg_ops_provider.catalogs import empty_catalog
        from iceberg_ops_provider.errors import CatalogNotFoundError

        if self.action not in ("plan", "check"):
            return hook.catalog_for("create")
        try:
            return hook.catalog_for("read")
        except CatalogNotFoundError as exc:
            self.log.warning("%s Reading it as an empty catalog: every migration is pending.", exc)
            return empty_catalog()

    def _upgrade(self, runner: Any) -> dict[str, Any]:
        results = runner.upgrade(
            self.target,
            allow_changed=self.allow_changed,
            allow_missing=self.allow_missing,
            allow_out_of_order=self.allow_out_of_order,
        )
        return {"migrations": [result.to_json() for result in results]}

    def _downgrade(self, runner: Any) -> dict[str, Any]:
        self._refuse_data_loss(runner)
        results = runner.downgrade(self.target, allow_changed=self.allow_changed)
        return {"migrations": [result.to_json() for result in results]}

    def _plan(self, runner: Any) -> dict[str, Any]:
        from iceberg_ops_provider.migration.data_run import operation_line
        from iceberg_ops_provider.runner.plan_document import plan_document

        steps = runner.plan(self.target, inspect=True)
        migrations = [step.to_json() for step in steps]
        for step in migrations:
            self.log.info(
                "plan: %s %s %s [%s]", step["direction"], step["version"], step["description"], step.get("risk")
            )
            for operation in step.get("operations", ()):
                self.log.info("plan:     %s", operation_line(operation))
        failed = [step for step in steps if step.risk == "failed"]
        if failed:  # as `iceberg-ops plan` exits 1: a run would fail at the same step
            reasons = "; ".join(
                f"{step.version}: {op['operation']}"
                for step in failed
                for op in step.operations
                if op["risk"] == "failed"
            )
            raise AirflowException(
                f"The plan of {self.namespace!r} has steps whose dry run raised, so an upgrade would fail there "
                f"too: {reasons}. Fix the migration file, then run the task again."
            )
        # "plan" is the document of `iceberg-ops --json plan` (plan_format 1)
        return {"migrations": migrations, "plan": plan_document(runner, steps, self.target)}

    def _repair(self, runner: Any) -> dict[str, Any]:
        report = runner.repair()
        self.log.info("Repair of %r: %s", self.namespace, report.describe())
        return {"migrations": [report.to_json()]}

    def _unlock(self, runner: Any) -> dict[str, Any]:
        holder = runner.force_unlock()
        self.log.info("Lock of %r: %s", self.namespace, f"released ({holder.describe()})" if holder else "was free")
        return {"migrations": []}

    def _check(self, runner: Any) -> dict[str, Any]:
        from pathlib import Path

        from iceberg_ops_provider.runner.commands import check_namespace

        report = check_namespace(runner, Path(self.models_dir) if self.models_dir else None)
        if not report.ok:
            listed = "; ".join(
                [f"{step.version} {step.description} (pending)" for step in report.pending]
                + [f"{op.describe()} (drift)" for op in report.drift]
                + report.problems
                + [f"{f.path}:{f.line}: [{f.rule}] {f.message} (lint)" for f in report.failed_findings]
            )
            raise AirflowException(
                f"Namespace {self.namespace!r} is not up to date: {listed}. Run the migrate task (action='upgrade') "
                "first, or write a migration for the drift (iceberg-ops revision --autogenerate)."
            )
        self.log.info("Namespace %r is up to date at %s", self.namespace, runner.current() or "base")
        return {"migrations": []}


def _task_identity(context: Context) -> dict[str, str]:
    """Dag, run, task and try of the running task, stored with the lock so its holder is recognisable."""
    task_instance = context.get("ti") or context.get("task_instance")
    identity = {key: getattr(task_instance, key, None) for key in ("dag_id", "run_id", "task_id", "try_number")}
    return {key: str(value) for key, value in identity.items() if value is not None}
