"""``iceberg-ops`` as a real process in a tenth of the time: a warm parent that forks one child per command.

Most command-line tests run ``iceberg-ops`` many times, and each fresh interpreter spends about a second
importing PyIceberg, PyArrow, SQLAlchemy and pydantic before the command does anything. Here one server
process per test worker imports them once; each command is a child forked from it that runs the real entry
point (``iceberg_ops_provider.cli:main``) with its own argument vector, working folder, environment and
standard streams (files, so never a terminal), and exits with the command's own exit status. Exit codes,
stdout, stderr, a traceback of an uncaught error and ``atexit`` behave as in a fresh process; the only
difference is that the modules below are already imported, so tests about what a command imports (the
machine without Airflow) start a fresh interpreter instead, and so does anything that needs its own
process group or signals (``tests.cli.ops_support.start``).

The server side runs as a script (``python warm_cli.py SOCKET``) and imports nothing from ``tests``; the
client side is ``run()``.
"""

from __future__ import annotations

import atexit
import contextlib
import io
import json
import locale
import os
import select
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

# What the commands import lazily; never Airflow (a test may hide it) and nothing that reads the
# environment at import time except PyIceberg's catalog configuration, which each child reads again.
PRELOAD = (
    "iceberg_ops_provider.cli.main",
    "pyarrow",
    "pyarrow.compute",
    "pyarrow.parquet",
    "pyiceberg.catalog",
    "pyiceberg.catalog.sql",
    "pyiceberg.io.pyarrow",
    "pyiceberg.table",
    "sqlalchemy",
    "yaml",
    "rich.console",
    "iceberg_ops_provider.catalogs",
    "iceberg_ops_provider.runner",
    "iceberg_ops_provider.maintenance",
    "iceberg_ops_provider.data_migration",
)

_HEADER = struct.Struct("!I")


# --- server (a script: python warm_cli.py SOCKET PARENT_PID) -------------------------------------------------


def _serve(path: str, parent: int) -> None:
    import importlib

    for name in PRELOAD:
        importlib.import_module(name)
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(path + ".tmp")
    listener.listen(64)
    os.rename(path + ".tmp", path)  # the client waits for this name: the server is ready when it exists
    waiting: dict[int, socket.socket] = {}
    while os.getppid() == parent:
        ready, _, _ = select.select([listener], [], [], 0.01)
        if ready:
            conn, _ = listener.accept()
            request, fds = _receive(conn)
            pid = os.fork()
            if pid == 0:
                listener.close()
                for other in waiting.values():
                    other.close()
                _child(conn, request, fds)  # never returns
            for fd in fds:
                os.close(fd)
            conn.sendall(f"{pid}\n".encode())
            waiting[pid] = conn
        while waiting:
            pid, status = os.waitpid(-1, os.WNOHANG)
            if pid == 0:
                break
            conn = waiting.pop(pid)
            with contextlib.suppress(OSError):
                conn.sendall(f"{status}\n".encode())
            conn.close()


def _receive(conn: socket.socket) -> tuple[dict, list[int]]:
    head, fds, _, _ = socket.recv_fds(conn, _HEADER.size, 3)
    while len(head) < _HEADER.size:
        head += conn.recv(_HEADER.size - len(head))
    (size,) = _HEADER.unpack(head)
    body = b""
    while len(body) < size:
        body += conn.recv(size - len(body))
    return json.loads(body), list(fds)


def _child(conn: socket.socket, request: dict, fds: list[int]) -> None:
    code = 1
    try:
        conn.close()
        for target, fd in enumerate(fds):
            os.dup2(fd, target)
            os.close(fd)
        os.chdir(request["cwd"])
        os.environ.clear()
        os.environ.update(request["env"])
        import pyiceberg.catalog
        from pyiceberg.utils.config import Config

        try:
            pyiceberg.catalog._ENV_CONFIG = Config()
        except Exception:  # a fresh interpreter fails while importing PyIceberg: let the command meet that itself
            os.execv(request["argv"][0], request["argv"])
        sys.argv = request["argv"]
        from iceberg_ops_provider.cli import main

        try:
            main()
            code = 0
        except SystemExit as exit_:
            if exit_.code is None or isinstance(exit_.code, int):
                code = exit_.code or 0
            else:
                print(exit_.code, file=sys.stderr)
                code = 1
        except BaseException:
            import traceback

            traceback.print_exc()
            code = 1
        with contextlib.suppress(BaseException):
            threading._shutdown()  # type: ignore[attr-defined]  # join non-daemon threads, as at interpreter exit
        with contextlib.suppress(BaseException):
            atexit._run_exitfuncs()
    finally:
        with contextlib.suppress(BaseException):
            sys.stdout.flush()
        with contextlib.suppress(BaseException):
            sys.stderr.flush()
        os._exit(code)


# --- client --------------------------------------------------------------------------------------------------

_lock = threading.Lock()
_server: tuple[subprocess.Popen, str] | None = None


def _socket_path() -> str:
    global _server
    with _lock:
        if _server is not None and _server[0].poll() is None:
            return _server[1]
        folder = tempfile.mkdtemp(prefix="warm-cli-")
        path = os.path.join(folder, "socket")
        log = open(os.path.join(folder, "server.log"), "wb")  # noqa: SIM115 - the server keeps it for its life
        process = subprocess.Popen(
            [sys.executable, __file__, path, str(os.getpid())],
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            env=os.environ.copy(),
        )
        atexit.register(_stop, process)
        deadline = time.monotonic() + 120
        while not os.path.exists(path):
            if process.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"the warm iceberg-ops server did not start: {Path(log.name).read_text()}")
            time.sleep(0.02)
        _server = (process, path)
        return path


def _stop(process: subprocess.Popen) -> None:
    process.kill()
    process.wait()


def run(
    executable: str | os.PathLike[str],
    args: list[str] | tuple[str, ...],
    *,
    cwd: str | os.PathLike[str] | None = None,
    env: dict[str, str] | None = None,
    timeout: float | None = None,
    input: str | None = None,
) -> subprocess.CompletedProcess[str]:
    """Like ``subprocess.run([executable, *args], capture_output=True, text=True, ...)`` for ``iceberg-ops``."""
    argv = [os.fspath(executable), *args]
    environment = dict(os.environ if env is None else env)
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err, _stdin(input) as stdin:
        header = json.dumps({"argv": argv, "cwd": os.fspath(cwd or os.getcwd()), "env": environment}).encode()
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as conn:
            conn.connect(_socket_path())
            socket.send_fds(conn, [_HEADER.pack(len(header))], [stdin.fileno(), out.fileno(), err.fileno()])
            conn.sendall(header)
            lines = conn.makefile("rb")
            pid = int(lines.readline())
            conn.settimeout(timeout)
            try:
                status = int(lines.readline())
            except TimeoutError:
                _kill(pid)
                raise subprocess.TimeoutExpired(argv, timeout or 0) from None
            except BaseException:  # the test's own time limit: the command must not outlive it
                _kill(pid)
                raise
        stdout, stderr = _text(out), _text(err)
    return subprocess.CompletedProcess(argv, os.waitstatus_to_exitcode(status), stdout, stderr)


def _kill(pid: int) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGKILL)


def _text(file) -> str:
    """The file's bytes as ``subprocess.run(text=True)`` reads them: the locale's encoding, universal newlines."""
    file.seek(0)
    return io.TextIOWrapper(io.BytesIO(file.read()), encoding=locale.getpreferredencoding(False)).read()


@contextlib.contextmanager
def _stdin(text: str | None):
    if text is None:
        with open(os.devnull, "rb") as null:
            yield null
        return
    with tempfile.TemporaryFile() as file:
        file.write(text.encode(locale.getpreferredencoding(False)))
        file.seek(0)
        yield file


if __name__ == "__main__":
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    _serve(sys.argv[1], int(sys.argv[2]))
