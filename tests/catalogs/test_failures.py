"""What a catalog's clients raise, in this project's terms: unreachable catalogs (transient), refused or
missing credentials (permanent, naming the settings to check), SQLite files that are not databases,
and PyIceberg's messages that name its own command line. Against real servers on loopback: closed
ports, SeaweedFS checking SigV4 signatures, moto checking credentials, small HTTP servers answering
401 and 503. ``translate(exc, spec)`` and ``catalog_errors(spec)`` name the catalog's endpoint and the
setting to change where the catalog was described (an option, the project file, an Airflow connection)."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler
from pathlib import Path

import boto3
import pyarrow as pa
import pytest
from botocore.config import Config

from iceberg_ops_provider.catalogs import (
    CatalogFactory,
    catalog_errors,
    from_connection,
    from_file,
    from_options,
    open_catalog,
    spec_of,
    translate,
)
from iceberg_ops_provider.errors import (
    CatalogAuthError,
    CatalogConfigError,
    CatalogUnavailableError,
    IcebergOpsError,
)
from iceberg_ops_provider.runner import MigrationRunner
from tests.support.hostile import answer_json
from tests.support.servers import (
    REGION,
    boto_kwargs,
    free_ports,
    serve_http,
    stop_process,
    wait_for_http,
)

# No AWS credentials anywhere botocore looks: options, environment, files, instance metadata.
NO_AWS_CREDENTIALS = {
    "AWS_SHARED_CREDENTIALS_FILE": "/nonexistent/credentials",
    "AWS_CONFIG_FILE": "/nonexistent/config",
    "AWS_EC2_METADATA_DISABLED": "true",
}
NO_CREDENTIALS = "No AWS credentials were found to sign the requests to the catalog at "


def _closed_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def _without_aws_credentials(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_PROFILE"):
        monkeypatch.delenv(name, raising=False)
    for name, value in NO_AWS_CREDENTIALS.items():
        monkeypatch.setenv(name, value)


def _sigv4_rest(seaweedfs, bucket: str, **overrides: str) -> dict[str, str]:
    options = seaweedfs.rest_properties(bucket)
    options.update(overrides)
    return {key: value for key, value in options.items() if value != ""}


@pytest.fixture
def answering(request) -> Iterator[str]:
    """An HTTP server that serves ``GET /v1/config`` like a REST catalog and answers every other request
    with the status given by ``request.param`` and an Iceberg REST error body."""
    status = request.param

    class Handler(BaseHTTPRequestHandler):
        def _answer(self, code: int, body: dict[str, object]) -> None:
            answer_json(self, body, code)

        def do_GET(self) -> None:
            if self.path.split("?")[0] == "/v1/config":
                self._answer(200, {"defaults": {}, "overrides": {}})
                return
            names = {401: "NotAuthorizedException", 403: "ForbiddenException", 503: "SlowDownException"}
            message = {401: "token is not valid", 403: "not allowed", 503: "maintenance"}[status]
            self._answer(status, {"error": {"message": message, "type": names[status], "code": status}})

        do_HEAD = do_POST = do_DELETE = do_GET

        def log_message(self, format: str, *args: object) -> None:
            pass

    with serve_http(Handler) as uri:
        yield uri


# --- unreachable: transient --------------------------------------------------------------------------


def test_an_unknown_host_is_unavailable_and_named():
    uri = "http://no-such-host.invalid:8181"
    with pytest.raises(CatalogUnavailableError) as info:
        CatalogFactory.build("rest", uri=uri, timeout=10)
    message = str(info.value)
    assert message.startswith(f"The catalog at {uri} could not be reached (GET /v1/config: ")
    assert "Name or service not known" in message or "resolve" in message.lower()
    assert info.value.transient and info.value.endpoint == uri
    assert info.value.reason == "unreachable" and info.value.request == "GET /v1/config"


def test_a_hive_metastore_on_a_closed_port_is_unavailable_naming_host_and_port():
    port = _closed_port()
    catalog = CatalogFactory.build("hive", uri=f"thrift://127.0.0.1:{port}")  # building does not connect
    with pytest.raises(CatalogUnavailableError) as info, catalog_errors(spec_of(catalog)):
        catalog.list_namespaces()
    message = str(info.value)
    assert message.startswith(f"The catalog at thrift://127.0.0.1:{port} could not be reached (Thrift: ")
    assert f"Could not connect to any of [127.0.0.1:{port}]" in message and "\n" not in message
    assert "check that the Hive metastore" in message and "is running and reachable, and the `uri` option." in message
    assert info.value.transient


def test_the_runner_reports_a_hive_metastore_that_cannot_be_reached(tmp_path):
    port = _closed_port()
    catalog = CatalogFactory.build("hive", uri=f"thrift://127.0.0.1:{port}")
    runner = MigrationRunner(catalog, "sales", tmp_path)
    with pytest.raises(CatalogUnavailableError, match=f"127.0.0.1:{port}"):
        runner.status()


def test_a_glue_endpoint_on_a_closed_port_is_unavailable():
    url = f"http://127.0.0.1:{_closed_port()}"
    glue = boto3.client("glue", **boto_kwargs(url), config=Config(retries={"max_attempts": 1, "mode": "standard"}))
    spec = from_options("glue", **{"glue.endpoint": url, "glue.region": REGION}, timeout=5)
    with pytest.raises(CatalogUnavailableError) as info, catalog_errors(spec):
        glue.get_databases()
    assert str(info.value).startswith(f"The catalog at {url} could not be reached (Could not connect to the endpoint")


@pytest.mark.parametrize("answering", [503], indirect=True)
def test_a_503_answer_is_transient(answering):
    catalog = CatalogFactory.build("rest", uri=answering, timeout=5)
    with pytest.raises(CatalogUnavailableError) as info, catalog_errors(spec_of(catalog)):
        catalog.list_namespaces()
    assert str(info.value).startswith(f"The catalog at {answering} is unavailable (503 on GET /v1/")
    assert "maintenance" in str(info.value)
    assert info.value.reason == "unavailable" and info.value.status == 503


# --- credentials: permanent ----------------------------------------------------------------------------


@pytest.mark.parametrize("answering", [401], indirect=True)
def test_a_401_to_a_bearer_token_names_the_oauth_settings(answering):
    catalog = CatalogFactory.build("rest", uri=answering, token="expired-token", timeout=5)
    with pytest.raises(CatalogAuthError) as info, catalog_errors(spec_of(catalog)):
        catalog.list_namespaces()
    error = info.value
    assert isinstance(error, CatalogConfigError) and not error.transient
    message = str(error)
    assert message.startswith(f"The catalog at {answering} did not accept the credentials (401 GET /v1/")
    assert "token is not valid" in message
    assert "check the `credential` option" in message and "token" in message and "oauth2-server-uri" in message
    assert "expired-token" not in message
    assert error.endpoint == answering and "credential" in error.settings


@pytest.mark.parametrize("answering", [403], indirect=True)
def test_a_403_without_credentials_says_none_were_sent(answering):
    catalog = CatalogFactory.build("rest", uri=answering, timeout=5)
    with pytest.raises(CatalogAuthError) as info, catalog_errors(spec_of(catalog)):
        catalog.list_namespaces()
    message = str(info.value)
    assert message.startswith(f"The catalog at {answering} refused access (403 GET ")
    assert "no credentials were sent" in message and "rest.sigv4-enabled" in message


def test_every_iceberg_ops_error_passes_through_untranslated():
    spec = from_options("rest", uri="http://x")
    error = CatalogAuthError("already explained")
    assert translate(error, spec) is None
    assert translate(ValueError("something else"), spec) is None
    with pytest.raises(CatalogAuthError) as info, catalog_errors(spec):
        raise error
    assert info.value is error


def test_a_connection_the_database_server_closed_is_a_broken_connection_worth_another_try():
    from sqlalchemy.exc import OperationalError

    spec = from_options("sql", uri="postgresql+psycopg://user@127.0.0.1:5432/catalog")
    closed = OperationalError("SELECT 1", {}, Exception("server closed the connection unexpectedly"))
    error = translate(closed, spec)
    assert isinstance(error, CatalogUnavailableError) and error.reason == "busy" and error.transient
    assert "its connection broke" in str(error)


@pytest.mark.backends
def test_a_sigv4_signature_mismatch_names_the_endpoint_and_the_signing_settings(seaweedfs, unique_name, tmp_path):
    seaweedfs.create_table_bucket(unique_name)
    catalog = CatalogFactory.build(
        "rest", **_sigv4_rest(seaweedfs, unique_name, **{"client.secret-access-key": "not-the-secret"})
    )
    runner = MigrationRunner(catalog, "sales", tmp_path)
    with pytest.raises(CatalogAuthError) as info:
        runner.status()
    error = info.value
    message = str(error)
    assert message.startswith(f"The catalog at {seaweedfs.iceberg_uri} refused access (403 GET /v1/")
    assert "signature we calculated does not match" in message
    for setting in ("client.access-key-id", "client.secret-access-key", "rest.signing-region", "rest.signing-name"):
        assert setting in message and setting in error.settings
    assert "not-the-secret" not in message and "\n" not in message
    assert type(error.__cause__).__name__ == "ForbiddenError"


@pytest.mark.backends
def test_an_unknown_access_key_is_refused_too(seaweedfs, unique_name):
    seaweedfs.create_table_bucket(unique_name)
    catalog = CatalogFactory.build("rest", **_sigv4_rest(seaweedfs, unique_name, **{"client.access-key-id": "nobody"}))
    refused = pytest.raises(CatalogAuthError, match="access key ID you provided does not exist")
    with refused, catalog_errors(spec_of(catalog)):
        catalog.list_namespaces()


@pytest.mark.backends
def test_an_unsigned_request_to_a_sigv4_catalog_says_no_credentials_were_sent(seaweedfs, unique_name):
    seaweedfs.create_table_bucket(unique_name)
    catalog = CatalogFactory.build("rest", **_sigv4_rest(seaweedfs, unique_name, **{"rest.sigv4-enabled": ""}))
    with pytest.raises(CatalogAuthError) as info, catalog_errors(spec_of(catalog)):
        catalog.list_namespaces()
    assert "(401 GET" in str(info.value) and "no credentials were sent" in str(info.value)


@pytest.mark.backends
def test_sigv4_without_any_aws_credentials_names_the_options_and_environment(
    seaweedfs, unique_name, tmp_path, monkeypatch
):
    seaweedfs.create_table_bucket(unique_name)
    _without_aws_credentials(monkeypatch)
    options = _sigv4_rest(seaweedfs, unique_name, **{"client.access-key-id": "", "client.secret-access-key": ""})
    with pytest.raises(CatalogAuthError) as info:  # GET /v1/config is signed too
        CatalogFactory.build("rest", **options)
    message = str(info.value)
    assert message.startswith(
        f"No AWS credentials were found to sign the requests to the catalog at {seaweedfs.iceberg_uri}"
    )
    for name in ("client.access-key-id", "client.secret-access-key", "AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"):
        assert name in message


@pytest.mark.backends
def test_glue_without_any_aws_credentials(moto_server, monkeypatch):
    _without_aws_credentials(monkeypatch)
    catalog = CatalogFactory.build("glue", **{"glue.endpoint": moto_server.endpoint, "glue.region": REGION})
    with pytest.raises(CatalogAuthError) as info, catalog_errors(spec_of(catalog)):
        catalog.list_namespaces()
    message = str(info.value)
    assert message.startswith(
        f"No AWS credentials were found to sign the requests to the catalog at {moto_server.endpoint}"
    )
    assert "glue.access-key-id" in message and "AWS_ACCESS_KEY_ID" in message


@pytest.fixture(scope="module")
def moto_checking_credentials(tmp_path_factory) -> Iterator[str]:
    """A moto server that checks credentials (IAM authentication on from the first request)."""
    (port,) = free_ports(1)
    binary = Path(sys.executable).parent / "moto_server"
    log = tmp_path_factory.mktemp("moto_auth") / "moto.log"
    env = {**os.environ, "INITIAL_NO_AUTH_ACTION_COUNT": "0"}
    with open(log, "wb") as out:
        process = subprocess.Popen(
            [str(binary), "-H", "127.0.0.1", "-p", str(port)],
            stdout=out,
            stderr=subprocess.STDOUT,
            env=env,
            start_new_session=True,
        )
    try:
        endpoint = f"http://127.0.0.1:{port}"
        wait_for_http(f"{endpoint}/moto-api/", process)
        yield endpoint
    finally:
        stop_process(process)


@pytest.mark.backends
def test_glue_refusing_the_credentials_names_the_glue_settings(moto_checking_credentials):
    catalog = CatalogFactory.build(
        "glue",
        **{
            "glue.endpoint": moto_checking_credentials,
            "glue.region": REGION,
            "glue.access-key-id": "AKIAUNKNOWNKEY000000",
            "glue.secret-access-key": "not-a-secret",
        },
    )
    with pytest.raises(CatalogAuthError) as info, catalog_errors(spec_of(catalog)):
        catalog.list_namespaces()
    message = str(info.value)
    assert message.startswith(f"The catalog at {moto_checking_credentials} refused the credentials (GetDatabases: ")
    assert "InvalidClientTokenId" in message and "<" not in message
    assert "glue.access-key-id" in message and "glue.region" in message and "not-a-secret" not in message


@pytest.mark.backends
def test_an_object_store_refusing_the_keys_or_out_of_reach(seaweedfs, unique_name, tmp_path):
    boto3.client("s3", **boto_kwargs(seaweedfs.s3_endpoint)).create_bucket(Bucket=unique_name)
    options = {"db_path": tmp_path / "c.db", "warehouse_dir": f"s3://{unique_name}/wh"}
    good = CatalogFactory.build("sqlite", **options, **seaweedfs.s3_properties())
    good.create_namespace("ns")
    good.create_table("ns.t", pa.schema([("a", pa.int64())])).append(pa.table({"a": [1]}))

    wrong_secret = {**seaweedfs.s3_properties(), "s3.secret-access-key": "not-the-secret"}
    catalog = CatalogFactory.build("sqlite", **options, **wrong_secret)
    with pytest.raises(CatalogAuthError) as info, catalog_errors(spec_of(catalog)):
        catalog.load_table("ns.t")
    message = str(info.value)
    assert message.startswith(f"The object store refused access to s3://{unique_name} (")
    assert "ACCESS_DENIED" in message and "s3.secret-access-key" in message and "not-the-secret" not in message

    port = _closed_port()
    closed = {**seaweedfs.s3_properties(), "s3.endpoint": f"http://127.0.0.1:{port}"}
    catalog = CatalogFactory.build("sqlite", **options, **closed)
    with pytest.raises(CatalogUnavailableError) as unreachable, catalog_errors(spec_of(catalog)):
        catalog.load_table("ns.t")
    assert str(unreachable.value).startswith(f"The object store at 127.0.0.1:{port} could not be reached (")
    assert "s3.endpoint" in str(unreachable.value)


# --- configuration: permanent ----------------------------------------------------------------------------


def test_a_db_path_that_is_not_an_sqlite_database_names_the_file(tmp_path):
    text_file = tmp_path / "notes.db"
    text_file.write_text("these are my notes, not a database\n" * 20)
    with pytest.raises(CatalogConfigError) as info:
        CatalogFactory.build("sqlite", db_path=text_file, warehouse_dir=tmp_path / "wh")
    message = str(info.value)
    assert message.startswith(f"The catalog database {text_file} is not an SQLite database (file is not a database)")
    assert "point the `db_path` option at the catalog's SQLite database file" in message
    assert text_file.read_text().startswith("these are my notes")  # left as it was
    assert isinstance(info.value, IcebergOpsError) and not info.value.transient


@pytest.mark.parametrize("access", ["read", "write", "create"])
def test_the_setting_is_named_where_the_catalog_was_described(tmp_path, access):
    text_file = tmp_path / "notes.db"
    text_file.write_text("these are my notes, not a database\n" * 20)
    before = text_file.read_bytes()
    project = tmp_path / "iceberg-ops.yaml"
    specs = {
        "the `db_path` option": from_options("sqlite", db_path=text_file, warehouse_dir=tmp_path / "wh"),
        f"`db_path:` under `catalog:` in {project}": from_file(
            {"kind": "sqlite", "db_path": "notes.db", "warehouse_dir": "wh"}, file=project, root=tmp_path
        ),
        "the `db_path` extra of Airflow connection 'lake'": from_connection(
            "lake", "iceberg_ops", extra={"kind": "sqlite", "db_path": str(text_file), "warehouse_dir": "/nowhere"}
        ),
    }
    for words, spec in specs.items():
        with pytest.raises(CatalogConfigError) as info:
            open_catalog(spec, access=access)
        assert f"is not an SQLite database (file is not a database); point {words} at" in str(info.value)
        assert info.value.endpoint == str(text_file)
    assert text_file.read_bytes() == before
    assert not (tmp_path / "wh").exists() or access == "create"


@pytest.mark.parametrize("kind", ["rest", "hive"])
def test_pyiceberg_messages_naming_its_own_flags_are_translated(kind, tmp_path, monkeypatch):
    monkeypatch.setenv("PYICEBERG_HOME", str(tmp_path))  # no .pyiceberg.yaml there
    monkeypatch.delenv(f"PYICEBERG_CATALOG__NOTHING_{kind.upper()}__URI", raising=False)
    with pytest.raises(CatalogConfigError) as info:
        CatalogFactory.build(kind, name=f"nothing_{kind}", timeout=5)
    message = str(info.value)
    assert "--uri" not in message
    assert "give the `uri` option" in message
    assert f"PYICEBERG_CATALOG__NOTHING_{kind.upper()}__URI" in message
    project = tmp_path / "iceberg-ops.yaml"
    spec = from_file({"kind": kind, "name": f"nothing_{kind}", "timeout": 5}, file=project, root=tmp_path)
    with pytest.raises(CatalogConfigError, match=f"give `uri:` under `catalog:` in {project}"):
        open_catalog(spec, access="read")


def test_any_option_of_pyicebergs_command_line_in_its_message_is_reworded_as_the_catalog_option():
    spec = from_options("glue", warehouse="s3://lake")
    error = translate(ValueError("Cannot write here, please provide --warehouse or --s3.endpoint"), spec, opening=True)
    assert isinstance(error, CatalogConfigError)
    assert "please provide the `warehouse` option or the `s3.endpoint` option." in str(error) and "--" not in str(error)


def test_an_address_the_http_client_cannot_read_is_not_repeated():
    """The client names what it took for the host: part of a password, when one holds an unencoded '/'."""
    import requests

    spec = from_options("rest", uri="http://client:s3cret@catalog.example/api")
    raised = requests.exceptions.InvalidURL("Failed to parse: 'client:TopSecretPart' is not a valid host")
    error = translate(raised, spec)
    assert isinstance(error, CatalogConfigError) and error.reason == "configuration"
    assert "TopSecretPart" not in str(error) and "s3cret" not in str(error)
    assert "percent-encode those characters in a user name or password" in str(error)


def test_a_path_parameter_of_the_address_is_in_no_message():
    uri = f"http://127.0.0.1:{_closed_port()}/api;token=S3CR3T-PARAM/more"
    spec = from_options("rest", uri=uri, timeout=2)
    with pytest.raises(CatalogUnavailableError) as info:
        open_catalog(spec, access="read")
    assert "S3CR3T" not in str(info.value) and "S3CR3T" not in spec.endpoint() and "S3CR3T" not in repr(spec)
    assert "(GET /api/more/v1/config" in str(info.value)  # the request, its path parameter left out
