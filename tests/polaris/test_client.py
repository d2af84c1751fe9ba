"""PolarisPolicyClient over real HTTP against the loopback Polaris policy server."""

from __future__ import annotations

import json
import logging
import socket
import time
import warnings
from urllib.parse import parse_qs

import pytest
import requests

from iceberg_ops_provider.errors import (
    PolarisAuthError,
    PolarisConflictError,
    PolarisError,
    PolarisForbiddenError,
    PolarisNotFoundError,
    PolarisRequestError,
    PolarisServerError,
    PolicyContentError,
)
from iceberg_ops_provider.polaris import PolarisPolicyClient, PolicyContent, PolicyType
from tests.polaris.conftest import CATALOG, CLIENT_ID, CLIENT_SECRET
from tests.polaris.server import PolarisServer, iter_seen
from tests.polaris.tls import TlsFiles

EXPIRY = PolicyType.SNAPSHOT_EXPIRY.value
COMPACTION = PolicyType.DATA_COMPACTION.value
CREDENTIAL = f"{CLIENT_ID}:{CLIENT_SECRET}"


def content(enable: bool = True, **config: object) -> str:
    return json.dumps({"version": "2025-02-03", "enable": enable, "config": config})


def make_client(polaris: PolarisServer, **kwargs: object) -> PolarisPolicyClient:
    options: dict[str, object] = {"credential": CREDENTIAL, "backoff": 0.01, "timeout": 5}
    options.update(kwargs)
    return PolarisPolicyClient(polaris.base_url, CATALOG, **options)  # type: ignore[arg-type]


def applicable_requests(polaris: PolarisServer) -> list:
    return list(iter_seen(polaris, "/applicable-policies"))


# --- applicable policies and inheritance -------------------------------------------------------------


@pytest.fixture
def estate(polaris: PolarisServer) -> PolarisServer:
    """Catalog-wide expiry, a namespace compaction, and a table-level expiry that overrides the catalog's."""
    polaris.add_table(CATALOG, "sales.orders")
    polaris.add_table(CATALOG, "sales.refunds")
    polaris.put_policy(CATALOG, "ops", "expire-30d", EXPIRY, content(max_snapshot_age_days=30))
    polaris.put_policy(CATALOG, "sales", "expire-2d", EXPIRY, content(max_snapshot_age_days=2))
    polaris.put_policy(CATALOG, "sales", "compact", COMPACTION, content(target_file_size_bytes=1024))
    polaris.attach(CATALOG, "ops", "expire-30d", "catalog")
    polaris.attach(CATALOG, "sales", "compact", "namespace", "sales")
    polaris.attach(CATALOG, "sales", "expire-2d", "table-like", "sales.orders")
    return polaris


def test_the_nearest_attachment_wins_per_type_with_inherited_and_defining_namespace(estate, client):
    policies = {policy.policy_type: policy for policy in client.applicable_policies("sales", "orders")}

    assert set(policies) == {EXPIRY, COMPACTION}
    expiry = policies[EXPIRY]
    assert (expiry.name, expiry.inherited, expiry.namespace) == ("expire-2d", False, ("sales",))
    assert expiry.content is not None and expiry.content.config["max_snapshot_age_days"] == 2
    compaction = policies[COMPACTION]
    assert (compaction.name, compaction.inherited, compaction.namespace) == ("compact", True, ("sales",))

    other = {policy.policy_type: policy for policy in client.applicable_policies("sales", "refunds")}
    assert (other[EXPIRY].name, other[EXPIRY].inherited, other[EXPIRY].namespace) == ("expire-30d", True, ("ops",))

    on_namespace = {policy.name: policy.inherited for policy in client.applicable_policies(("sales",))}
    assert on_namespace == {"expire-30d": True, "compact": False}
    assert [(p.name, p.inherited) for p in client.applicable_policies()] == [("expire-30d", False)]


def test_a_policy_type_filter_is_sent_and_also_applied_to_what_polaris_answers(estate, client):
    [policy] = client.applicable_policies("sales", "orders", policy_type=EXPIRY)
    assert policy.name == "expire-2d"
    assert applicable_requests(estate)[-1].query["policyType"] == EXPIRY
    # Polaris ignores a policyType it does not know and answers every type: the client filters.
    assert client.applicable_policies("sales", "orders", policy_type="custom.unknown") == []
    assert len(client.applicable_policies("sales", "orders")) == 2


def test_every_page_is_followed_with_page_size_and_page_token(estate, polaris):
    with make_client(polaris, page_size=1) as paged:
        policies = paged.applicable_policies("sales", "orders")

    assert sorted(policy.name for policy in policies) == ["compact", "expire-2d"]
    sent = [seen.query for seen in applicable_requests(polaris)]
    assert sent == [
        {"namespace": "sales", "target-name": "orders", "pageSize": "1"},
        {"namespace": "sales", "target-name": "orders", "pageSize": "1", "pageToken": "page-1"},
    ]


def test_pages_the_server_imposes_are_followed_too(polaris, client):
    for index in range(5):
        polaris.put_policy(CATALOG, "ops", f"p{index}", EXPIRY, content())
    polaris.max_page_size = 2

    assert [name for _, name in client.list_policies("ops")] == ["p0", "p1", "p2", "p3", "p4"]
    assert len(list(iter_seen(polaris, "/namespaces/ops/policies"))) == 3


def test_a_server_repeating_a_page_token_is_an_error_not_an_endless_loop(estate, polaris):
    polaris.repeat_page_token = True
    with make_client(polaris, page_size=1) as paged, pytest.raises(PolarisError) as info:
        paged.applicable_policies("sales", "orders")

    assert "page token 'page-1' a second time" in str(info.value)
    assert len(applicable_requests(polaris)) == 2


def test_multi_level_namespaces_travel_joined_with_the_unit_separator(polaris, client):
    namespace = ("finance", "q.4 2026")  # a dot and a space inside a level: only the tuple form can say it
    polaris.add_table(CATALOG, (*namespace, "transactions"))

    created = client.create_policy(namespace, "keep-3", EXPIRY, {"enable": True, "config": {"max_ref_age_days": 3}})
    client.attach_policy(namespace, "keep-3", "table-like", (*namespace, "transactions"))
    [applied] = client.applicable_policies(namespace, "transactions")

    assert created.version == 0
    assert (applied.name, applied.namespace, applied.inherited) == ("keep-3", namespace, False)
    assert client.load_policy(namespace, "keep-3").content == created.content
    assert client.list_policies(namespace) == [(namespace, "keep-3")]
    [create] = [seen for seen in polaris.requests if seen.method == "POST" and seen.path.endswith("/policies")]
    assert "/namespaces/finance%1Fq.4%202026/policies" in create.path
    assert applicable_requests(polaris)[-1].query["namespace"] == "finance\x1fq.4 2026"
    assert applicable_requests(polaris)[-1].query["target-name"] == "transactions"


@pytest.mark.parametrize(
    ("call", "match"),
    [
        (lambda c: c.applicable_policies(None, "orders"), "needs its namespace"),
        (lambda c: c.applicable_policies("", "orders"), "is empty"),
        (lambda c: c.applicable_policies("a..b"), "empty or non-text level"),
        (lambda c: c.applicable_policies(("a", "")), "empty or non-text level"),
        (lambda c: c.applicable_policies(("a\x1fb",)), "0x1F"),
        (lambda c: c.applicable_policies(42), "must be 'a.b'"),
        (lambda c: c.applicable_policies("sales", ""), "non-empty name"),
        (lambda c: c.applicable_policies("sales", policy_type=""), "policy type"),
        (lambda c: c.load_policy("sales", "bad name"), "Invalid policy name 'bad name'"),
        (lambda c: c.attach_policy("sales", "p", "view", "sales.v"), "target_type must be one of"),
        (lambda c: c.attach_policy("sales", "p", "catalog", "sales"), "catalog target takes no path"),
        (lambda c: c.attach_policy("sales", "p", "table-like", "orders"), "namespace levels followed by"),
        (lambda c: c.attach_policy("sales", "p", "namespace", "sales", {"k": 1}), "strings to strings"),
        (lambda c: c.create_policy("sales", "p", EXPIRY, 42), "content must be a mapping"),
    ],
)
def test_bad_arguments_are_refused_before_anything_is_sent(polaris, client, call, match):
    with pytest.raises(PolarisRequestError, match=match):
        call(client)
    assert polaris.requests == []


# --- create, load, update, attach, detach, drop ------------------------------------------------------


def test_a_policy_round_trip_with_content_encoded_exactly_once(polaris, client):
    polaris.add_table(CATALOG, "sales.orders")

    created = client.create_policy(
        "sales", "expire", EXPIRY, PolicyContent(enable=True, config={"min_snapshot_to_keep": 3}), "keep three"
    )
    sent = json.loads(next(s for s in polaris.requests if s.method == "POST" and "/policies" in s.path).body)
    assert isinstance(sent["content"], str) and json.loads(sent["content"])["config"] == {"min_snapshot_to_keep": 3}
    assert (created.version, created.description, created.inheritable) == (0, "keep three", True)

    updated = client.update_policy("sales", created, content={"enable": False})
    assert updated.version == 1 and updated.content is not None and updated.content.enable is False
    assert updated.description == "keep three"  # Polaris replaces both fields: the old description is sent back
    assert client.load_policy("sales", "expire") == updated

    client.attach_policy("sales", "expire", "table-like", "sales.orders", {"reason": "audit"})
    client.attach_policy("sales", "expire", "table-like", ("sales", "orders"))  # attaching again is allowed
    assert [p.name for p in client.applicable_policies("sales", "orders")] == ["expire"]
    client.detach_policy("sales", "expire", "table-like", "sales.orders")
    assert client.applicable_policies("sales", "orders") == []
    with pytest.raises(PolarisNotFoundError, match="NoSuchMappingException"):
        client.detach_policy("sales", "expire", "table-like", "sales.orders")

    client.drop_policy("sales", "expire")
    assert client.list_policies("sales") == []


def test_a_stale_update_is_a_conflict_that_says_to_reload(polaris, client):
    polaris.add_namespace(CATALOG, "sales")
    first = client.create_policy("sales", "expire", EXPIRY, {"enable": True})
    client.update_policy("sales", first, description="now")

    with pytest.raises(PolarisConflictError) as info:
        client.update_policy("sales", first, description="stale")
    error = info.value
    assert (error.status, error.error_type, error.transient) == (409, "PolicyVersionMismatchException", True)
    assert "load it again and retry" in str(error)


def test_a_second_policy_of_one_type_on_one_entity_is_a_conflict(polaris, client):
    polaris.add_namespace(CATALOG, "sales")
    client.create_policy("sales", "a", EXPIRY, {"enable": True})
    client.create_policy("sales", "b", EXPIRY, {"enable": False})
    client.attach_policy("sales", "a", "namespace", "sales")

    with pytest.raises(PolarisConflictError, match="PolicyMappingAlreadyExistsException") as info:
        client.attach_policy("sales", "b", "namespace", "sales")
    assert "detach it first" in str(info.value)
    assert "POLICY_ATTACH" not in str(info.value)  # privileges are only named for a 403

    with pytest.raises(PolarisConflictError, match=r"AlreadyExistsException.*pick another name"):
        client.create_policy("sales", "a", EXPIRY, {"enable": True})


def test_dropping_an_attached_policy_needs_detach_all(polaris, client):
    polaris.add_namespace(CATALOG, "sales")
    client.create_policy("sales", "a", EXPIRY, {"enable": True})
    client.attach_policy("sales", "a", "catalog")

    with pytest.raises(PolarisRequestError, match=r"PolicyInUseException.*detach_all=True"):
        client.drop_policy("sales", "a")
    client.drop_policy("sales", "a", detach_all=True)

    assert client.applicable_policies() == []
    drops = [seen.query for seen in polaris.requests if seen.method == "DELETE"]
    assert drops == [{"detach-all": "false"}, {"detach-all": "true"}]


def test_content_is_checked_before_sending_and_polaris_refusals_are_typed(polaris, client):
    polaris.add_namespace(CATALOG, "sales")
    with pytest.raises(PolicyContentError, match="'enable' must be true or false"):
        client.create_policy("sales", "bad", EXPIRY, {"enable": "true"})
    with pytest.raises(PolicyContentError, match="encoded twice"):
        client.create_policy("sales", "bad", EXPIRY, json.dumps(content()))
    assert polaris.requests == []

    with pytest.raises(PolarisRequestError, match=r"Unknown policy type: custom\.thing") as info:
        client.create_policy("sales", "custom", "custom.thing", {"anything": 1})
    assert info.value.status == 400


def test_a_malformed_stored_policy_is_a_clear_content_error_and_does_not_hide_the_others(polaris, client):
    polaris.add_table(CATALOG, "sales.orders")
    polaris.put_policy(CATALOG, "sales", "broken", EXPIRY, '{"enable": "yes", "config": {}}')
    polaris.attach(CATALOG, "sales", "broken", "table-like", "sales.orders")
    polaris.put_policy(CATALOG, "sales", "fine", "system.data-compaction")
    polaris.attach(CATALOG, "sales", "fine", "namespace", "sales")

    by_name = {policy.name: policy for policy in client.applicable_policies("sales", "orders")}
    assert by_name["broken"].content is None and by_name["fine"].content is not None
    assert "Policy 'broken'" in by_name["broken"].content_error
    assert "'enable' must be true or false" in by_name["broken"].content_error
    assert by_name["fine"].content_error is None
    with pytest.raises(PolicyContentError, match="Policy 'broken'"):
        client.load_policy("sales", "broken")


# --- authentication --------------------------------------------------------------------------------


def test_client_credentials_are_posted_form_encoded_and_one_token_serves_many_calls(estate, client):
    client.applicable_policies("sales", "orders")
    client.applicable_policies("sales", "refunds")

    [token_request] = list(iter_seen(estate, "/v1/oauth/tokens"))
    assert token_request.headers["Content-Type"] == "application/x-www-form-urlencoded"
    assert parse_qs(token_request.body.decode()) == {
        "grant_type": ["client_credentials"],
        "client_id": [CLIENT_ID],
        "client_secret": [CLIENT_SECRET],
        "scope": ["PRINCIPAL_ROLE:ALL"],
    }
    [token] = estate.tokens_issued
    assert {seen.headers["Authorization"] for seen in applicable_requests(estate)} == {f"Bearer {token}"}


def test_a_token_is_replaced_before_it_expires(estate):
    estate.token_lifetime = 2  # refreshed when half of it has run out
    with make_client(estate) as short_lived:
        short_lived.applicable_policies("sales", "orders")
        time.sleep(1.1)
        [first] = estate.tokens_issued
        assert estate.token_valid(first)
        short_lived.applicable_policies("sales", "orders")

    assert len(estate.tokens_issued) == 2
    assert applicable_requests(estate)[-1].headers["Authorization"] == f"Bearer {estate.tokens_issued[1]}"
    assert all(seen.headers["Authorization"] != "" for seen in applicable_requests(estate))


def test_a_refused_token_is_fetched_again_once(estate, client):
    client.applicable_policies("sales", "orders")
    estate.revoke_tokens()
    assert len(client.applicable_policies("sales", "orders")) == 2
    assert len(estate.tokens_issued) == 2

    estate.fail_next(2, 401, body="", path="/applicable-policies")
    with pytest.raises(PolarisAuthError) as info:
        client.applicable_policies("sales", "orders")
    assert len(estate.tokens_issued) == 3  # one fetch after the first 401, none after the second
    assert info.value.status == 401


def test_a_static_token_is_sent_as_is_and_a_refused_one_says_what_to_check(estate):
    token = estate.issue_token()
    with PolarisPolicyClient(estate.base_url, CATALOG, token=token) as static:
        assert len(static.applicable_policies("sales", "orders")) == 2
    assert applicable_requests(estate)[-1].headers["Authorization"] == f"Bearer {token}"
    assert estate.tokens_issued == []

    estate.revoke_tokens()
    with PolarisPolicyClient(estate.base_url, CATALOG, token=token) as static, pytest.raises(PolarisAuthError) as info:
        static.applicable_policies("sales", "orders")
    message = str(info.value)
    assert "answered HTTP 401 (no body)" in message and "a static bearer token" in message
    assert "/applicable-policies?namespace=sales&target-name=orders" in message
    assert token not in message
    assert len(applicable_requests(estate)) == 2  # a static token is not fetched again


def test_a_wrong_secret_names_the_client_and_token_endpoint_but_never_the_secret(polaris):
    wrong = "wrong-secret-77aa"
    with make_client(polaris, credential=f"{CLIENT_ID}:{wrong}") as bad, pytest.raises(PolarisAuthError) as info:
        bad.applicable_policies()
    message = str(info.value)
    assert "unauthorized_client: The client is not authorized" in message
    assert f"client id '{CLIENT_ID}'" in message and polaris.token_url in message
    assert wrong not in message and wrong not in repr(bad)
    assert not isinstance(info.value, PolarisForbiddenError)


def test_a_refused_scope_says_which_scopes_polaris_takes(polaris):
    with make_client(polaris, scope="catalog") as bad, pytest.raises(PolarisAuthError, match="PRINCIPAL_ROLE:ALL"):
        bad.load_policy("sales", "p")


@pytest.mark.parametrize("credential", ["no-colon-secret", ":only-secret", "only-id:"])
def test_a_malformed_credential_is_refused_without_echoing_it(polaris, credential):
    with pytest.raises(PolarisRequestError, match="client_id:client_secret") as info:
        make_client(polaris, credential=credential)
    assert credential.strip(":") not in str(info.value)


def test_secrets_and_tokens_never_reach_the_logs_or_repr(estate, client, caplog):
    caplog.set_level(logging.DEBUG)
    estate.fail_next(1, 503, retry_after="0", path="/applicable-policies")
    client.applicable_policies("sales", "orders")
    estate.revoke_tokens()
    client.applicable_policies("sales", "orders")

    assert len(estate.tokens_issued) == 2 and "retrying" in caplog.text
    for secret in (CLIENT_SECRET, *estate.tokens_issued):
        assert secret not in caplog.text
        assert secret not in repr(client)


# --- retries, timeouts, connections -----------------------------------------------------------------


def test_429_and_503_are_retried_and_retry_after_is_honoured(estate, client):
    estate.fail_next(1, 429, retry_after="1", path="/applicable-policies")
    estate.fail_next(1, 503, path="/applicable-policies")
    started = time.monotonic()
    assert len(client.applicable_policies("sales", "orders")) == 2
    assert time.monotonic() - started >= 0.9
    assert len(applicable_requests(estate)) == 3


def test_retry_after_is_capped_by_max_backoff(estate):
    estate.fail_next(1, 429, retry_after="3600", path="/applicable-policies")
    started = time.monotonic()
    with make_client(estate, max_backoff=0.05) as capped:
        capped.applicable_policies("sales", "orders")
    assert time.monotonic() - started < 3


@pytest.mark.parametrize(("status", "words"), [(503, "failed on its side through 3 attempts"), (429, "throttled")])
def test_retries_end_with_a_server_error(estate, status, words):
    estate.fail_next(10, status, retry_after="0", path="/applicable-policies")
    with make_client(estate, max_retries=2) as limited, pytest.raises(PolarisServerError, match=words) as info:
        limited.applicable_policies("sales", "orders")
    assert info.value.status == status and info.value.transient
    assert len(applicable_requests(estate)) == 3


def test_a_500_is_not_retried(estate, client):
    estate.fail_next(1, 500, path="/applicable-policies")
    with pytest.raises(PolarisServerError, match="ServiceFailureException: injected 500"):
        client.applicable_policies("sales", "orders")
    assert len(applicable_requests(estate)) == 1


def test_a_dropped_connection_is_retried_for_reads_but_not_for_changes(estate, client):
    estate.drop_next(1, path="/applicable-policies")
    assert len(client.applicable_policies("sales", "orders")) == 2
    assert len(applicable_requests(estate)) == 2

    estate.drop_next(1, path="/mappings")
    with pytest.raises(PolarisServerError, match="may or may not have been applied"):
        client.attach_policy("sales", "compact", "table-like", "sales.refunds")
    assert len(list(iter_seen(estate, "/mappings"))) == 1


def test_a_503_to_a_change_is_retried_since_polaris_did_not_process_it(estate, client):
    estate.fail_next(1, 503, retry_after="0", path="/mappings")
    client.attach_policy("sales", "compact", "table-like", "sales.refunds")
    assert len(list(iter_seen(estate, "/mappings"))) == 2


def test_a_dropped_token_request_is_retried_since_it_changes_nothing(estate, client):
    estate.drop_next(1, path="/oauth/tokens")
    assert len(client.applicable_policies("sales", "orders")) == 2
    assert len(list(iter_seen(estate, "/oauth/tokens"))) == 2


def test_a_timed_out_read_is_not_sent_again(estate):
    estate.stall_next(1, seconds=2, path="/applicable-policies")
    with make_client(estate, timeout=0.3) as impatient, pytest.raises(PolarisServerError, match="no answer"):
        impatient.applicable_policies("sales", "orders")
    assert len(applicable_requests(estate)) == 1


def test_a_change_that_cannot_connect_is_retried_and_not_called_uncertain():
    with socket.socket() as probe:  # a port nothing listens on: nothing was sent
        probe.bind(("127.0.0.1", 0))
        base_url = f"http://127.0.0.1:{probe.getsockname()[1]}/api/catalog"
    unreachable = PolarisPolicyClient(base_url, CATALOG, token="t", max_retries=2, backoff=0.01)
    with unreachable, pytest.raises(PolarisServerError, match="failed after 3 attempt") as info:
        unreachable.attach_policy("sales", "compact", "table-like", "sales.refunds")
    assert "may or may not" not in str(info.value)


def test_a_session_passed_in_retries_polaris_calls_and_nothing_else(estate):
    with requests.Session() as own:
        estate.fail_next(1, 503, retry_after="0", path="/applicable-policies")
        with make_client(estate, session=own) as mounted:
            assert len(mounted.applicable_policies("sales", "orders")) == 2
        assert own.get_adapter(estate.base_url + "/x").max_retries.total == 3
        assert own.get_adapter("http://elsewhere.example/").max_retries.total == 0


def test_an_unreachable_polaris_names_the_base_url():
    with socket.socket() as probe:  # a port nothing listens on
        probe.bind(("127.0.0.1", 0))
        base_url = f"http://127.0.0.1:{probe.getsockname()[1]}/api/catalog"
    unreachable = PolarisPolicyClient(base_url, CATALOG, token="t", max_retries=1, backoff=0.01)
    with unreachable, pytest.raises(PolarisServerError, match="failed after 2 attempt") as info:
        unreachable.applicable_policies()
    assert f"reachable at {base_url}" in str(info.value)


def test_a_stalled_polaris_fails_within_the_timeout(estate):
    estate.stall_next(1, seconds=5, path="/applicable-policies")
    started = time.monotonic()
    with make_client(estate, timeout=0.3) as impatient, pytest.raises(PolarisServerError, match=r"within 0\.3 s"):
        impatient.applicable_policies("sales", "orders")
    assert time.monotonic() - started < 3


# --- typed errors ---------------------------------------------------------------------------------


def test_not_found_errors_say_what_to_check(estate, client):
    with pytest.raises(PolarisNotFoundError, match=r"NoSuchPolicyException.*Check the policy name") as info:
        client.load_policy("sales", "absent")
    assert isinstance(info.value, LookupError) and info.value.status == 404
    assert "/namespaces/sales/policies/absent" in info.value.url

    with pytest.raises(PolarisNotFoundError, match="NoSuchTableException"):
        client.applicable_policies("sales", "absent")
    with pytest.raises(PolarisNotFoundError, match="NoSuchNamespaceException"):
        client.list_policies("absent")

    wrong_catalog = PolarisPolicyClient(estate.base_url, "nope", credential=CREDENTIAL)
    with wrong_catalog, pytest.raises(PolarisNotFoundError) as info:
        wrong_catalog.applicable_policies()
    message = str(info.value)
    assert "catalog name 'nope'" in message and "ENABLE_POLICY_STORE" in message


def test_a_forbidden_call_names_the_privilege_and_catalog(estate, client):
    estate.forbidden = True
    with pytest.raises(PolarisForbiddenError) as info:
        client.applicable_policies("sales", "orders")
    message = str(info.value)
    assert "TABLE_READ_PROPERTIES" in message and f"catalog {CATALOG!r}" in message
    assert isinstance(info.value, PolarisAuthError) and info.value.status == 403

    with pytest.raises(PolarisForbiddenError, match="NAMESPACE_ATTACH_POLICY"):
        client.attach_policy("sales", "compact", "namespace", "sales")


def test_a_disabled_policy_store_says_which_flag_to_set(estate, client):
    estate.policy_store_enabled = False
    with pytest.raises(PolarisError, match="set the realm feature flag ENABLE_POLICY_STORE") as info:
        client.applicable_policies()
    assert info.value.status == 406


def test_a_422_is_a_request_error(estate, client):
    error = {"error": {"message": "bad", "type": "UnprocessableEntityException", "code": 422}}
    estate.fail_next(1, 422, body=error, path="/applicable-policies")
    with pytest.raises(PolarisRequestError, match="UnprocessableEntityException: bad"):
        client.applicable_policies()


def test_an_html_page_instead_of_polaris_is_reported_as_such(estate, client):
    page = "<!DOCTYPE html><html><body>Sign in</body></html>"
    estate.fail_next(1, 200, body=page, content_type="text/html", path="/applicable-policies")
    with pytest.raises(PolarisError, match="not JSON \\(text/html, starting '<!DOCTYPE html>") as info:
        client.applicable_policies()
    assert "login page" in str(info.value) and info.value.status == 200

    estate.fail_next(1, 502, body=page, content_type="text/html", path="/applicable-policies")
    with pytest.raises(PolarisServerError, match="a body that is not JSON"):
        client.applicable_policies()


def test_json_of_another_shape_is_an_error(estate, client):
    estate.fail_next(1, 200, body={"policies": []}, path="/applicable-policies")
    with pytest.raises(PolarisError, match="without a 'applicable-policies' list"):
        client.applicable_policies()


# --- TLS ---------------------------------------------------------------------------------------------


@pytest.fixture
def https_polaris(tls_files: TlsFiles):
    with PolarisServer(tls=(str(tls_files.certificate), str(tls_files.key))) as server:
        server.add_catalog(CATALOG)
        server.add_client(CLIENT_ID, CLIENT_SECRET)
        yield server


def test_tls_is_verified_by_default_and_a_private_ca_is_refused_clearly(https_polaris):
    with make_client(https_polaris) as default, pytest.raises(PolarisError) as info:
        default.applicable_policies()
    message = str(info.value)
    assert "TLS connection" in message and "verify='/path/ca.pem'" in message
    assert "CERTIFICATE_VERIFY_FAILED" in message
    assert not isinstance(info.value, PolarisServerError)  # not transient: retrying cannot help
    assert https_polaris.requests == []


def test_a_ca_bundle_makes_tls_work(https_polaris, tls_files):
    with make_client(https_polaris, verify=str(tls_files.ca)) as trusting:
        assert trusting.applicable_policies() == []
    assert len(https_polaris.tokens_issued) == 1


def test_verify_false_works_and_warns(https_polaris, caplog):
    caplog.set_level(logging.WARNING, logger="iceberg_ops_provider.polaris")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # urllib3's InsecureRequestWarning
        with make_client(https_polaris, verify=False) as careless:
            assert careless.applicable_policies() == []
    assert "TLS certificate verification is off" in caplog.text


def test_from_catalog_properties_reads_pyiceberg_rest_properties(https_polaris, tls_files):
    properties = {
        "uri": https_polaris.base_url,
        "warehouse": CATALOG,
        "credential": CREDENTIAL,
        "scope": "PRINCIPAL_ROLE:ALL",
        "ssl": {"cabundle": str(tls_files.ca)},
        "header.Polaris-Realm": "default-realm",
        "timeout": "5",
    }
    with PolarisPolicyClient.from_catalog_properties(properties, backoff=0.01) as built:
        assert built.applicable_policies() == []
        assert (built.catalog, built.token_url) == (CATALOG, f"{https_polaris.base_url}/v1/oauth/tokens")
    assert {seen.headers.get("Polaris-Realm") for seen in https_polaris.requests} == {"default-realm"}

    flat = {"uri": https_polaris.base_url, "warehouse": "s3://bucket/wh", "ssl.cabundle": str(tls_files.ca)}
    with pytest.raises(PolarisRequestError, match="Pass catalog="):
        PolarisPolicyClient.from_catalog_properties(flat)
    with PolarisPolicyClient.from_catalog_properties(flat, catalog=CATALOG, credential=CREDENTIAL) as overridden:
        assert overridden.applicable_policies() == []
    with pytest.raises(PolarisRequestError, match="no 'uri'"):
        PolarisPolicyClient.from_catalog_properties({"warehouse": CATALOG})
    with pytest.raises(PolarisRequestError, match="not a REST catalog's properties"):
        PolarisPolicyClient.from_catalog_properties({"uri": "sqlite:////lake/catalog.db", "warehouse": "file:///w"})
    with pytest.raises(PolarisRequestError, match="'timeout' must be a number"):
        PolarisPolicyClient.from_catalog_properties({**properties, "timeout": "soon"})


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"base_url": "polaris:8181/api/catalog"}, "base_url must be"),
        ({"catalog": ""}, "catalog must name"),
        ({"verify": "/nonexistent/ca.pem"}, "does not exist"),
        ({"verify": 1}, "verify must be"),
        ({"timeout": 0}, "timeout must be"),
        ({"timeout": float("nan")}, "timeout must be"),
        ({"backoff": float("inf")}, "backoff must be"),
        ({"max_retries": -1}, "max_retries must be"),
        ({"page_size": 0}, "page_size must be"),
        ({"backoff": -1}, "backoff must be"),
        ({"token": " "}, "token is empty"),
        ({"credential": CREDENTIAL, "scope": ""}, "scope is empty"),
    ],
)
def test_constructor_arguments_are_checked(kwargs, match):
    options = {"base_url": "https://polaris.example/api/catalog", "catalog": CATALOG, **kwargs}
    with pytest.raises(PolarisRequestError, match=match):
        PolarisPolicyClient(**options)


def test_repr_hides_the_token_and_secret():
    with PolarisPolicyClient("https://p.example/api/catalog", CATALOG, token="tok-123", credential=CREDENTIAL) as both:
        text = repr(both)
    assert "tok-123" not in text and CLIENT_SECRET not in text and f"client_id={CLIENT_ID!r}" in text


def test_an_unreadable_retry_after_leaves_the_wait_to_the_backoff(estate, client):
    estate.fail_next(1, 503, retry_after="soon", path="/applicable-policies")
    assert len(client.applicable_policies("sales", "orders")) == 2
    assert len(applicable_requests(estate)) == 2


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ('{"enable": "true"}', "Invalid boolean value: true"),
        ('{"enable": true, "version": "2024-01-01"}', "Invalid policy version: 2024-01-01"),
        ('{"enable": true, "extra": 1}', 'Unrecognized field "extra", not marked as ignorable'),
        ('{"version": "2025-02-03"}', "Missing required creator property 'enable'"),
    ],
)
def test_the_server_refuses_content_as_polaris_does_and_so_does_the_client(polaris, content, message):
    polaris.add_namespace(CATALOG, "sales")
    answer = requests.post(
        f"{polaris.base_url}/polaris/v1/{CATALOG}/namespaces/sales/policies",
        json={"name": "p", "type": EXPIRY, "content": content},
        headers={"Authorization": f"Bearer {polaris.issue_token()}"},
        timeout=5,
    )
    assert answer.status_code == 400
    assert answer.json()["error"] == {"message": message, "type": "InvalidPolicyException", "code": 400}
    with pytest.raises(PolicyContentError):
        PolicyContent.parse(EXPIRY, content)
