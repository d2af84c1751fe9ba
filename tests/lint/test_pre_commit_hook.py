"""The ``iceberg-ops-lint`` hook of ``.pre-commit-hooks.yaml``, run by the real ``pre-commit try-repo`` in a
fresh git repository holding migration files: it fails on a finding and passes once it is allowed.

pre-commit builds the hook's own virtualenv from this checkout (``pip install .``), so the test
installs the package from the package index the machine reaches; it is in ``make test-all``.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.long  # pre-commit builds a virtualenv with the package: about a minute

REPOSITORY = Path(__file__).resolve().parents[2]
PRE_COMMIT = Path(sys.executable).parent / "pre-commit"

MIGRATION = """from iceberg_ops_provider.migration import BaseMigration


class Migration(BaseMigration):
    def upgrade(self, ctx):
        ctx.drop_column("events", "legacy"){pragma}

    def downgrade(self, ctx):
        ctx.add_column("events", "legacy", "string")
"""


def _git(cwd: Path, *args: str) -> None:
    subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True)


@pytest.fixture
def project(tmp_path: Path) -> Path:
    if not PRE_COMMIT.exists() or shutil.which("git") is None:
        pytest.skip("pre-commit (the dev extra) or git is not installed")
    _git(tmp_path, "init", "-q")
    (tmp_path / "migrations").mkdir()
    (tmp_path / "migrations" / "0001_drop_legacy.py").write_text(MIGRATION.format(pragma=""))
    (tmp_path / "notes.py").write_text("x = 1\n")  # not a migration file: the hook leaves it alone
    _git(tmp_path, "add", ".")
    return tmp_path


def _try_repo(project: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PRE_COMMIT_HOME": str(project.parent / "pre-commit-home")}
    return subprocess.run(
        [str(PRE_COMMIT), "try-repo", str(REPOSITORY), "iceberg-ops-lint", "--all-files", "--verbose"],
        cwd=project,
        capture_output=True,
        text=True,
        timeout=900,
        env=env,
    )


def test_the_hook_fails_on_a_finding_and_passes_once_it_is_allowed(project):
    failing = _try_repo(project)
    assert failing.returncode == 1, failing.stdout + failing.stderr
    assert "migrations/0001_drop_legacy.py:6: [drop-column] (error)" in failing.stdout
    assert "notes.py" not in failing.stdout.replace("iceberg-ops", "")

    allowed = '  # iceberg-ops: allow=drop-column reason="archived in events_archive"'
    (project / "migrations" / "0001_drop_legacy.py").write_text(MIGRATION.format(pragma=allowed))
    _git(project, "add", ".")
    passing = _try_repo(project)
    assert passing.returncode == 0, passing.stdout + passing.stderr
    assert "(allowed: archived in events_archive)" in passing.stdout
