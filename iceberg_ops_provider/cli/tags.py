"""``iceberg-ops tag create|list|drop`` and ``iceberg-ops restore TABLE --to-tag NAME``: a table's tags from the shell.

Each is a call of :mod:`iceberg_ops_provider.data_steps.tags`. ``restore`` shows the commits it would undo
and changes ``main`` only after ``--yes`` or a yes typed at its prompt (docs/tags-and-restore.md).
"""

from __future__ import annotations

import json
import shlex
import sys
from typing import TYPE_CHECKING, Any

import click

from iceberg_ops_provider.cli.errors import error_report, handles_errors
from iceberg_ops_provider.cli.settings import open_catalog
from iceberg_ops_provider.cli.shared import json_option, resolve_tables, text_table
from iceberg_ops_provider.cli.wording import age_text, global_options
from iceberg_ops_provider.errors import ConfirmationRequiredError

if TYPE_CHECKING:
    from pyiceberg.table import Table

    from iceberg_ops_provider.cli.settings import Settings
    from iceberg_ops_provider.data_steps.tags import RefInfo, RestorePreview

__all__ = ["restore", "tag"]


class MaxAge(click.ParamType):
    """An age limit: ``7d``, ``12h``, ``30m``, ``45s`` or milliseconds, as milliseconds."""

    name = "age"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> int:
        """Milliseconds, or a usage error naming the option and the forms accepted."""
        from iceberg_ops_provider.maintenance.times import parse_age_ms

        try:
            return parse_age_ms(value)
        except ValueError:
            self.fail(f"{value!r} is not an age: pass a positive age such as 7d, 12h or 30m, or milliseconds.")


def _table(settings: Settings, name: str, *, changes: bool) -> Table:
    """The table ``name`` (``namespace.table``, or a table of ``--namespace``); a usage error when there is none."""
    catalog = open_catalog(settings, access="write" if changes else "read")
    return catalog.load_table(resolve_tables(settings, catalog, name, False, offers_all=False)[0])


def _when(moment: Any) -> str:
    return moment.isoformat(timespec="seconds") if moment is not None else "-"


def _expiry(ref: RefInfo) -> str:
    """When expiry drops a ref, as the list shows it."""
    if ref.expires_at is None:
        return "never"
    return f"{_when(ref.expires_at)}{' (soon)' if ref.expires_soon else ''}"


@click.group()
@json_option
def tag() -> None:
    """Tags of a table: create one before a risky change, list them (branches too), drop one.

    TABLE is namespace.table. Exit codes: 0 done, 1 the table changed meanwhile, 2 bad input.
    """


@tag.command("create")
@json_option
@click.argument("table")
@click.argument("name")
@click.option("--snapshot", "snapshot_id", type=int, metavar="ID", help="Snapshot to tag (default: the current one).")
@click.option(
    "--max-age",
    type=MaxAge(),
    metavar="AGE",
    help="How long snapshot expiry keeps the tag, from its snapshot's commit: 7d, 12h, 30m or milliseconds "
    "(default: the table's history.expire.max-ref-age-ms, forever).",
)
@click.pass_obj
@handles_errors
def create(settings: Settings, table: str, name: str, snapshot_id: int | None, max_age: int | None) -> None:
    """Tag a snapshot of TABLE as NAME; an existing tag or branch NAME is refused, never moved.

    Run again after it committed (the same snapshot and age), it finds the tag there and commits nothing.
    """
    from iceberg_ops_provider.data_steps.tags import create_tag

    created = create_tag(
        _table(settings, table, changes=True), name, snapshot_id=snapshot_id, max_age=max_age, exist_ok=True
    )
    ref = created.tag
    kept = f"kept until {_expiry(ref)}" if ref.expires_at is not None else "kept until dropped"
    human = (
        f"tagged snapshot {ref.snapshot_id} of {created.table} as {ref.name} ({kept})"
        if created.created
        else f"tag {ref.name} of {created.table} is on snapshot {ref.snapshot_id} already ({kept}): nothing to do"
    )
    settings.emit(created.to_json(), human)
    if ref.expires_soon:
        click.echo(
            f"warning: snapshot expiry will drop tag {ref.name} at its next run after {_when(ref.expires_at)}: its "
            "age limit counts from its snapshot's commit, not from now.",
            err=True,
        )


@tag.command("list")
@json_option
@click.argument("table")
@click.pass_obj
@handles_errors
def list_(settings: Settings, table: str) -> None:
    """List the tags and branches of TABLE: snapshot, its time, age limit, when expiry drops it."""
    from iceberg_ops_provider.data_steps.tags import list_refs

    loaded = _table(settings, table, changes=False)
    refs = list_refs(loaded)
    rows = [
        (
            ref.name,
            ref.kind,
            ref.snapshot_id,
            _when(ref.committed_at),
            age_text(ref.max_age_ms / 1000) if ref.max_age_ms else "-",
            _expiry(ref),
        )
        for ref in refs
    ]
    headers = ("name", "kind", "snapshot", "snapshot time", "max age", "expiry drops it")
    settings.emit(
        {"table": ".".join(loaded.name()), "refs": [ref.to_json() for ref in refs]},
        text_table(headers, rows) or f"{'.'.join(loaded.name())} has no snapshot and no refs.",
    )


@tag.command("drop")
@json_option
@click.argument("table")
@click.argument("name")
@click.pass_obj
@handles_errors
def drop(settings: Settings, table: str, name: str) -> None:
    """Drop the tag NAME of TABLE; its snapshot stays until snapshot expiry removes it."""
    from iceberg_ops_provider.data_steps.tags import drop_tag

    loaded = _table(settings, table, changes=True)
    dropped = drop_tag(loaded, name)
    settings.emit(
        {"table": ".".join(loaded.name()), "dropped": dropped.to_json()},
        f"dropped tag {name} of {'.'.join(loaded.name())} (it pointed at snapshot {dropped.snapshot_id}); the "
        "snapshot stays until snapshot expiry removes it",
    )


def _preview_text(preview: RestorePreview) -> str:
    """The commits a restore undoes, for a person."""
    head = f"main of {preview.table} is at snapshot {preview.head_snapshot_id}"
    target = f"tag {preview.tag} (snapshot {preview.tag_snapshot_id})"
    if not preview.undone:
        return f"{head}; setting it to {target} undoes no commit."
    rows = [
        (
            commit.snapshot_id,
            _when(commit.committed_at),
            commit.operation,
            _plus_minus(commit.counts, "rows"),
            _plus_minus(commit.counts, "files"),
            " ".join(part for part in (commit.committed_by, commit.committed_by_id) if part) or "-",
        )
        for commit in preview.undone
    ]
    sideways = "" if preview.descends else " (main does not descend from the tag: the restore goes sideways)"
    lines = [
        f"{head}; setting it back to {target} undoes {len(preview.undone)} commit(s){sideways}:",
        text_table(("snapshot", "committed at", "operation", "rows +/-", "files +/-", "committed by"), rows),
        "Only main moves; other branches and tags stay. Nothing is deleted: the undone snapshots stay until "
        "snapshot expiry removes them.",
    ]
    return "\n".join(lines)


def _plus_minus(counts: dict[str, int], what: str) -> str:
    added, deleted = counts.get(f"added_{what}"), counts.get(f"deleted_{what}")
    return "-" if added is None and deleted is None else f"+{added or 0}/-{deleted or 0}"


@click.command()
@json_option
@click.argument("table")
@click.option("--to-tag", "to_tag", required=True, metavar="NAME", help="The tag whose snapshot main goes back to.")
@click.option("--yes", is_flag=True, help="Restore without asking (needed without a terminal).")
@click.pass_obj
@handles_errors
def restore(settings: Settings, table: str, to_tag: str, yes: bool) -> None:
    """Set main of TABLE back to the snapshot of tag NAME, in one commit, after showing the commits it undoes.

    Refused when a commit lands on main after the preview. Nothing is deleted; snapshot expiry removes the
    undone snapshots later. Exit codes: 0 done, 1 the table changed meanwhile or the prompt was declined,
    2 bad input or no confirmation.
    """
    from iceberg_ops_provider.data_steps.tags import preview_restore, restore_to_tag

    loaded = _table(settings, table, changes=True)
    preview = preview_restore(loaded, to_tag)
    if not settings.as_json:
        click.echo(_preview_text(preview))
    if preview.changes and not yes:
        if not sys.stdin.isatty():
            _refuse(settings, preview, table, to_tag)
        click.confirm(f"Set main of {preview.table} back to tag {to_tag}?", abort=True, err=True)
    done = restore_to_tag(loaded, preview)
    human = (
        f"main of {done.table} is at snapshot {done.to_snapshot_id} (tag {done.tag}) now; "
        f"{done.undone} commit(s) undone, nothing deleted."
        if done.moved
        else f"main of {done.table} is at tag {done.tag}'s snapshot already: nothing to do."
    )
    settings.emit({"preview": preview.to_json(), "restored": done.to_json()}, human)


def _refuse(settings: Settings, preview: RestorePreview, table: str, to_tag: str) -> None:
    """No terminal to ask at and no ``--yes``: say how to run it, exit 2 (with ``--json``, the preview too)."""
    command = [*global_options(settings), "restore", shlex.quote(table), "--to-tag", shlex.quote(to_tag)]
    refused = ConfirmationRequiredError(
        f"restore changes main of {preview.table} and there is no terminal to ask at; nothing was changed. Run it "
        f"again with --yes: {' '.join(['iceberg-ops', *command, '--yes'])}",
        parameter="yes",
    )
    code, line, kind = error_report(settings, refused)
    if settings.as_json:
        document = {"preview": preview.to_json(), "restored": None, "error": line, "type": kind, "exit_code": code}
        click.echo(json.dumps(document, indent=2, default=str))
    click.echo(f"error: {line}", err=True)
    sys.exit(code)
