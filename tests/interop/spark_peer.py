"""The Spark peer of the interop suite: install it once into a cache folder, and find it again.

Apache Spark 3.5 with Apache Iceberg's Java runtime 1.10.2, from PyPI and Debian's packages only
(docs/spark.md says why each piece comes from where):

* ``pyspark`` (and its ``py4j``) at the version pinned in ``constraints.txt``, installed with
  ``pip install --target`` into the cache folder, not into ``.venv``: 320 MB that ``make test``
  never needs. The tests put that folder on ``sys.path``.
* Iceberg's ``iceberg-spark-runtime-3.5_2.12`` and ``iceberg-spark-extensions-3.5_2.12`` jars, taken
  out of the PyPI package ``snowpark-connect-deps-iceberg`` (installed with ``--no-deps``).
* Iceberg's shaded Jackson, which that runtime jar leaves out: Debian's Jackson 2.14 relocated to
  ``org.apache.iceberg.shaded.com.fasterxml.jackson`` with Debian's ``jarjar``.
* PostgreSQL's JDBC driver from Debian (``libpostgresql-jdbc-java``), copied beside the other jars.

``python tests/interop/spark_peer.py install`` (what ``make spark-peer`` runs) builds it in a
temporary folder and renames it into place, under a lock, so a rerun with the same pins costs a
look at one file, and two runs at once do the work once. Where it cannot be built (no Java, the
Debian packages missing and no root to install them) it prints one line saying why and exits 0:
the interop tests then skip with that reason. An error while building (a download that fails)
exits 1, unless ``--optional`` is given (``make test-all`` gives it): then that error is the one
line, it is kept beside the cache, and the interop tests skip with it until a build succeeds.

The cache folder is ``$ICEBERG_OPS_SPARK_PEER_DIR``, else ``$XDG_CACHE_HOME/iceberg-ops/spark-peer``
(``~/.cache/iceberg-ops/spark-peer``), outside the checkout, so fresh clones on one machine (CI's)
share it. Only the standard library is used here: the tests import this module to find the peer.
"""

from __future__ import annotations

import contextlib
import fcntl
import itertools
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import zipfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
CONSTRAINTS = ROOT / "constraints.txt"

ICEBERG_VERSION = "1.10.2"
SCALA_VERSION = "2.12"
SPARK_LINE = "3.5"
# The jars taken from snowpark-connect-deps-iceberg's wheel.
ICEBERG_JARS = (
    f"iceberg-spark-runtime-{SPARK_LINE}_{SCALA_VERSION}-{ICEBERG_VERSION}.jar",
    f"iceberg-spark-extensions-{SPARK_LINE}_{SCALA_VERSION}-{ICEBERG_VERSION}.jar",
)
SHADED_JACKSON_JAR = "iceberg-shaded-jackson.jar"
JDBC_JAR = "postgresql.jar"
# A class the Iceberg runtime loads on its first catalog call and that its jar lacks.
SHADED_PROBE = "org/apache/iceberg/shaded/com/fasterxml/jackson/core/JsonFactoryBuilder.class"

DEBIAN_JARS = {
    "jarjar.jar": "libjarjar-java",
    "jackson-core.jar": "libjackson2-core-java",
    "jackson-databind.jar": "libjackson2-databind-java",
    "jackson-annotations.jar": "libjackson2-annotations-java",
    "postgresql.jar": "libpostgresql-jdbc-java",
}
DEBIAN_JAVA = Path("/usr/share/java")
PINNED = ("pyspark", "py4j", "snowpark-connect-deps-iceberg")


@dataclass(frozen=True)
class Peer:
    """An installed peer: where its Python packages and jars are."""

    home: Path
    pyspark_version: str
    iceberg_version: str

    @property
    def python_path(self) -> Path:
        """The folder to put on ``sys.path`` for ``import pyspark``."""
        return self.home / "python"

    @property
    def jars(self) -> list[Path]:
        """The jars for ``spark.jars``: Iceberg's runtime and extensions, the shaded Jackson, the JDBC driver."""
        return [self.home / "jars" / name for name in (*ICEBERG_JARS, SHADED_JACKSON_JAR, JDBC_JAR)]


def cache_root() -> Path:
    """The folder holding one peer per set of pins."""
    configured = os.environ.get("ICEBERG_OPS_SPARK_PEER_DIR")
    if configured:
        return Path(configured).expanduser()
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "iceberg-ops" / "spark-peer"


def pins(constraints: Path = CONSTRAINTS) -> dict[str, str]:
    """The versions ``constraints.txt`` pins for the peer's PyPI packages."""
    found: dict[str, str] = {}
    for line in constraints.read_text().splitlines():
        match = re.fullmatch(r"\s*([A-Za-z0-9_.-]+)==([^\s;#]+).*", line)
        if match and match.group(1).lower().replace("_", "-") in PINNED:
            found[match.group(1).lower().replace("_", "-")] = match.group(2)
    missing = [name for name in PINNED if name not in found]
    if missing:
        raise SystemExit(f"{constraints} pins no version of {', '.join(missing)}")
    return found


def peer_home(versions: dict[str, str]) -> Path:
    """The folder of the peer built from these pins (a new set of pins builds a new one)."""
    return cache_root() / f"pyspark-{versions['pyspark']}_iceberg-{ICEBERG_VERSION}"


def java_missing() -> str | None:
    """Why Spark cannot run here (one line), or ``None`` when a Java of 8 to 17 is on PATH."""
    java = shutil.which("java")
    if java is None:
        return (
            "Java is not installed (Spark 3.5 needs Java 8, 11 or 17 on PATH: apt-get install openjdk-17-jre-headless)"
        )
    try:
        output = subprocess.run([java, "-version"], capture_output=True, text=True, timeout=60).stderr
    except (OSError, subprocess.SubprocessError) as exc:
        return f"java -version failed ({exc})"
    match = re.search(r'version "(\d+)(?:\.(\d+))?', output)
    if not match:
        return f"cannot read Java's version from {output.strip()[:80]!r}"
    major = int(match.group(2)) if match.group(1) == "1" else int(match.group(1))
    if major not in (8, 11, 17):
        return f"Java {major} is on PATH; Spark 3.5 runs on Java 8, 11 or 17"
    return None


def locate() -> Peer | str:
    """The installed peer, or why there is none (one line, naming the command that installs it)."""
    reason = java_missing()
    if reason:
        return reason
    try:
        versions = pins()
    except (OSError, SystemExit) as exc:
        return f"cannot read the peer's pins: {exc}"
    home = peer_home(versions)
    manifest = home / "peer.json"
    if not manifest.exists():
        failed = failure_record(home)
        if failed.exists():
            return f"the Spark peer could not be built: {failed.read_text().strip()} (run: make spark-peer)"
        return f"the Spark peer is not installed in {home} (run: make spark-peer)"
    peer = Peer(home, versions["pyspark"], ICEBERG_VERSION)
    absent = [str(path) for path in [peer.python_path / "pyspark", *peer.jars] if not path.exists()]
    if absent:
        return (
            f"the Spark peer in {home} is incomplete ({absent[0]} is missing; delete {home} and run: make spark-peer)"
        )
    return peer


def failure_record(home: Path) -> Path:
    """Where ``install --optional`` keeps why the last build of ``home`` failed."""
    return home.with_name(home.name + ".failed")


def _run(command: list[str], **kwargs: object) -> None:
    print("spark-peer: $", " ".join(command), flush=True)
    subprocess.run(command, check=True, **kwargs)  # type: ignore[call-overload]


def debian_jars_missing() -> list[str]:
    """The Debian packages whose jars are not in /usr/share/java."""
    return sorted({package for jar, package in DEBIAN_JARS.items() if not (DEBIAN_JAVA / jar).exists()})


def ensure_debian_jars() -> str | None:
    """Install the Debian packages the build needs when missing; why they cannot be, or ``None``."""
    missing = debian_jars_missing()
    if not missing:
        return None
    if os.geteuid() != 0 or shutil.which("apt-get") is None:
        return (
            f"Debian packages missing: {' '.join(missing)} (install them with apt-get as root, then: make spark-peer)"
        )
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    # Waits for another apt-get's lock (an image still installing) instead of failing at once.
    install = ["apt-get", "-o", "DPkg::Lock::Timeout=300", "install", "-y", "-q", "--no-install-recommends", *missing]
    try:
        _run(install, env=env, stdout=subprocess.DEVNULL)
    except subprocess.CalledProcessError:  # an old or empty package list: refresh it once
        _run(["apt-get", "update", "-q"], env=env, stdout=subprocess.DEVNULL)
        _run(install, env=env, stdout=subprocess.DEVNULL)
    still = debian_jars_missing()
    if still:
        raise SystemExit(
            f"spark-peer: apt-get installed {' '.join(missing)} but {' '.join(still)} still lack their jars"
        )
    return None


def relocate_jackson(work: Path, target: Path) -> None:
    """Debian's Jackson under Iceberg's shaded package name, as Iceberg's runtime jar expects it."""
    unpacked = work / "jackson"
    unpacked.mkdir()
    for jar in ("jackson-core.jar", "jackson-databind.jar", "jackson-annotations.jar"):
        with zipfile.ZipFile(DEBIAN_JAVA / jar) as archive:
            archive.extractall(unpacked)
    # Multi-release classes, module descriptors and signatures would be wrong after relocation.
    shutil.rmtree(unpacked / "META-INF" / "versions", ignore_errors=True)
    for path in [*unpacked.rglob("module-info.class"), *(unpacked / "META-INF").glob("*.SF")]:
        path.unlink()
    merged = work / "jackson-all.jar"
    with zipfile.ZipFile(merged, "w", zipfile.ZIP_DEFLATED) as archive:
        for path in sorted(unpacked.rglob("*")):
            if path.is_file():
                archive.write(path, path.relative_to(unpacked).as_posix())
    rules = work / "rules.txt"
    rules.write_text("rule com.fasterxml.jackson.** org.apache.iceberg.shaded.com.fasterxml.jackson.@1\n")
    _run(["java", "-jar", str(DEBIAN_JAVA / "jarjar.jar"), "process", str(rules), str(merged), str(target)])
    with zipfile.ZipFile(target) as archive:
        if SHADED_PROBE not in archive.namelist():
            raise SystemExit(f"spark-peer: {target} lacks {SHADED_PROBE} after relocation")


def build(home: Path, versions: dict[str, str]) -> None:
    """Build the peer into ``home`` (which must not exist yet)."""
    pip = [sys.executable, "-m", "pip", "install", "--quiet", "--disable-pip-version-check", "--no-warn-conflicts"]
    home.mkdir(parents=True)
    jars = home / "jars"
    jars.mkdir()
    with tempfile.TemporaryDirectory(prefix="spark-peer-") as scratch:
        work = Path(scratch)
        _run(
            [
                *pip,
                "--target",
                str(home / "python"),
                "-c",
                str(CONSTRAINTS),
                f"pyspark=={versions['pyspark']}",
                f"py4j=={versions['py4j']}",
            ]
        )
        wheel = work / "snowpark"
        _run(
            [
                *pip,
                "--no-deps",
                "--target",
                str(wheel),
                f"snowpark-connect-deps-iceberg=={versions['snowpark-connect-deps-iceberg']}",
            ]
        )
        for name in ICEBERG_JARS:
            found = list(wheel.rglob(name))
            if not found:
                raise SystemExit(f"spark-peer: snowpark-connect-deps-iceberg holds no {name}")
            shutil.copy2(found[0], jars / name)
        relocate_jackson(work, jars / SHADED_JACKSON_JAR)
    shutil.copy2(DEBIAN_JAVA / "postgresql.jar", jars / JDBC_JAR)
    # pip --target may leave the launch scripts without their executable bit; pyspark runs bin/spark-submit.
    for script in (home / "python" / "pyspark" / "bin").glob("*"):
        script.chmod(script.stat().st_mode | 0o111)
    manifest = {"pyspark": versions["pyspark"], "py4j": versions["py4j"], "iceberg": ICEBERG_VERSION}
    manifest["snowpark-connect-deps-iceberg"] = versions["snowpark-connect-deps-iceberg"]
    (home / "peer.json").write_text(json.dumps(manifest, indent=2) + "\n")


@contextlib.contextmanager
def _locked(root: Path) -> Iterator[None]:
    root.mkdir(parents=True, exist_ok=True)
    with open(root / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        yield


def install() -> int:
    """Install the peer unless it is there; a one-line reason (exit 0) where it cannot be built here."""
    reason = java_missing()
    if reason:
        print(f"spark-peer: not installed: {reason}; the interop tests will skip")
        return 0
    versions = pins()
    home = peer_home(versions)
    if isinstance(locate(), Peer):
        print(f"spark-peer: ready in {home}")
        return 0
    with _locked(home.parent):
        if isinstance(locate(), Peer):  # another run built it while this one waited
            print(f"spark-peer: ready in {home}")
            return 0
        reason = ensure_debian_jars()
        if reason:
            print(f"spark-peer: not installed: {reason}; the interop tests will skip")
            return 0
        print(f"spark-peer: building pyspark {versions['pyspark']} + Iceberg {ICEBERG_VERSION} in {home} (once)")
        staging = home.with_name(home.name + ".partial")
        shutil.rmtree(staging, ignore_errors=True)
        shutil.rmtree(home, ignore_errors=True)
        try:
            build(staging, versions)
        except BaseException:
            shutil.rmtree(staging, ignore_errors=True)
            raise
        staging.rename(home)
        failure_record(home).unlink(missing_ok=True)
    found = locate()
    if not isinstance(found, Peer):
        raise SystemExit(f"spark-peer: built, but {found}")
    print(f"spark-peer: ready in {home}")
    return 0


def _why(exc: BaseException) -> str:
    """One line saying why a build failed."""
    if isinstance(exc, subprocess.CalledProcessError):
        words = [exc.cmd] if isinstance(exc.cmd, str) else [str(word) for word in exc.cmd]
        # The program and its plain arguments (``pip install pyspark==3.5.9``): no options, values or paths.
        kept = [Path(words[0]).name]
        for before, word in itertools.pairwise(words):
            if not word.startswith("-") and "/" not in word and before not in ("-o", "-c", "--target"):
                kept.append(word)
        return f"{' '.join(kept)} exited {exc.returncode}"
    text = str(exc.code if isinstance(exc, SystemExit) else exc) or type(exc).__name__
    return " ".join(text.removeprefix("spark-peer: ").split())


def main(argv: list[str]) -> int:
    """``install [--optional]`` (what ``make spark-peer`` runs), or ``where`` (the folder, or why there is none)."""
    command = argv[1] if len(argv) > 1 else "install"
    if command == "install":
        optional = "--optional" in argv[2:]
        try:
            return install()
        except (subprocess.CalledProcessError, SystemExit, OSError) as exc:
            reason = _why(exc)
            if not optional:
                print(f"spark-peer: failed: {reason}", file=sys.stderr)
                return 1
            try:
                home = peer_home(pins())
                home.parent.mkdir(parents=True, exist_ok=True)
                failure_record(home).write_text(reason + "\n")
            except (OSError, SystemExit):
                pass  # the tests then say the peer is not installed
            print(f"spark-peer: not installed: {reason}; the interop tests will skip")
            return 0
    if command == "where":
        found = locate()
        print(found.home if isinstance(found, Peer) else f"not installed: {found}")
        return 0 if isinstance(found, Peer) else 1
    print(f"usage: {argv[0]} [install [--optional]|where]", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv))
