"""One function per command that needs more than a runner call: ``check`` and ``revision``.

The CLI and the Airflow operators are fronts over these and over :class:`MigrationRunner`; nothing
here prints or parses arguments.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from iceberg_ops_provider.autogen import autogenerate, load_model, load_models, render_migration
from iceberg_ops_provider.autogen.operations import Operation
from iceberg_ops_provider.autogen.scaffolding import create_revision
from iceberg_ops_provider.catalogs import Access, empty_catalog
from iceberg_ops_provider.config import ProjectConfig
from iceberg_ops_provider.core.name_hints import closest, did_you_mean, existing_namespaces, listed
from iceberg_ops_provider.errors import (
    CatalogNotFoundError,
    ConfirmationRequiredError,
    MigrationError,
    ModelError,
    ProjectConfigError,
)
from iceberg_ops_provider.history.intent import Intent
from iceberg_ops_provider.lint import Finding, lint_paths
from iceberg_ops_provider.messages import Arg, Hint
from iceberg_ops_provider.messages import message as fact_message
from iceberg_ops_provider.migration.discovery import BrokenFile, migrations_folder
from iceberg_ops_provider.runner.migration_runner import MigrationRunner
from iceberg_ops_provider.runner.planning import PlanStep

if TYPE_CHECKING:
    from pyiceberg.catalog import Catalog

__all__ = [
    "CheckReport",
    "RevisionResult",
    "check",
    "data_loss",
    "open_runner",
    "refuse_data_loss",
    "require_known_namespace",
    "revision",
]

_REVISION = {"table": Arg("target_table"), "autogenerate": Arg("autogenerate_from_models", True)}
"""The arguments of :func:`revision` its refusals name."""


def open_runner(
    config: ProjectConfig,
    on_event: Callable[[str], None] | None = None,
    *,
    stale_after: float | None = None,
    files: bool = True,
    access: Access = "create",
    catalog: Catalog | None = None,
) -> MigrationRunner:
    """A runner for the project's catalog, namespace and migrations folder.

    Args:
        config: The project.
        on_event: Progress callback.
        stale_after: Lease length of the migration lock (default: the runner's).
        files: ``False``: a runner without migration files, which reads the history only.
        access: What the verb does with the catalog (:func:`~iceberg_ops_provider.catalogs.open_catalog`).
        catalog: The catalog to run on instead of the project's (which is then not opened).
    """
    namespace = config.require_namespace()  # before opening the catalog, which may create local_data/
    return MigrationRunner(
        catalog if catalog is not None else config.open_catalog(access=access),
        namespace,
        config.migrations_dir if files else None,
        config.meta_namespace,
        on_event=on_event,
        **({"stale_after": stale_after} if stale_after is not None else {}),
    )


def namespace_known(runner: MigrationRunner) -> bool:
    """Whether the namespace exists in the catalog, or a first run that crashed left its lock table."""
    namespace = tuple(runner.namespace.split("."))
    if runner.catalog.namespace_exists(namespace) or runner.catalog.table_exists(runner.lock.identifier):
        return True
    # "Does not exist" may mean the whole catalog is not there (an S3 Tables table bucket that does not
    # exist answers like an empty one): listing the root tells the two apart.
    try:
        runner.catalog.list_namespaces()
    except Exception as exc:
        from iceberg_ops_provider.catalogs.failures import missing_warehouse

        error = missing_warehouse(exc, runner.catalog_spec, listing_root=True)
        if error is not None:
            raise error from exc
        raise
    return False


def require_known_namespace(runner: MigrationRunner) -> None:
    """Refuse a namespace that neither exists in the catalog nor has history (most likely a typo).

    Raises:
        ProjectConfigError: Names the namespace and the namespaces that do exist.
    """
    if namespace_known(runner) or runner.history():
        return
    existing = existing_namespaces(runner.catalog, hidden={runner.meta_namespace})
    raise ProjectConfigError(
        fact_message(
            f"Namespace {runner.namespace!r} does not exist in the catalog and has no migration history. Check "
            f"{{namespace}} (existing: {listed(existing)}).{did_you_mean(closest(runner.namespace, existing))} "
            "{create}.",
            namespace=Arg("namespace"),
            create=Hint("new_namespace", "An upgrade creates a new one"),
        )
    )


@dataclass(frozen=True)
class CheckReport:
    """What ``check`` found.

    Attributes:
        drift: Operations that would make the live tables match their models.
        problems: Changed or missing applied files, files that cannot be loaded, an interrupted run.
        broken: The files that cannot be loaded (each also one of ``problems``).
        findings: The lint findings of the pending migrations, allowed ones included.
    """

    namespace: str
    pending: list[PlanStep] = field(default_factory=list)
    drift: list[Operation] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)
    broken: list[BrokenFile] = field(default_factory=list)
    findings: list[Finding] = field(default_factory=list)

    @property
    def failed_findings(self) -> list[Finding]:
        """The lint findings that are neither allowed nor informational."""
        return [finding for finding in self.findings if finding.fails]

    @property
    def ok(self) -> bool:
        """Nothing pending, nothing drifted, nothing odd, no finding left unallowed."""
        return not (self.pending or self.drift or self.problems or self.failed_findings)

    def to_json(self) -> dict[str, Any]:
        """JSON-able form."""
        return {
            "namespace": self.namespace,
            "ok": self.ok,
            "pending": [step.to_json() for step in self.pending],
            "drift": [op.to_json() for op in self.drift],
            "problems": self.problems,
            "broken": [file.to_json() for file in self.broken],
            "findings": [finding.to_json() for finding in self.findings],
        }


def check(config: ProjectConfig) -> CheckReport:
    """Compare files, history and models with the catalog; change nothing.

    Models are compared only when the models folder exists.
    """
    runner = open_runner(config, access="read")
    return check_namespace(runner, config.models_dir if config.models_dir.is_dir() else None)


def check_namespace(runner: MigrationRunner, models_dir: Path | None = None, *, lint: bool = True) -> CheckReport:
    """The one ``check``, behind the CLI and the operator; changes nothing (drift only with ``models_dir``)."""
    state = runner.state(report_broken=True)
    pending = [PlanStep("upgrade", v, state.description(v)) for v in state.pending]
    paths = [script.path for v in state.pending if (script := state.script(v)) is not None]
    findings = (
        list(lint_paths(paths, catalog=runner.catalog, namespace=runner.namespace).findings) if lint and paths else []
    )
    drift: list[Operation] = []
    if models_dir is not None:
        drift = autogenerate(runner.catalog, runner.namespace, load_models(models_dir))
    problems = state.problems_by_kind()
    found = problems["changed"] + problems["missing"] + [file.describe() for file in state.broken]
    if (interrupted := runner.interrupted()) is not None:
        found.append(interrupted_problem(interrupted, runner.interrupted_outcome(interrupted)))
    return CheckReport(runner.namespace, pending, drift, found, list(state.broken), findings)


def interrupted_problem(intent: Intent, outcome: str) -> str:
    """The line ``check`` and ``status`` report for a run that stopped mid-migration."""
    stopped = f"run {intent.run_id} ({intent.executed_by}) stopped during the {intent.direction} of {intent.version}"
    if outcome == "partial":
        return (
            f"{stopped} after committing part of it; nothing runs until a person finishes or undoes it and "
            f"records the outcome with `iceberg-ops stamp`"
        )
    return f"{stopped}; the next run settles it by itself"


@dataclass(frozen=True)
class RevisionResult:
    """What ``revision`` wrote: the file (``None`` when autogenerate found nothing) and its operations.

    ``close_tables`` maps each model that creates a new table to the live table without a model whose
    name is close to it (``userz`` -> ``users``): perhaps a misspelt name, which would create a second table.
    """

    path: Path | None
    operations: list[Operation] = field(default_factory=list)
    close_tables: dict[str, str] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        """JSON-able form."""
        return {
            "path": str(self.path) if self.path else None,
            "operations": [op.to_json() for op in self.operations],
            "close_tables": self.close_tables,
        }


def revision(
    config: ProjectConfig, message: str, *, autogenerate_from_models: bool = False, target_table: str | None = None
) -> RevisionResult:
    """Write the next migration file: a skeleton, or the operations that close the models' drift.

    Args:
        config: The project.
        message: The revision message.
        autogenerate_from_models: Diff the models with the live tables and write those operations.
        target_table: With autogenerate, only this table's model (a bare name, kept bare in the file).

    Raises:
        MigrationError: Autogenerate while migrations are pending (the diff would repeat them).
        ModelError: A bad model, or no model for ``target_table``.
        ForbiddenPromotionError: A model asks for a type change Iceberg forbids.
    """
    # Write where the runner reads: migrations_dir/<namespace>/ when that folder exists.
    folder = migrations_folder(config.migrations_dir, config.namespace) if config.namespace else config.migrations_dir
    if not autogenerate_from_models:
        if target_table:
            raise ModelError(
                fact_message("{table} only applies with {autogenerate}.", about="target_table", **_REVISION)
            )
        return RevisionResult(create_revision(folder, message))
    try:
        runner = open_runner(config, access="read")
    except CatalogNotFoundError:  # no catalog yet: every model is a table to create
        runner = open_runner(config, access="read", catalog=empty_catalog())
    pending = runner.status().pending
    if pending:
        raise MigrationError(
            f"Namespace {runner.namespace!r} has {len(pending)} pending migration(s) ({pending[0].version} first); "
            "upgrade first, so the comparison does not repeat their changes."
        )
    if target_table:
        if "." in target_table:
            raise ModelError(
                fact_message(
                    f"{{table}} takes a bare table name (it lives in the namespace), got {target_table!r}.",
                    **_REVISION,
                )
            )
        candidates = [config.models_dir / f"{target_table}.yaml", config.models_dir / f"{target_table}.yml"]
        found = next((path for path in candidates if path.is_file()), None)
        every = [] if found else load_models(config.models_dir)
        models = [load_model(found)] if found else [m for m in every if m.name == target_table]
        if not models:
            raise ModelError(_no_model(target_table, config.models_dir, [m.name for m in every]))
    else:
        models = load_models(config.models_dir)
        if not models:
            raise ModelError(
                fact_message(
                    f"No table models in {config.models_dir}: autogenerate compares models/*.yaml with the live "
                    "tables, so declare a table first (models/_example.yaml shows the format), or write the "
                    "migration by hand (a revision without {autogenerate}).",
                    **_REVISION,
                )
            )
    operations = autogenerate(runner.catalog, runner.namespace, models)
    if not operations:
        return RevisionResult(None, [])
    sources = ", ".join(_display(m.source, config.root) if m.source else m.name for m in models)
    text = render_migration(message, operations, source=sources)
    close = _close_tables(runner, config, models)
    return RevisionResult(create_revision(folder, message, content=text), operations, close)


def _close_tables(runner: MigrationRunner, config: ProjectConfig, models: list[Any]) -> dict[str, str]:
    """Each model of a table that does not exist, and the closest live table that has no model."""
    if not runner.catalog.namespace_exists(runner.namespace):
        return {}
    live = {identifier[-1] for identifier in runner.catalog.list_tables(runner.namespace)}
    unmodelled = live - {model.name for model in load_models(config.models_dir)}
    new = [model.name for model in models if model.name not in live and not model.dropped]
    found = {name: closest(name, unmodelled) for name in new}
    return {name: guess for name, guess in found.items() if guess is not None and not guess.startswith("_")}


def _no_model(table: str, folder: Path, names: list[str]) -> str:
    """Why ``target_table`` found no model: the models there are, and the closest name to ``table``."""
    if not names:
        return f"No model for table {table!r} in {folder}: it declares no tables."
    guess = did_you_mean(closest(table, names))
    return f"No model for table {table!r} in {folder} (its models: {listed(names)}).{guess}"


def _display(path: Path, root: Path) -> str:
    try:
        return str(path.resolve().relative_to(root))
    except ValueError:
        return str(path)


def data_loss(runner: MigrationRunner, target: str) -> list[str]:
    """What a rollback to ``target`` would lose: its ``destructive`` operations, from a dry run of each step.

    :func:`refuse_data_loss` refuses such a rollback unless the caller allows it.
    """
    return [
        f"{step.version}: {operation['operation']}"
        for step in runner.plan(target, "downgrade", inspect=True)
        for operation in step.operations
        if operation["risk"] == "destructive"
    ]


def refuse_data_loss(runner: MigrationRunner, target: str, *, allow_destructive: bool = False) -> None:
    """Refuse a rollback to ``target`` that loses data (:func:`data_loss`), unless ``allow_destructive``.

    Raises:
        ConfirmationRequiredError: With the losses; nothing was rolled back.
    """
    if allow_destructive:
        return
    losses = data_loss(runner, target)
    if losses:
        raise ConfirmationRequiredError(
            fact_message(
                f"The rollback of {runner.namespace!r} to {target} loses data ({'; '.join(losses)}); nothing was "
                "rolled back. To go ahead, run it again with {allow}.",
                allow=Arg("allow_destructive", True),
            ),
            losses=losses,
            parameter="allow_destructive",
        )
