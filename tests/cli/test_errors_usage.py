"""One rule for usage errors, as docs/cli.md states it: click's message after the usage line on stderr,
exit 2, nothing on stdout; with ``--json`` (before or after the subcommand) stdout also gets
``{"error": ..., "type": "UsageError", "exit_code": 2}``. Checked on a migration command, a
``maintain`` command and a ``move`` command, as real subprocesses."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support import warm_cli

BIN = Path(sys.executable).parent / "iceberg-ops"
DOCS = Path(__file__).resolve().parents[2] / "docs" / "cli.md"

USAGE_ERRORS = {
    "unknown global option": (["--bogus", "status"], "No such option '--bogus'"),
    "migration command": (["plan", "--direction", "sideways"], "Invalid value for '--direction'"),
    "maintain": (["maintain", "compact", "sales.orders", "--target-file-size", "lots"], "'lots' is not a size"),
    "move": (["move", "sales.orders", "archive.orders", "--mode", "sometimes"], "Invalid value for '--mode'"),
}


def _run(args: list[str], cwd: Path) -> subprocess.CompletedProcess[str]:
    return warm_cli.run(BIN, args, cwd=cwd, timeout=120)


@pytest.mark.parametrize("case", sorted(USAGE_ERRORS))
def test_without_json_the_usage_error_goes_to_stderr_and_nothing_to_stdout(case: str, tmp_path: Path):
    args, message = USAGE_ERRORS[case]
    result = _run(args, tmp_path)

    assert result.returncode == 2, result.stderr
    assert result.stdout == ""
    assert "Usage: iceberg-ops" in result.stderr
    assert f"Error: {message}" in result.stderr or message in result.stderr


# --json after the subcommand: not for an unknown global option, refused before any subcommand is read.
JSON_PLACES = [(case, "before") for case in sorted(USAGE_ERRORS)] + [
    (case, "after") for case in sorted(USAGE_ERRORS) if case != "unknown global option"
]


@pytest.mark.parametrize(("case", "where"), JSON_PLACES)
def test_with_json_stdout_also_gets_the_error_document(case: str, where: str, tmp_path: Path):
    args, message = USAGE_ERRORS[case]
    result = _run(["--json", *args] if where == "before" else [*args, "--json"], tmp_path)

    assert result.returncode == 2, result.stderr
    document = json.loads(result.stdout)
    assert document["type"] == "UsageError" and document["exit_code"] == 2
    assert message in document["error"]
    assert message in result.stderr  # the message people read stays where it was


def test_the_docs_state_this_rule_and_not_another():
    text = " ".join(DOCS.read_text().split())
    assert '`{"error": ..., "type": "UsageError", "exit_code": 2}` on stdout' in text
    assert "nothing on stdout, also with `--json`" not in text
