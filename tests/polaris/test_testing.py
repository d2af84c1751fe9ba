"""iceberg_ops_provider.testing: FakeSession and FakeResponse driving PolarisPolicyClient without HTTP.

The first test is the module docstring's example, the one integrators copy.
"""

from __future__ import annotations

import json

import pytest
import requests

from iceberg_ops_provider.errors import PolarisError, PolarisNotFoundError, PolarisServerError, PolicyContentError
from iceberg_ops_provider.polaris import PolarisPolicyClient
from iceberg_ops_provider.testing import (
    FakeRequest,
    FakeResponse,
    FakeSession,
    UnexpectedRequestError,
    applicable_policies_page,
    error_response,
    policy_json,
    token_response,
)

BASE = "https://polaris.example/api/catalog"
APPLICABLE = "/polaris/v1/prod/applicable-policies"


def test_the_namespace_policy_applies():
    session = FakeSession()
    session.add(
        "GET",
        "/polaris/v1/prod/applicable-policies",
        applicable_policies_page(
            [policy_json("expire-7d", config={"max_snapshot_age_days": 7}, inherited=True, namespace=["sales"])]
        ),
    )
    client = PolarisPolicyClient("https://polaris.example/api/catalog", "prod", token="t", session=session)

    [policy] = client.applicable_policies("sales", "orders")

    assert policy.content.config["max_snapshot_age_days"] == 7
    assert session.requests[0].params == {"namespace": "sales", "target-name": "orders"}


def test_the_client_sends_what_polaris_expects_through_the_session():
    session = FakeSession().add("GET", APPLICABLE, applicable_policies_page([]))
    client = PolarisPolicyClient(BASE, "prod", token="tok", session=session, timeout=7, verify=False)

    client.applicable_policies(("finance", "q4"), "ledger", policy_type="system.snapshot-expiry")

    [sent] = session.requests
    assert sent.method == "GET" and sent.url == BASE + APPLICABLE
    assert sent.params == {
        "namespace": "finance\x1fq4",
        "target-name": "ledger",
        "policyType": "system.snapshot-expiry",
    }
    assert sent.headers["Authorization"] == "Bearer tok"
    assert (sent.timeout, sent.verify) == (7.0, False)


def test_routes_with_a_query_page_through_results():
    session = FakeSession(
        {
            ("GET", APPLICABLE): applicable_policies_page([policy_json("a")], next_page_token="2"),
            ("GET", APPLICABLE + "?pageToken=2"): applicable_policies_page(
                [policy_json("b", "system.data-compaction", enable=False)]
            ),
        }
    )
    client = PolarisPolicyClient(BASE, "prod", token="t", session=session, page_size=1)

    policies = client.applicable_policies()

    assert [(p.name, p.content.enable) for p in policies] == [("a", True), ("b", False)]
    assert [r.params for r in session.requests] == [{"pageSize": "1"}, {"pageSize": "1", "pageToken": "2"}]


def test_a_token_route_and_a_list_of_answers_drive_credentials_and_failures():
    session = FakeSession()
    session.add("POST", "/v1/oauth/tokens", token_response("fetched", expires_in=3600))
    session.add(
        "GET",
        APPLICABLE,
        [
            error_response(503, "busy", "ServiceUnavailableException", headers={"Retry-After": "0"}),
            applicable_policies_page([]),
        ],
    )
    client = PolarisPolicyClient(BASE, "prod", credential="id:secret", session=session, backoff=0)

    # Retries are urllib3's, beneath a requests.Session: a fake session sees each call once.
    with pytest.raises(PolarisServerError, match="ServiceUnavailableException: busy"):
        client.applicable_policies()
    assert client.applicable_policies() == []

    token_request = session.requests[0]
    assert token_request.data == {
        "grant_type": "client_credentials",
        "client_id": "id",
        "client_secret": "secret",
        "scope": "PRINCIPAL_ROLE:ALL",
    }
    assert [r.headers.get("Authorization") for r in session.requests[1:]] == ["Bearer fetched"] * 2
    with pytest.raises(UnexpectedRequestError, match="served all its 2 answers"):
        client.applicable_policies()


def test_a_callable_answer_sees_the_request():
    def by_namespace(request: FakeRequest) -> FakeResponse:
        if request.params.get("namespace") == "missing":
            return error_response(404, "Namespace does not exist: missing", "NoSuchNamespaceException")
        return FakeResponse(200, applicable_policies_page([policy_json("p", namespace=["sales"], inherited=False)]))

    session = FakeSession().add("GET", APPLICABLE, by_namespace)
    client = PolarisPolicyClient(BASE, "prod", token="t", session=session)

    assert [p.name for p in client.applicable_policies("sales")] == ["p"]
    with pytest.raises(PolarisNotFoundError, match="NoSuchNamespaceException"):
        client.applicable_policies("missing")


def test_exhausted_retries_and_malformed_answers_are_typed():
    session = FakeSession().add("GET", APPLICABLE, error_response(503, "down", "ServiceUnavailableException"))
    client = PolarisPolicyClient(BASE, "prod", token="t", session=session, max_retries=2, backoff=0)
    with pytest.raises(PolarisServerError, match="failed on its side: see") as info:
        client.applicable_policies()
    assert len(session.requests) == 1 and info.value.transient

    html = FakeResponse(200, text="<html>proxy</html>", headers={"content-type": "text/html"})
    session = FakeSession().add("GET", APPLICABLE, html)
    with pytest.raises(PolarisError, match="not JSON \\(text/html"):
        PolarisPolicyClient(BASE, "prod", token="t", session=session).applicable_policies()

    broken = applicable_policies_page([policy_json("p", content={"enable": "true"})])
    session = FakeSession().add("GET", APPLICABLE, broken)
    (policy,) = PolarisPolicyClient(BASE, "prod", token="t", session=session).applicable_policies()
    assert policy.content is None and "'enable' must be true or false" in policy.content_error
    session = FakeSession().add("GET", APPLICABLE, applicable_policies_page([{"content": "{}"}]))
    with pytest.raises(PolicyContentError, match="without a 'name' or 'policy-type'"):
        PolarisPolicyClient(BASE, "prod", token="t", session=session).applicable_policies()


def test_an_unmatched_request_names_itself_and_the_routes_known():
    session = FakeSession().add("GET", APPLICABLE, applicable_policies_page([])).add("DELETE", "/policies/x", {})
    client = PolarisPolicyClient(BASE, "prod", token="t", session=session)

    with pytest.raises(UnexpectedRequestError) as info:
        client.load_policy("sales", "expire")
    message = str(info.value)
    assert "GET /api/catalog/polaris/v1/prod/namespaces/sales/policies/expire" in message
    assert f"GET {APPLICABLE}; DELETE /policies/x" in message
    assert isinstance(info.value, AssertionError)


def test_routes_match_whole_path_segments_and_the_most_specific_wins():
    session = FakeSession()
    session.add("GET", "/policies", FakeResponse(200, {"which": "short"}))
    session.add("GET", "/sales/policies", FakeResponse(200, {"which": "long"}))
    session.add("GET", "/sales/policies?policyType=x", FakeResponse(200, {"which": "query"}))

    assert session.get("https://h/a/sales/policies").json() == {"which": "long"}
    assert session.get("https://h/a/sales/policies", params={"policyType": "x", "pageSize": "2"}).json() == {
        "which": "query"
    }
    assert session.get("https://h/a/other/policies").json() == {"which": "short"}
    with pytest.raises(UnexpectedRequestError):
        session.get("https://h/a/xpolicies")
    with pytest.raises(UnexpectedRequestError):
        session.post("https://h/a/sales/policies")


def test_fake_response_behaves_like_requests():
    answer = FakeResponse(201, {"a": 1}, headers={"X-Thing": "1"})
    assert answer.ok and answer.json() == {"a": 1} and json.loads(answer.text) == {"a": 1}
    assert answer.headers["content-type"] == "application/json" and answer.headers["x-thing"] == "1"

    failed = FakeResponse(500, text="oops")
    assert not failed.ok
    with pytest.raises(ValueError):
        failed.json()
    with pytest.raises(ValueError):
        FakeResponse(204).json()

    session = FakeSession().add("PUT", "/x", FakeResponse(204))
    served = session.put("https://h/x?y=1", json={"k": "v"})
    assert served.url == "https://h/x?y=1" and served.status_code == 204
    assert session.requests[0].json == {"k": "v"} and session.requests[0].params == {"y": "1"}


def test_a_route_answering_something_else_is_reported():
    session = FakeSession().add("GET", "/x", lambda request: 42)
    with pytest.raises(UnexpectedRequestError, match="is a int"):
        session.get("https://h/x")


def test_policy_json_builds_what_polaris_sends():
    payload = policy_json("p", "system.orphan-file-removal", enable=False, version=3, description="d")
    assert payload == {
        "policy-type": "system.orphan-file-removal",
        "inheritable": True,
        "name": "p",
        "description": "d",
        "content": json.dumps({"version": "2025-02-03", "enable": False, "config": {}}),
        "version": 3,
    }
    assert policy_json("p", content='{"enable": true}')["content"] == '{"enable": true}'
    assert policy_json("p", inherited=True)["namespace"] == []


def test_from_catalog_properties_passes_tls_settings_and_headers_to_the_session(tmp_path):
    ca = tmp_path / "ca.pem"
    ca.write_text("not checked until a real connection")
    properties = {
        "uri": BASE,
        "warehouse": "prod",
        "token": "t",
        "ssl": {"cabundle": str(ca), "client": {"cert": "/c.pem", "key": "/k.pem"}},
        "header.Polaris-Realm": "realm-2",
        "rest-page-size": "50",
    }
    session = FakeSession().add("GET", APPLICABLE, applicable_policies_page([]))

    PolarisPolicyClient.from_catalog_properties(properties, session=session).applicable_policies()

    [sent] = session.requests
    assert (sent.verify, sent.cert) == (str(ca), ("/c.pem", "/k.pem"))
    assert sent.headers["Polaris-Realm"] == "realm-2" and sent.params == {"pageSize": "50"}
    insecure = PolarisPolicyClient.from_catalog_properties(
        {**properties, "ssl": {"cabundle": "false"}}, session=session
    )
    insecure.applicable_policies()
    assert session.requests[-1].verify is False


def test_redirects_are_refused_not_followed_and_odd_tokens_or_urls_never_reach_a_message():
    from iceberg_ops_provider.errors import PolarisAuthError, PolarisRequestError
    from iceberg_ops_provider.testing import token_response

    moved = FakeResponse(307, headers={"Location": "https://elsewhere.example/steal"})
    session = FakeSession().add("POST", "/v1/oauth/tokens", moved)
    client = PolarisPolicyClient(BASE, "prod", credential="id:Secret-42", session=session, backoff=0)
    with pytest.raises(PolarisError, match="redirect \\(HTTP 307\\)") as info:
        client.applicable_policies()
    assert "Secret-42" not in str(info.value)
    assert session.requests[0].allow_redirects is False

    forged = "abc\r\nX-Injected: 1"
    session = FakeSession().add("POST", "/v1/oauth/tokens", token_response(forged))
    client = PolarisPolicyClient(BASE, "prod", credential="id:Secret-42", session=session, backoff=0)
    with pytest.raises(PolarisAuthError, match="cannot hold") as info:
        client.applicable_policies()
    assert "abc" not in str(info.value) and "Injected" not in str(info.value)

    with pytest.raises(PolarisRequestError, match="user name or password") as info:
        PolarisPolicyClient("https://root:Pa55word@polaris.example/api/catalog", "prod", token="t")
    assert "Pa55word" not in str(info.value)


def test_a_garbled_answer_is_transient():
    garbled = requests.exceptions.ChunkedEncodingError("connection cut mid-body")
    session = FakeSession().add("GET", APPLICABLE, [garbled])
    client = PolarisPolicyClient(BASE, "prod", token="t", session=session, backoff=0)
    with pytest.raises(PolarisServerError, match="garbled") as info:
        client.applicable_policies()
    assert info.value.transient
