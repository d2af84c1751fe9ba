"""``iceberg-ops move audit|publish|discard``: write-audit-publish of a move given ``--branch`` from the shell.

Each is one call of :class:`~iceberg_ops_provider.data_migration.DataMover` (``audit``, ``publish``,
``discard``) on the move the arguments identify, as ``move verify`` does; this module words the results
and the refusals, with the commands that act on them.
"""

from __future__ import annotations

import shlex
import sys
from typing import TYPE_CHECKING, Any

import click

from iceberg_ops_provider.cli.errors import exit_interrupted, handles_errors
from iceberg_ops_provider.cli.move import definition, mover_for
from iceberg_ops_provider.cli.shared import check_filter
from iceberg_ops_provider.errors import PublishRefusedError
from iceberg_ops_provider.messages import Message

if TYPE_CHECKING:
    from iceberg_ops_provider.cli.settings import Settings
    from iceberg_ops_provider.data_migration import AuditReport, Published

__all__ = ["audit_move", "discard_move", "publish_move"]

_AFTER_REFUSAL: dict[str, tuple[str, str]] = {
    "no_branch": ("To run the move on the branch", "run"),
    "incomplete": ("To finish the move", "run"),
    "not_audited": ("To audit it", "audit"),
    "audit_stale": ("To audit it", "audit"),
    "audit_scope": ("To audit the whole branch", "audit"),
    "branch_changed": ("To discard it", "discard"),
    "main_rewritten": ("To discard it", "discard"),
    "main_changed": ("To discard it", "discard"),
    "schema_changed": ("To discard it", "discard"),
    "spec_changed": ("To discard it", "discard"),
}
"""The command that acts on each :attr:`PublishRefusedError.reason` (the engine's message says what to do)."""


def _unique_keys(ctx: click.Context, param: click.Parameter, values: tuple[str, ...]) -> list[str | tuple[str, ...]]:
    """Each ``--unique``: a column, or columns separated by commas that together must be unique."""
    keys: list[str | tuple[str, ...]] = []
    for value in values:
        columns = tuple(name.strip() for name in value.split(","))
        if "" in columns:
            raise click.BadParameter(
                f"{value!r} has an empty column name: a column, or columns separated by single commas (customer,day)."
            )
        keys.append(columns[0] if len(columns) == 1 else columns)
    return keys


def _same_move(verb: str) -> str:
    """This command line with ``move VERB`` in place of its own verb, to paste as it is."""
    words = sys.argv[1:]
    own = click.get_current_context().info_name
    at = next((i for i, word in enumerate(words) if word == own and "move" in words[:i]), None)
    if at is not None:
        words = [*words[:at], verb, *words[at + 1 :]]
    return "iceberg-ops " + " ".join(shlex.quote(word) for word in _without_verb_options(words))


def _without_verb_options(words: list[str]) -> list[str]:
    """``words`` without the options only audit takes (publish and discard identify the move alone)."""
    kept: list[str] = []
    skip = False
    for word in words:
        if skip:
            skip = False
            continue
        name = word.split("=", 1)[0]
        if name in _AUDIT_OPTIONS:
            skip = "=" not in word
            continue
        if word in {"--json"}:
            continue
        kept.append(word)
    return kept


_AUDIT_OPTIONS = {"--not-null", "--unique", "--no-rows-where", "--min-rows", "--max-rows", "--scope", "--sample-size"}


def _describe_audit(report: AuditReport) -> str:
    """The audit report for a person: the verdict, then each check with a sample of its offending rows."""
    verdict = "passed" if report.ok else f"FAILED ({len(report.failed)} of {len(report.checks)} checks)"
    lines = [
        f"audit of move {report.move_id} on branch {report.branch} of {report.table}: {verdict}; "
        f"{report.rows:,} rows read (scope {report.scope}) at snapshot {report.snapshot_id}"
    ]
    for check in report.checks:
        if check.ok:
            lines.append(f"  ok      {check.name}")
            continue
        lines.append(f"  FAILED  {check.name}: {check.failed_rows:,} row(s)")
        lines.extend(f"          {row}" for row in check.sample)
    if not report.checks:
        lines.append("  (no checks given: the audit passes; pass --not-null, --unique, --no-rows-where, ...)")
    lines.append(
        f"To publish it: `{_same_move('publish')}`"
        if report.ok
        else "main is untouched and the branch kept: fix the data and audit again, or discard it: "
        f"`{_same_move('discard')}`"
    )
    return "\n".join(lines)


def _describe_publish(published: Published) -> str:
    """What the publish did, for a person."""
    head = f"move {published.move_id}: branch {published.branch} of {published.table}"
    if published.how == "fast_forward":
        return (
            f"{head} published: main fast-forwarded from snapshot {published.main_before} to the audited snapshot "
            f"{published.snapshot_id}; the branch is removed"
        )
    if published.how == "append":
        return (
            f"{head} published: {published.files} data file(s) of the audited snapshot {published.snapshot_id} "
            f"appended to main (snapshot {published.main_before} -> {published.main_after}); the branch is removed"
        )
    audited = f" (audited snapshot {published.snapshot_id})" if published.snapshot_id is not None else ""
    return f"{head} was published already{audited}: nothing to do"


@click.command("audit")
@definition
@click.option("--not-null", "not_null", multiple=True, metavar="COL", help="A column without nulls (repeatable).")
@click.option(
    "--unique",
    multiple=True,
    callback=_unique_keys,
    metavar="COL[,COL]",
    help="A column, or columns that together must be unique (repeatable); rows with a null in the key are ignored.",
)
@click.option("--no-rows-where", metavar="FILTER", help='No row may match this filter: "amount < 0".')
@click.option("--min-rows", type=click.IntRange(min=0), metavar="N", help="At least N rows.")
@click.option("--max-rows", type=click.IntRange(min=0), metavar="N", help="At most N rows.")
@click.option(
    "--scope",
    type=click.Choice(["move", "branch"]),
    default="move",
    show_default=True,
    help="move: the rows added on the branch since it was cut; branch: every row of it (main's at the fork too).",
)
@click.option(
    "--sample-size", type=click.IntRange(min=0), default=5, show_default=True, help="Offending rows shown per check."
)
@click.pass_obj
@handles_errors
def audit_move(settings: Settings, **options: Any) -> None:
    """Check the rows a finished move wrote on its --branch; exit 1 when a check fails (main is untouched).

    A passing audit is recorded on the branch; `move publish` publishes exactly the snapshot it read.
    """
    checks = {name: options.pop(name) for name in ("not_null", "unique", "min_rows", "max_rows", "scope")}
    sample_size = options.pop("sample_size")
    no_rows_where = check_filter(options.pop("no_rows_where"), "--no-rows-where")
    try:
        mover = mover_for(settings, options)
        report = mover.audit(
            not_null=list(checks["not_null"]),
            unique=checks["unique"],
            no_rows_where=no_rows_where,
            min_rows=checks["min_rows"],
            max_rows=checks["max_rows"],
            scope=checks["scope"],
            sample_size=sample_size,
        )
    except KeyboardInterrupt:
        exit_interrupted(settings, "stopped while auditing; main is untouched and no passing audit was recorded.")
    settings.emit(report.to_json(), _describe_audit(report))
    if not report.ok:
        raise SystemExit(1)


@click.command("publish")
@definition
@click.pass_obj
@handles_errors
def publish_move(settings: Settings, **options: Any) -> None:
    """Make the audited --branch main's in one commit, then remove it; run again, it does nothing."""
    try:
        published = mover_for(settings, options).publish()
    except PublishRefusedError as exc:
        raise _with_advice(exc) from exc
    except KeyboardInterrupt:
        exit_interrupted(settings, "stopped while publishing: run the same command again; it publishes once.")
    settings.emit(published.to_json(), _describe_publish(published))


def _with_advice(error: PublishRefusedError) -> PublishRefusedError:
    """``error`` followed by the command that acts on its reason, to paste as it is."""
    advice = _AFTER_REFUSAL.get(error.reason)
    if advice is None:
        return error
    what, verb = advice
    checks = " --not-null COL --unique COL ..." if verb == "audit" else ""
    if error.reason == "audit_scope":
        checks = " --scope branch" + checks
    text = error.args[0] if len(error.args) == 1 and isinstance(error.args[0], Message) else str(error)
    return PublishRefusedError(
        text + f" {what}: `{_same_move(verb)}{checks}`",
        table=error.table,
        branch=error.branch,
        reason=error.reason,
        snapshots=error.snapshots,
    )


@click.command("discard")
@definition
@click.pass_obj
@handles_errors
def discard_move(settings: Settings, **options: Any) -> None:
    """Remove the move's --branch and its records; main is untouched. Running the move again starts anew.

    A move already published (a publish that stopped before removing its branch) is refused.
    """
    discarded = mover_for(settings, options).discard()
    settings.emit(
        discarded.to_json(),
        (
            f"move {discarded.move_id}: branch {discarded.branch} of {discarded.table} discarded (it was at snapshot "
            f"{discarded.snapshot_id}); main is untouched, snapshot expiry and orphan-file removal free its files"
        )
        if discarded.dropped
        else f"move {discarded.move_id}: {discarded.table} has no branch {discarded.branch}: nothing to discard",
    )
