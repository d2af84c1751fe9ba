"""The iceberg-rust peer of the interop suite: a virtual environment holding iceberg-rust's Python
bindings (``pyiceberg-core``) and DataFusion, which read a table from its metadata file alone,
independently of PyIceberg.

It lives apart from ``.venv`` because the project itself pins ``pyiceberg-core`` 0.10 (what PyIceberg
0.12 asks for), whose DataFusion table provider no released DataFusion accepts; 0.11 with DataFusion 54
reads (DataFusion 55 refuses the provider: "Incompatible DataFusion table provider major version").

``python tests/interop/rust_peer.py install`` (what ``make rust-peer`` runs) builds the environment in a
temporary folder and renames it into place, under a lock, so a rerun costs a look at one folder. A failed
build (no network) exits 1, unless ``--optional`` is given (``make test-all`` gives it): then it prints
one line, keeps it beside the cache, and the tests that need the peer skip with it.

The cache folder is ``$ICEBERG_OPS_RUST_PEER_DIR``, else ``$XDG_CACHE_HOME/iceberg-ops/rust-peer``
(``~/.cache/iceberg-ops/rust-peer``). Only the standard library is used here: the tests import this
module to find the peer and to read through it (:func:`read`).
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
READER = Path(__file__).with_name("rust_reader.py")
PYICEBERG_CORE = "0.11.0"
DATAFUSION = "54.1.0"
INSTALL_TIMEOUT_SECONDS = 900


@dataclass(frozen=True)
class RustPeer:
    """An installed peer: the interpreter of its environment."""

    home: Path

    @property
    def python(self) -> Path:
        """The interpreter that imports ``pyiceberg_core`` and ``datafusion``."""
        return self.home / "bin" / "python"


def cache_root() -> Path:
    """The folder holding one peer per set of pins."""
    configured = os.environ.get("ICEBERG_OPS_RUST_PEER_DIR")
    if configured:
        return Path(configured).expanduser()
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "iceberg-ops" / "rust-peer"


def peer_home() -> Path:
    """The folder of the peer built from the pinned versions."""
    return cache_root() / f"pyiceberg-core-{PYICEBERG_CORE}_datafusion-{DATAFUSION}"


def failure_record(home: Path) -> Path:
    """Where ``install --optional`` keeps why the last build of ``home`` failed."""
    return home.with_name(home.name + ".failed")


def pyarrow_pin() -> str:
    """The PyArrow version ``constraints.txt`` pins, so both sides read Parquet with the same library."""
    text = (ROOT / "constraints.txt").read_text()
    match = re.search(r"^pyarrow==(\S+)", text, flags=re.MULTILINE)
    return f"pyarrow=={match.group(1)}" if match else "pyarrow"


def locate() -> RustPeer | str:
    """The installed peer, or why there is none (one line, naming the command that installs it)."""
    home = peer_home()
    if (home / "bin" / "python").exists() and (home / ".complete").exists():
        return RustPeer(home)
    failed = failure_record(home)
    if failed.exists():
        return f"the iceberg-rust peer could not be built ({failed.read_text().strip()}); run make rust-peer"
    return f"the iceberg-rust peer is not installed in {home}; run make rust-peer"


@contextlib.contextmanager
def _locked(root: Path) -> Iterator[None]:
    root.mkdir(parents=True, exist_ok=True)
    with open(root / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        yield


def _build(staging: Path) -> None:
    subprocess.run([sys.executable, "-m", "venv", str(staging)], check=True, timeout=INSTALL_TIMEOUT_SECONDS)
    packages = [f"pyiceberg-core=={PYICEBERG_CORE}", f"datafusion=={DATAFUSION}", pyarrow_pin()]
    pip = [str(staging / "bin" / "python"), "-m", "pip", "install", "--quiet", "--disable-pip-version-check"]
    subprocess.run([*pip, *packages], check=True, timeout=INSTALL_TIMEOUT_SECONDS)
    (staging / ".complete").write_text(" ".join(packages) + "\n")


def install() -> int:
    """Install the peer unless it is there."""
    home = peer_home()
    if isinstance(locate(), RustPeer):
        print(f"rust-peer: ready in {home}")
        return 0
    with _locked(home.parent):
        if not isinstance(locate(), RustPeer):  # another run may have built it while this one waited
            print(f"rust-peer: building pyiceberg-core {PYICEBERG_CORE} + DataFusion {DATAFUSION} in {home} (once)")
            staging = home.with_name(home.name + ".partial")
            shutil.rmtree(staging, ignore_errors=True)
            shutil.rmtree(home, ignore_errors=True)
            try:
                _build(staging)
            except BaseException:
                shutil.rmtree(staging, ignore_errors=True)
                raise
            # A venv's interpreter finds its packages through pyvenv.cfg beside it, so a renamed one still works.
            staging.rename(home)
            failure_record(home).unlink(missing_ok=True)
    print(f"rust-peer: ready in {home}")
    return 0


def read(peer: RustPeer, metadata_location: str, sql: str, *, timeout: float = 120) -> list[dict[str, Any]]:
    """The rows of ``sql`` over the table at ``metadata_location`` (registered as ``t``), read by iceberg-rust."""
    completed = subprocess.run(
        [str(peer.python), str(READER), metadata_location, sql],
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )
    if completed.returncode != 0:
        raise AssertionError(f"iceberg-rust could not read {metadata_location}: {completed.stderr.strip()[-2000:]}")
    return json.loads(completed.stdout)


def _why(exc: BaseException) -> str:
    """One line saying why a build failed: the plain words of a failed command and its exit status."""
    if isinstance(exc, subprocess.CalledProcessError) and not isinstance(exc.cmd, str):
        words = [Path(str(exc.cmd[0])).name] + [str(word) for word in exc.cmd[1:] if not str(word).startswith("--")]
        return f"{' '.join(words)} exited {exc.returncode}"
    return " ".join(str(exc).split())[:300] or type(exc).__name__


def main(argv: list[str]) -> int:
    """``install [--optional]`` (what ``make rust-peer`` runs), or ``where`` (the folder, or why there is none)."""
    command = argv[1] if len(argv) > 1 else "install"
    if command == "install":
        try:
            return install()
        except (subprocess.SubprocessError, OSError) as exc:
            reason = _why(exc)
            if "--optional" not in argv[2:]:
                print(f"rust-peer: failed: {reason}", file=sys.stderr)
                return 1
            with contextlib.suppress(OSError):
                failure_record(peer_home()).write_text(reason + "\n")
            print(f"rust-peer: not installed: {reason}; the iceberg-rust interop tests will skip")
            return 0
    if command == "where":
        found = locate()
        print(found.home if isinstance(found, RustPeer) else f"not installed: {found}")
        return 0 if isinstance(found, RustPeer) else 1
    print(f"usage: {argv[0]} [install [--optional]|where]", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv))
