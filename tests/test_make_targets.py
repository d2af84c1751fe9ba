"""The README's `make demo` and `make airflow`, run for real in scratch folders (a long suite).

``make demo`` prints each DAG run's outcome and the namespace's status and history, not Airflow's own
log, which goes to files. ``make airflow`` starts Airflow with the example DAGs, prints the UI's
address and login once the API answers, serves the example DAGs to that login (unpaused), keeps its log
servers on ports derived from AIRFLOW_PORT, and stops every process on Ctrl-C (SIGINT to its process
group, as a terminal sends it). A run that fails or times out SIGKILLs every process of its AIRFLOW_HOME.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import signal
import socket
import subprocess
import time
import urllib.request
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent

pytestmark = pytest.mark.long


def _scratch(tmp_path: Path) -> list[str]:
    return [f"AIRFLOW_LOCAL_HOME={tmp_path / 'airflow_home'}", f"LOCAL_DATA={tmp_path / 'local_data'}"]


def test_make_demo_prints_outcomes_and_keeps_airflow_logs_in_files(tmp_path: Path):
    result = subprocess.run(
        ["make", "--no-print-directory", "demo", *_scratch(tmp_path)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=900,
    )

    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    lines = result.stdout.splitlines()
    assert len(lines) < 40, result.stdout  # outcomes and summary, not Airflow's INFO lines
    assert re.search(r"^migrate_then_load: success, \d+ task runs in [0-9.]+s", result.stdout, re.M)
    assert re.search(r"^backfill_with_mover: success, \d+ task runs in [0-9.]+s", result.stdout, re.M)
    assert "current:   0002" in result.stdout  # status of the demo namespace
    assert "[info" not in result.stdout and "[info" not in result.stderr
    for dag in ("migrate_then_load", "backfill_with_mover"):
        log = tmp_path / "airflow_home" / f"demo-{dag}.log"
        assert f"DagRun Finished: dag_id={dag}" in log.read_text()
    assert (tmp_path / "local_data" / "iceberg_catalog.db").exists()


LOG_PORT_OFFSETS = (1000, 2000)
"""``make airflow``'s log servers (worker, triggerer): AIRFLOW_PORT plus these."""


def _listening(port: int) -> bool:
    with socket.socket() as probe:
        return probe.connect_ex(("127.0.0.1", port)) == 0


def _free_port() -> int:
    """A free port whose log-server ports (``LOG_PORT_OFFSETS`` above it) are free too."""
    while True:
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            port = probe.getsockname()[1]
        if port + max(LOG_PORT_OFFSETS) <= 65535 and not any(_listening(port + o) for o in LOG_PORT_OFFSETS):
            return port


def _processes_of(home: Path) -> list[int]:
    """Processes whose environment points AIRFLOW_HOME at ``home``, and every process of their sessions.

    Airflow's components retitle themselves (``airflow api_server -- host:...``), which can overwrite
    what ``/proc/PID/environ`` shows; they stay in the session ``make airflow`` gave standalone.
    """
    marker = f"AIRFLOW_HOME={home}".encode()
    sessions: dict[int, int] = {}
    found = set()
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        pid = int(entry.name)
        try:
            sessions[pid] = os.getsid(pid)
            if marker in (entry / "environ").read_bytes().split(b"\0"):
                found.add(pid)
        except OSError:
            continue
    theirs = {sessions[pid] for pid in found if pid in sessions} - {os.getsid(0)}
    zombie = {pid for pid in sessions if _is_zombie(pid)}
    return sorted((found | {pid for pid, sid in sessions.items() if sid in theirs}) - zombie)


def _is_zombie(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] == "Z"
    except (OSError, IndexError):
        return True


def _as_a_terminal_runs_it() -> None:
    """Give make Ctrl-C's default action, as a shell starting it in the foreground of a terminal does.

    Started from a process that ignores SIGINT (a CI runner's background job does), make and its
    recipe's shell would inherit the ignoring, and a shell cannot trap a signal ignored on entry.
    """
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def _kill_everything(make: subprocess.Popen[str], home: Path) -> None:
    """SIGKILL make's process group and every process of ``home``.

    ``airflow standalone`` runs in a session of its own, which make's process group does not reach:
    it is found by its environment.
    """
    with contextlib.suppress(ProcessLookupError):
        os.killpg(make.pid, signal.SIGKILL)
    for pid in _processes_of(home):
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
    with contextlib.suppress(subprocess.TimeoutExpired):
        make.communicate(timeout=30)


def test_make_airflow_serves_the_examples_and_stops_on_ctrl_c(tmp_path: Path):
    port = _free_port()
    home = tmp_path / "airflow_home"
    make = subprocess.Popen(
        ["make", "--no-print-directory", "airflow", *_scratch(tmp_path), f"AIRFLOW_PORT={port}"],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,  # its own process group, which Ctrl-C signals as a whole
        preexec_fn=_as_a_terminal_runs_it,
    )
    try:
        _serves_the_examples_then_stops_on_ctrl_c(make, home, port)
    except BaseException:  # a failure or a timeout leaves nothing running
        _kill_everything(make, home)
        raise


def _serves_the_examples_then_stops_on_ctrl_c(make: subprocess.Popen[str], home: Path, port: int) -> None:
    try:
        banner = ""
        deadline = time.monotonic() + 420
        assert make.stdout is not None
        while "Ctrl-C stops it." not in banner:
            line = make.stdout.readline()
            assert line, f"make airflow ended before Airflow was up:\n{banner}"
            assert time.monotonic() < deadline, banner
            banner += line
        found = re.search(r"Airflow is up: (http://127\.0\.0\.1:\d+)  \(user admin, password (\S+)\)", banner)
        assert found, banner
        url, password = found.groups()
        assert url == f"http://127.0.0.1:{port}"
        log_ports = [port + offset for offset in LOG_PORT_OFFSETS]
        assert f"log servers on ports {log_ports[0]} and {log_ports[1]}" in banner, banner

        token_request = urllib.request.Request(
            f"{url}/auth/token",
            data=json.dumps({"username": "admin", "password": password}).encode(),
            headers={"Content-Type": "application/json"},
        )
        token = json.load(urllib.request.urlopen(token_request, timeout=30))["access_token"]
        dags: dict[str, bool] = {}
        deadline = time.monotonic() + 180
        expected = {"migrate_then_load", "backfill_with_mover", "table_maintenance", "policy_maintenance"}
        while not expected <= set(dags) and time.monotonic() < deadline:  # the dag-processor parses them
            listing = urllib.request.Request(f"{url}/api/v2/dags", headers={"Authorization": f"Bearer {token}"})
            dags = {d["dag_id"]: d["is_paused"] for d in json.load(urllib.request.urlopen(listing, timeout=30))["dags"]}
            time.sleep(1)
        assert expected <= set(dags), dags
        assert not dags["migrate_then_load"], "new DAGs start unpaused under make airflow"
        # ... but not the daily maintenance, which needs its params set first (on a fresh catalog it fails)
        assert dags["table_maintenance"] and dags["policy_maintenance"], dags
        assert _processes_of(home), "no Airflow process found by its AIRFLOW_HOME"
        deadline = time.monotonic() + 60
        while not all(_listening(p) for p in log_ports) and time.monotonic() < deadline:  # not 8793 and 8794
            time.sleep(0.5)
        assert all(_listening(p) for p in log_ports), f"no log servers on {log_ports}"
    finally:
        os.killpg(make.pid, signal.SIGINT)
        rest, _ = make.communicate(timeout=180)

    assert "Airflow stopped." in rest, rest
    deadline = time.monotonic() + 60
    while _processes_of(home) and time.monotonic() < deadline:
        time.sleep(0.5)
    assert _processes_of(home) == [], "processes of the local Airflow outlived Ctrl-C"
    assert not _listening(port), "the API server still listens"
