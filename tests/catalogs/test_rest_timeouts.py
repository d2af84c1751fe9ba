"""The catalog's timeout: the option of every kind (refused by name when it is no number of seconds), the
project file and the command line that set it, the CLI on a catalog that stalls (a real subprocess),
and the bound on building catalogs whose constructor calls out (given up on after the timeout).
"""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from click.testing import CliRunner

from iceberg_ops_provider.catalogs import (
    DEFAULT_CATALOG_TIMEOUT,
    CatalogFactory,
    check_timeout,
    from_connection,
    from_file,
    from_options,
    open_catalog,
)
from iceberg_ops_provider.cli import cli
from iceberg_ops_provider.cli.catalog_flags import CatalogFlags, with_flags
from iceberg_ops_provider.config import load_config
from iceberg_ops_provider.errors import CatalogConfigError, CatalogUnavailableError
from tests.support import warm_cli

BIN = Path(sys.executable).parent / "iceberg-ops"


def _project(root: Path, uri: str, *, timeout: object = None) -> Path:
    (root / "migrations").mkdir(parents=True, exist_ok=True)
    config = root / "iceberg-ops.yaml"
    lines = ["catalog:", "  kind: rest", f"  uri: {uri}"]
    if timeout is not None:
        lines.append(f"  timeout: {timeout}")
    config.write_text("\n".join([*lines, "namespace: sales", ""]))
    return config


# --- the timeout option --------------------------------------------------------------------------------


BAD_TIMEOUTS = [0, -1, 0.0, True, False, float("nan"), float("inf"), 10**400, 7 * 24 * 3600 + 1, [30], "soon", "0"]


@pytest.mark.parametrize("value", BAD_TIMEOUTS)
@pytest.mark.parametrize("kind", ["rest", "sqlite"])
def test_bad_timeouts_are_refused_naming_the_option(tmp_path, kind, value):
    options = {"uri": "http://127.0.0.1:1"} if kind == "rest" else {"db_path": tmp_path / "c.db"}
    spec = from_options(kind, timeout=value, **options)
    assert [problem.key for problem in spec.problems] == ["timeout"]
    with pytest.raises(CatalogConfigError, match="the `timeout` option must be a number of seconds greater than 0"):
        CatalogFactory.build(kind, timeout=value, **options)
    assert list(tmp_path.iterdir()) == []


def test_a_timeout_given_as_text_in_python_is_refused(tmp_path):
    with pytest.raises(CatalogConfigError, match="the `timeout` option must be a number of seconds"):
        CatalogFactory.build("sqlite", timeout="30", db_path=tmp_path / "c.db")


@pytest.mark.parametrize(
    ("value", "seconds"), [(30, 30.0), (0.25, 0.25), (" 12.5 ", 12.5), ("30", 30.0), (7 * 24 * 3600, 604800.0)]
)
def test_check_timeout_takes_numbers_and_their_text(value, seconds):
    assert check_timeout(value) == seconds


def test_every_source_names_its_own_timeout_setting(tmp_path):
    project = tmp_path / "iceberg-ops.yaml"
    specs = {
        "the `timeout` option": from_options("rest", uri="http://h", timeout=-1),
        f"`timeout:` under `catalog:` in {project}": from_file(
            {"kind": "rest", "uri": "http://h", "timeout": -1}, file=project, root=tmp_path
        ),
        "the `timeout` extra of Airflow connection 'lake'": from_connection(
            "lake", "iceberg_ops", host="http://h", extra={"timeout": "soon"}
        ),
    }
    for words, spec in specs.items():
        with pytest.raises(CatalogConfigError) as info:
            open_catalog(spec, access="read")
        assert str(info.value).startswith(f"{words} must be a number of seconds greater than 0")


def test_sql_kinds_accept_a_timeout_and_do_not_pass_it_on(tmp_path):
    catalog = CatalogFactory.build("sqlite", db_path=tmp_path / "c.db", warehouse_dir=tmp_path / "w", timeout=5)
    assert "timeout" not in catalog.properties
    catalog.create_namespace("sales")
    assert catalog.list_namespaces() == [("sales",)]
    catalog.close()
    memory = CatalogFactory.build("memory", timeout=2.5)
    assert "timeout" not in memory.properties
    memory.close()


def test_the_project_file_and_the_command_line_set_the_timeout(tmp_path):
    config = load_config(_project(tmp_path, "http://127.0.0.1:1", timeout=7))
    assert config.catalog_timeout == 7
    assert with_flags(config, CatalogFlags(timeout=3)).catalog_timeout == 3
    assert with_flags(config, CatalogFlags(name="lake")).catalog == {"name": "lake", "timeout": 7}
    assert with_flags(config, CatalogFlags(kind="hive")).catalog == {"kind": "hive", "timeout": 7}
    default = load_config(_project(tmp_path / "other", "http://127.0.0.1:1"))
    assert default.catalog_timeout == DEFAULT_CATALOG_TIMEOUT
    bad = load_config(_project(tmp_path / "bad", "http://127.0.0.1:1", timeout=0))
    with pytest.raises(CatalogConfigError, match=r"`timeout:` under `catalog:` in .*bad/iceberg-ops\.yaml must be a"):
        bad.open_catalog(access="read")
    flagged = with_flags(bad, CatalogFlags(timeout=4))  # the command line's wins over the file's
    assert flagged.catalog_timeout == 4 and not flagged.catalog_spec.problems


# --- the command line ------------------------------------------------------------------------------------


@pytest.mark.parametrize("where", ["option", "file"])
def test_the_cli_on_a_stalled_catalog_exits_1_with_one_line_naming_it(stalled_uri, tmp_path, where):
    config = _project(tmp_path, stalled_uri, timeout=2 if where == "file" else None)
    extra = ["--catalog-timeout", "2"] if where == "option" else []
    started = time.monotonic()
    result = warm_cli.run(BIN, ["--config", str(config), *extra, "status"], timeout=60)
    elapsed = time.monotonic() - started
    assert elapsed < 15, elapsed
    assert result.returncode == 1, (result.stdout, result.stderr)
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith(f"error: The catalog at {stalled_uri} did not answer within 2 s")
    assert ("--catalog-timeout" if where == "option" else f"`timeout:` under `catalog:` in {config}") in lines[0]
    assert result.stdout == ""


def test_the_cli_reports_a_catalog_that_stalls_after_opening(half_stalled_uri, tmp_path):
    config = _project(tmp_path, half_stalled_uri)
    started = time.monotonic()
    result = CliRunner().invoke(cli, ["--config", str(config), "--catalog-timeout", "1", "--json", "status"])
    assert time.monotonic() - started < 10
    assert result.exit_code == 1, result.output
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith(f"error: The catalog at {half_stalled_uri} did not answer")
    assert "within 1 s (GET /v1/namespaces/" in lines[0]
    payload = json.loads(result.stdout)
    assert payload["type"] == "CatalogUnavailableError" and payload["exit_code"] == 1


@pytest.mark.parametrize("value", ["0", "-2", "soon"])
def test_a_bad_catalog_timeout_option_is_a_usage_error(tmp_path, value):
    config = _project(tmp_path, "http://127.0.0.1:1")
    result = CliRunner().invoke(cli, ["--config", str(config), "--catalog-timeout", value, "status"])
    assert result.exit_code == 2
    assert "--catalog-timeout" in result.output


def test_a_bad_timeout_in_the_project_file_is_a_configuration_error(tmp_path):
    config = _project(tmp_path, "http://127.0.0.1:1", timeout=-5)
    result = CliRunner().invoke(cli, ["--config", str(config), "status"])
    assert result.exit_code == 2
    assert f"`timeout:` under `catalog:` in {config} must be a number of seconds" in result.stderr


# --- building catalogs whose constructor calls out -----------------------------------------------------------

RELEASE = threading.Event()
FAILURE = KeyError("missing")


class AnsweringCatalog:
    """A catalog type (``py-catalog-impl``) whose constructor returns at once."""

    def __init__(self, name: str, **properties: str) -> None:
        self.name = name
        self.properties = properties


class FailingCatalog:
    """A catalog type whose constructor fails."""

    def __init__(self, name: str, **properties: str) -> None:
        raise FAILURE


class NeverAnsweringCatalog:
    """A catalog type whose constructor waits for a service that never answers."""

    def __init__(self, name: str, **properties: str) -> None:
        RELEASE.wait(60)


def _impl(cls: type) -> dict[str, str]:
    return {"py-catalog-impl": f"{__name__}.{cls.__name__}"}


def test_building_in_a_thread_returns_raises_and_gives_up():
    built = CatalogFactory.load("x", timeout=5, **_impl(AnsweringCatalog))
    assert isinstance(built, AnsweringCatalog) and built.name == "x"
    assert "timeout" not in built.properties

    with pytest.raises(KeyError) as info:
        CatalogFactory.load("x", timeout=5, **_impl(FailingCatalog))
    assert info.value is FAILURE

    before = set(threading.enumerate())
    started = time.monotonic()
    expected = r"The catalog \(pyiceberg catalog 'x'\) was not opened within 0\.2 s; check that it is running"
    with pytest.raises(CatalogUnavailableError, match=expected) as info:
        CatalogFactory.load("x", timeout=0.2, **_impl(NeverAnsweringCatalog))
    assert time.monotonic() - started < 3
    assert info.value.timeout == 0.2 and info.value.reason == "timeout"
    abandoned = [thread for thread in threading.enumerate() if thread not in before]
    assert all(thread.daemon for thread in abandoned)  # it cannot keep the process alive
    RELEASE.set()

    with pytest.raises(CatalogConfigError, match="the `timeout` option must be a number of seconds"):
        CatalogFactory.load("x", timeout=0, **_impl(AnsweringCatalog))


def test_a_build_that_never_returns_does_not_keep_the_process_alive():
    code = """
import threading
from iceberg_ops_provider.catalogs import CatalogFactory
from iceberg_ops_provider.errors import CatalogUnavailableError

class Never:
    def __init__(self, name, **properties):
        threading.Event().wait()

try:
    CatalogFactory.load("x", timeout=0.2, **{"py-catalog-impl": "__main__.Never"})
except CatalogUnavailableError as exc:
    print("gave up:", exc)
"""
    started = time.monotonic()
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("gave up: The catalog (pyiceberg catalog 'x') was not opened within 0.2 s")
    assert time.monotonic() - started < 10
