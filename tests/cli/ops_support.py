"""Running ``iceberg-ops maintain``/``move`` as a real subprocess against real catalogs; no tests here."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from tests.support import warm_cli
from tests.support.lake import Lake
from tests.support.lake import sqlite_catalog as sqlite_catalog
from tests.support.lake import sqlite_flags as sqlite_flags

BIN = Path(sys.executable).parent / "iceberg-ops"

CREATE_ORDERS = 'ctx.create_table("orders", pa.schema([pa.field("id", pa.int64(), nullable=False)]))'


def run(
    cwd: Path, *args: str, timeout: float = 180, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """``iceberg-ops ARGS`` in ``cwd`` (with ``env`` added), stdout and stderr captured (neither is a terminal).

    A real process forked from a warm parent (``tests.support.warm_cli``), not a fresh interpreter.
    """
    return warm_cli.run(BIN, args, cwd=cwd, timeout=timeout, env={**os.environ, **(env or {})})


def start(cwd: Path, *args: str) -> subprocess.Popen[str]:
    """``iceberg-ops ARGS`` started in ``cwd`` (to be interrupted), stdout and stderr piped.

    SIGINT starts with its default handling, as from an interactive shell: run as a background job of
    a non-interactive shell (``make test-all &``, a CI runner), this process ignores SIGINT, the command
    would inherit that and, rightly, sit through the Ctrl-C a test sends it.
    """
    return subprocess.Popen(
        [str(BIN), *args],
        cwd=cwd,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=os.environ.copy(),
        preexec_fn=_sigint_as_in_a_terminal,
    )


def _sigint_as_in_a_terminal() -> None:
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def seaweedfs_project(root: Path, seaweedfs: Any, bucket: str) -> Path:
    """An ``iceberg-ops.yaml`` naming SeaweedFS's Iceberg REST catalog (S3 Tables protocol) for ``bucket``."""
    root.mkdir(parents=True, exist_ok=True)
    catalog = {
        "kind": "rest",
        **seaweedfs.rest_properties(bucket),
    }
    path = root / "iceberg-ops.yaml"
    path.write_text(yaml.safe_dump({"catalog": catalog, "namespace": bucket}))
    return path


@dataclass
class CommandLake(Lake):
    """A lake named by options only, with a migrations folder and a working folder without a project file."""

    def __post_init__(self) -> None:
        self.migrations = self.root / "migrations"
        self.migrations.mkdir()
        self.cwd = self.root / "elsewhere"  # no iceberg-ops.yaml here
        self.cwd.mkdir()

    def run(
        self, *args: str, files: bool = True, env: dict[str, str] | None = None
    ) -> subprocess.CompletedProcess[str]:
        """``iceberg-ops`` with the catalog options, ``--namespace sales`` and (``files``) ``--migrations-dir``."""
        options = [*self.flags, "--namespace", "sales"]
        if files:
            options += ["--migrations-dir", str(self.migrations)]
        return run(self.cwd, *options, *args, env=env)
