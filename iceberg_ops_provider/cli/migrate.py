"""The migration commands (``init``, ``revision``, ``upgrade``, ...): each opens the runner, calls one verb, prints."""

from __future__ import annotations

import difflib
import json
import re
import socket
import sys
from pathlib import Path
from typing import Any

import click

from iceberg_ops_provider.cli.errors import EXIT_IRREVERSIBLE, handles_errors, unknown_option
from iceberg_ops_provider.cli.settings import Settings
from iceberg_ops_provider.cli.shared import json_option, text_table
from iceberg_ops_provider.errors import ConfirmationRequiredError

__all__ = [
    "COMMANDS",
    "check",
    "current",
    "downgrade",
    "history",
    "init",
    "plan",
    "repair",
    "revision",
    "stamp",
    "status",
    "unlock",
    "upgrade",
]

# Lets a relative target such as ``-1`` parse as the TARGET argument instead of an unknown option.
_TARGET_ARGUMENT = {"ignore_unknown_options": True}
_RELATIVE = re.compile(r"^[+-][0-9]+$")


def _target(ctx: click.Context, param: click.Parameter, value: str | None) -> str | None:
    """TARGET as given, unless it is an option (``--dry-run``): then the usage error of an unknown option."""
    if value is not None and value.startswith("-") and not _RELATIVE.match(value):
        option = value.split("=", 1)[0]
        own = [opt for param in ctx.command.params for opt in param.opts if opt.startswith("-")]
        raise unknown_option(ctx, option, difflib.get_close_matches(option, own))
    return value


@click.command()
@json_option
@click.argument("directory", required=False, type=click.Path(file_okay=False, path_type=Path))
@click.pass_obj
@handles_errors
def init(settings: Settings, directory: Path | None) -> None:
    """Create iceberg-ops.yaml, migrations/ and models/ (refuses to overwrite)."""
    from iceberg_ops_provider.autogen.scaffolding import init_project

    target = directory or (settings.config_path.parent if settings.config_path else Path.cwd())
    created = init_project(target, namespace=settings.namespace or "default")
    settings.emit({"created": [str(p) for p in created]}, "\n".join(f"created {p}" for p in created))


@click.command()
@json_option
@click.option("-m", "--message", required=True, help="What the migration does.")
@click.option("--autogenerate", is_flag=True, help="Write the operations that make live tables match models/.")
@click.option("--target-table", help="With --autogenerate: only this table's model.")
@click.pass_obj
@handles_errors
def revision(settings: Settings, message: str, autogenerate: bool, target_table: str | None) -> None:
    """Write the next NNNN_slug.py migration."""
    from iceberg_ops_provider.runner.commands import revision as write_revision

    result = write_revision(
        settings.migration_config("project"), message, autogenerate_from_models=autogenerate, target_table=target_table
    )
    if result.path is None:
        settings.emit(result.to_json(), "No changes between the models and the live tables; nothing written.")
        return
    lines = [f"wrote {result.path}"] + [f"  [{op.risk}] {op.describe()}" for op in result.operations]
    lines += [
        f"note: the model of {new} creates a new table; {live} exists and has no model. If the model means "
        f"{live}, name it {live} and run revision again (delete {result.path.name} first)."
        for new, live in result.close_tables.items()
    ]
    settings.emit(result.to_json(), "\n".join(lines))


def _results(settings: Settings, results: list[Any], verb: str, nothing: str = "") -> None:
    rows = [
        (r.version, r.description, r.status, f"{r.duration:.2f}s", _commit_column(r.atomic, r.direction))
        for r in results
    ]
    table = text_table(["version", "description", "status", "duration", "commit"], rows)
    human = table or nothing or f"Nothing to {verb}."
    settings.emit([r.to_json() for r in results], human)


def _commit_column(atomic: bool, direction: str) -> str:
    """How a migration was committed, in the words of ``status`` and ``plan``; nothing for a stamp."""
    from iceberg_ops_provider.runner.plan_document import COMMIT_MODES

    if direction == "stamp":
        return ""
    return COMMIT_MODES["atomic" if atomic else "per-table"]


_NO_ATOMIC_HELP = (
    "Commit each migration table by table (with intent and receipts), even where the catalog can commit its "
    "table changes and its history record all or nothing."
)


@click.command(context_settings=_TARGET_ARGUMENT)
@json_option
@click.argument("target", default="head", callback=_target)
@click.option("--allow-changed", is_flag=True, help="Run even if applied migration files changed.")
@click.option("--allow-missing", is_flag=True, help="Run even if applied migration files are missing.")
@click.option("--allow-out-of-order", is_flag=True, help="Apply pending files numbered below the current version.")
@click.option("--no-atomic", is_flag=True, help=_NO_ATOMIC_HELP)
@click.pass_obj
@handles_errors
def upgrade(
    settings: Settings,
    target: str,
    allow_changed: bool,
    allow_missing: bool,
    allow_out_of_order: bool,
    no_atomic: bool,
) -> None:
    """Apply pending migrations up to TARGET (head, a version, +N)."""
    runner = settings.runner(progress=True, atomic=not no_atomic)
    results = runner.upgrade(
        target, allow_changed=allow_changed, allow_missing=allow_missing, allow_out_of_order=allow_out_of_order
    )
    _results(settings, results, "apply")


@click.command(context_settings=_TARGET_ARGUMENT)
@json_option
@click.argument("target", callback=_target)
@click.option("--allow-changed", is_flag=True, help="Roll back even if the migration files changed.")
@click.option("--yes", is_flag=True, help="Roll back even when it drops tables or columns holding data.")
@click.option("--no-atomic", is_flag=True, help=_NO_ATOMIC_HELP)
@click.pass_obj
@handles_errors
def downgrade(settings: Settings, target: str, allow_changed: bool, yes: bool, no_atomic: bool) -> None:
    """Roll back migrations down to TARGET (base, a version that stays applied, -N)."""
    runner = settings.runner(known=True, progress=True, atomic=not no_atomic)
    from iceberg_ops_provider.runner.commands import refuse_data_loss

    try:
        refuse_data_loss(runner, target, allow_destructive=yes)
    except ConfirmationRequiredError as refused:
        if not sys.stdin.isatty():
            raise
        click.confirm(f"This rollback loses data ({'; '.join(refused.losses)}). Go ahead?", abort=True, err=True)
    _results(settings, runner.downgrade(target, allow_changed=allow_changed), "roll back")


@click.command(context_settings=_TARGET_ARGUMENT)
@json_option
@click.argument("version", callback=_target)
@click.pass_obj
@handles_errors
def stamp(settings: Settings, version: str) -> None:
    """Record the namespace as migrated to VERSION (head, base, a version) without running anything."""
    runner = settings.runner()
    results = runner.stamp(version)
    nothing = f"The namespace is already at {runner.current() or 'base'}: no version to record." if not results else ""
    _results(settings, results, "stamp", nothing)


@click.command(context_settings=_TARGET_ARGUMENT)
@json_option
@click.argument("target", default="head", callback=_target)
@click.option("--direction", type=click.Choice(["upgrade", "downgrade"]), help="Default: inferred from TARGET.")
@click.pass_obj
@handles_errors
def plan(settings: Settings, target: str, direction: str | None) -> None:
    """Show the steps a run to TARGET would take; changes nothing.

    Exit 1: a step's dry run raised (it would fail); exit 3: the rollback reaches an irreversible one.
    """
    from iceberg_ops_provider.migration.data_run import operation_line
    from iceberg_ops_provider.runner.plan_document import plan_document

    runner = settings.runner(access="read")
    steps = runner.plan(target, direction, inspect=True)  # type: ignore[arg-type]
    lines = []
    for step in steps:
        lines.append(f"{step.direction} {step.version} {step.description}  [{step.risk}]")
        lines += [f"    {operation_line(op)}" for op in step.operations]
    stop = next((index for index, step in enumerate(steps) if step.risk == "irreversible"), None)
    if stop is not None:
        blocked, before = steps[stop], [step.version for step in steps[:stop]]
        done = f"it would roll back {', '.join(before)} first, then stop" if before else "nothing would be rolled back"
        lines.append(
            f"irreversible: a downgrade to {target} stops at {blocked.version} ({blocked.description}), which "
            f"cannot be rolled back: {done}; {blocked.version} and the versions below it stay applied."
        )
    failed = [step for step in steps if step.risk == "failed"]
    if failed:
        lines.append(
            f"failed: a dry run of {', '.join(step.version for step in failed)} raised (above), so a run would fail "
            "there too; fix the file and plan again."
        )
    if settings.as_json:
        click.echo(json.dumps(plan_document(runner, steps, target), indent=2, sort_keys=True, default=str))
    else:
        click.echo("\n".join(lines) or "Nothing to do.")
    if failed:
        sys.exit(1)
    if stop is not None:
        sys.exit(EXIT_IRREVERSIBLE)


@click.command()
@json_option
@click.pass_obj
@handles_errors
def status(settings: Settings) -> None:
    """Show the current version, pending migrations, anything odd, the lock, and how migrations commit."""
    from iceberg_ops_provider.runner.commands import namespace_known
    from iceberg_ops_provider.runner.plan_document import COMMIT_MODES

    runner = settings.runner(files="optional", access="read")
    state = runner.status()
    lines = [
        f"namespace: {state.namespace}",
        f"current:   {state.current or 'base'}",
        f"commits:   {COMMIT_MODES[state.commit_mode]} ({state.commit_mode_reason})",
    ]
    if not state.files_compared:
        lines.append(
            "files:     not compared (no project file and no --migrations-dir): what is pending, changed or "
            "missing is not known; this is what the history says"
        )
    if not state.applied and not namespace_known(runner):
        lines.append(f"note:      namespace {state.namespace!r} does not exist yet; `iceberg-ops upgrade` creates it")
    if state.lock:
        stale = state.lock.stale_reason()
        lease = (
            f"stale ({stale}): the next run takes it over"
            if stale
            else f"lease until {state.lock.expires_at().isoformat()}"
        )
        lines.append(f"lock:      held by {state.lock.describe()}, {lease}")
    if state.interrupted:
        from iceberg_ops_provider.runner.commands import interrupted_problem

        lines.append(f"interrupted: {interrupted_problem(state.interrupted, state.interrupted_outcome or '')}")
    if state.files_compared:
        broken = {int(file.version) for file in state.broken if file.version is not None}
        pending = [(s.version, s.description, _pending_note(s.version, state.errors, broken)) for s in state.pending]
        lines.append(f"pending:   {len(pending)}")
        if pending:
            lines.append(text_table(["version", "description", "note"], pending))
    else:
        lines.append("pending:   not known (files not compared; pass --migrations-dir DIR)")
        lines += [f"failed:    {version}: its last attempt failed: {error}" for version, error in state.errors.items()]
    for label, versions in (
        ("changed", state.changed),
        ("missing", state.missing),
        ("out of order", state.out_of_order),
    ):
        if versions:
            lines.append(f"{label}: {', '.join(versions)}")
    lines += [f"broken:    {file.describe()}" for file in state.broken]
    # The words of `plan --json`'s commit_mode; the Python API and the operators keep the engine's labels.
    settings.emit({**state.to_json(), "commit_mode": COMMIT_MODES[state.commit_mode]}, "\n".join(lines))


def _pending_note(version: str, errors: dict[str, str], broken: set[int]) -> str:
    notes = [f"failed: {errors[version]}"] if version in errors else []
    if int(version) in broken:
        notes.append("broken: its file cannot be loaded (below)")
    return "; ".join(notes)


@click.command()
@json_option
@click.option(
    "--events",
    "show_events",
    is_flag=True,
    help="Show the audit trail: every apply, rollback, stamp, failure, lock takeover, recovery, repair, unlock.",
)
@click.pass_obj
@handles_errors
def history(settings: Settings, show_events: bool) -> None:
    """Show the namespace's migration history, oldest first."""
    runner = settings.runner(files="optional", access="read")
    if show_events:
        events = runner.events()
        lines = [
            (e.at.strftime("%Y-%m-%d %H:%M:%S"), e.event, e.version or "", e.executed_by or "", e.message)
            for e in events
        ]
        human = text_table(["at", "event", "version", "by", "message"], lines) or "No events."
        settings.emit([event.to_json() for event in events], human)
        return
    rows = runner.history()
    table = [
        (r.version, r.status, r.operation, r.applied_at.strftime("%Y-%m-%d %H:%M:%S"), r.executed_by, r.description)
        for r in rows
    ]
    if table:
        human = text_table(["version", "status", "operation", "applied_at", "by", "description"], table)
        human += "".join(f"\n{r.version} failed: {r.error}" for r in rows if r.status == "failed" and r.error)
    elif runner.files_compared:
        human = f"No history yet: base, {len(runner.state(report_broken=True).pending)} pending."
    else:
        human = "No history yet: base (files not compared; pass --migrations-dir DIR to count the pending migrations)."
    settings.emit([r.to_json() for r in rows], human)


@click.command()
@json_option
@click.pass_obj
@handles_errors
def current(settings: Settings) -> None:
    """Print the current version (base when nothing is applied)."""
    runner = settings.runner(files="none", access="read")
    version = runner.current()
    settings.emit({"current": version}, version or "base")


@click.command()
@json_option
@click.option("--no-lint", is_flag=True, help="Do not lint the pending migrations.")
@click.pass_obj
@handles_errors
def check(settings: Settings, no_lint: bool) -> None:
    """CI gate: exit 0 when nothing is pending and every model matches its table, else 1.

    The pending migrations are also linted (see `iceberg-ops lint`); a finding not allowed is listed
    and fails the check too. --no-lint skips that.
    """
    from iceberg_ops_provider.runner.commands import check_namespace

    runner = settings.runner(access="read")
    config = settings.config()
    with_models = config.path is not None and config.models_dir.is_dir()
    report = check_namespace(runner, config.models_dir if with_models else None, lint=not no_lint)
    lines = [f"{report.namespace}: " + ("up to date" if report.ok else "NOT up to date")]
    lines += [f"  pending {s.version} {s.description}" for s in report.pending]
    for f in report.failed_findings:
        lines += [f"  lint {f.path}:{f.line}: [{f.rule}] ({f.severity}) {f.message}", f"      fix: {f.fix}"]
    lines += [f"  drift [{op.risk}] {op.describe()}" for op in report.drift]
    lines += [f"  problem: {p}" for p in report.problems]
    if config.path is None:
        lines.append("  note: models not compared (no project file names a models folder)")
    passing = [f for f in report.findings if not f.fails]
    if passing:
        lines.append("not failing the check:")
        lines += [
            f"  {f'allowed ({f.allowed})' if f.allowed else f.severity}: {f.path}:{f.line}: [{f.rule}] {f.message}"
            for f in passing
        ]

    settings.emit(report.to_json(), "\n".join(lines))
    if not report.ok:
        sys.exit(1)


@click.command()
@json_option
@click.option("--yes", is_flag=True, help="Apply without asking.")
@click.pass_obj
@handles_errors
def repair(settings: Settings, yes: bool) -> None:
    """Re-record checksums of changed applied files and clear failed attempts (shows what first)."""
    runner = settings.runner(known=True, progress=True, access="write")
    planned = runner.repair(dry_run=True)
    if not planned.changes:
        settings.emit(planned.to_json(), "Nothing to repair.")
        return
    click.echo(f"repair: {planned.describe()}", err=True)
    if not yes:
        if not sys.stdin.isatty():
            raise ConfirmationRequiredError(
                f"repair changes the history ({planned.describe()}); nothing was changed. Run it again with --yes."
            )
        click.confirm("Apply?", abort=True, err=True)
    done = runner.repair()
    settings.emit(done.to_json(), f"repaired: {done.describe()}")


@click.command()
@json_option
@click.pass_obj
@handles_errors
def unlock(settings: Settings) -> None:
    """Release the namespace's migration lock after a crashed run."""
    runner = settings.runner(known=True, files="none", access="write")
    holder = runner.force_unlock()
    human = f"released the lock held by {holder.describe()}" if holder else "The namespace was not locked."
    if holder is not None and holder.stale_reason() is None:
        # Releasing a live run's lock is allowed (a person decided), but say what follows.
        click.echo(
            f"warning: that run did not look dead (its lease runs until {holder.expires_at().isoformat()}"
            f"{', and its process still runs on this host' if holder.host == socket.gethostname() else ''}): it "
            "stops with LockLostError when it next checks the lock (before its next commit, or at its next lease "
            "renewal).",
            err=True,
        )
    settings.emit({"released": holder.to_json() if holder else None}, human)


COMMANDS: tuple[click.Command, ...] = (
    init,
    revision,
    upgrade,
    downgrade,
    stamp,
    plan,
    status,
    history,
    current,
    check,
    repair,
    unlock,
)
"""The migration commands, in the order ``iceberg-ops`` registers them."""
