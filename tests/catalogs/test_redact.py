"""Secrets in a catalog's URIs and properties, found by what they are: the password of a URI's user info
(unencoded ``/ [ # : @`` included), its query values, and properties whose name says they hold a secret.

``split_url``, ``redact_url`` and ``display_url`` never raise, whatever text they are given; text that
is not a URI comes back unchanged. A spec keeps its secrets apart from what may be shown.
"""

from __future__ import annotations

import random
import string

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from iceberg_ops_provider.catalogs import from_options, redact_url
from iceberg_ops_provider.catalogs.redact import (
    MASK,
    display_url,
    secret_forms,
    split_secrets,
    split_url,
)

PASSWORDS = ["p/ss", "p[ss", "p]ss", "p#ss", "p:ss", "p@ss", "p%2Fss", "p@ss/w#rd:[x]", "/", "@", "#", ":", "[", "a b"]


@pytest.mark.parametrize("password", PASSWORDS)
@pytest.mark.parametrize(
    ("host", "path"),
    [
        ("db.example:5432", "/lake"),
        ("db.example", ""),
        ("[::1]:5432", "/lake"),
        ("[2001:db8::7]", "/lake"),
        ("[fe80::1%25eth0]:5432", "/a/b"),
        ("127.0.0.1:5432", "/lake"),
    ],
)
def test_a_password_is_found_whatever_it_holds(password, host, path):
    url = f"postgresql+psycopg://root:{password}@{host}{path}"

    parts = split_url(url)

    assert parts is not None
    assert (parts.scheme, parts.user, parts.password, parts.host, parts.path) == (
        "postgresql+psycopg",
        "root",
        password,
        host,
        path,
    )
    assert redact_url(url) == f"postgresql+psycopg://root:{MASK}@{host}{path}"
    assert display_url(url) == f"postgresql+psycopg://root@{host}{path}"
    shown, secrets = split_secrets({"uri": url})
    assert shown == {"uri": redact_url(url)} and secrets == {"uri": url}
    assert password in secret_forms(secrets)


@pytest.mark.parametrize(
    ("text", "redacted", "displayed"),
    [
        # IPv6 hosts, with and without user info
        ("http://[::1]:8181/api/catalog", "http://[::1]:8181/api/catalog", "http://[::1]:8181/api/catalog"),
        ("http://user:pw@[::1]:8181/api", "http://user:***@[::1]:8181/api", "http://user@[::1]:8181/api"),
        ("https://[2001:db8::1]/v1?x=1", "https://[2001:db8::1]/v1?x=***", "https://[2001:db8::1]/v1"),
        # query values: every one of them hidden, the names kept
        ("https://h/x?apikey=abc&x=1", "https://h/x?apikey=***&x=***", "https://h/x"),
        ("https://h/x?apikey=abc#frag", "https://h/x?apikey=***", "https://h/x"),
        ("https://h/x?flag&token=t", "https://h/x?***&token=***", "https://h/x"),  # a bare item may be a secret
        (
            "postgresql+psycopg://u:p@ss/@h:5432/db?sslmode=require&password=zz",
            "postgresql+psycopg://u:***@h:5432/db?sslmode=***&password=***",
            "postgresql+psycopg://u@h:5432/db",
        ),
        # path parameters (``;token=``): values hidden like a query's, left out of what is displayed
        ("http://h:1/api;token=SEMI-SECRET", "http://h:1/api;token=***", "http://h:1/api"),
        ("http://h/a;x=1;y=2/b?q=3", "http://h/a;x=***;y=***?q=***", "http://h/a"),
        # a user without a password; nothing secret at all
        ("http://user@h/x", "http://user@h/x", "http://user@h/x"),
        ("thrift://metastore:9083", "thrift://metastore:9083", "thrift://metastore:9083"),
        (
            "sqlite:////data/iceberg_catalog.db",
            "sqlite:////data/iceberg_catalog.db",
            "sqlite:////data/iceberg_catalog.db",
        ),
        ("HTTP://u:pw@h", "HTTP://u:***@h", "HTTP://u@h"),
        # not a URI: unchanged
        ("not a url", "not a url", "not a url"),
        # user info without a scheme, or before a host this module does not recognise: hidden all the same
        ("user:pw@host", "user:***@host", "user@host"),
        ("http:/user:pw@h:1/api", "http:***@h:1/api", "http@h:1/api"),
        ("1http://user:pw@h/api", "1http:***@h/api", "1http@h/api"),
        ("http://user:pw@catalög:1/api", "http://user:***@catalög:1/api", "http://user@catalög:1/api"),
        ("http://user:pw@[::1:1/api", "http://user:***@[::1:1/api", "http://user@[::1:1/api"),
        ("http://user:pw@my host:1/api", "http://user:***@my host:1/api", "http://user@my host:1/api"),
        ("http://user%3Apw@h/api", "http://:***@h/api", "http://h/api"),
        ("someone@example.com", "someone@example.com", "someone@example.com"),
        ("http://h:1/api%3Btoken=pw", "http://h:1/api;token=***", "http://h:1/api"),
        ("http://h/x?x=1&pw", "http://h/x?x=***&***", "http://h/x"),
        ("", "", ""),
        ("://x", "://x", "://x"),
        ("/data/catalog.db", "/data/catalog.db", "/data/catalog.db"),
        (
            "arn:aws:s3tables:us-east-1:1:bucket/b",
            "arn:aws:s3tables:us-east-1:1:bucket/b",
            "arn:aws:s3tables:us-east-1:1:bucket/b",
        ),
        (
            "s3tables.us-east-1.amazonaws.com/iceberg",
            "s3tables.us-east-1.amazonaws.com/iceberg",
            "s3tables.us-east-1.amazonaws.com/iceberg",
        ),
    ],
)
def test_redaction_table(text, redacted, displayed):
    assert redact_url(text) == redacted
    assert display_url(text) == displayed


def test_properties_are_split_by_what_they_are():
    properties = {
        "uri": "https://id:pw-1@catalog.example/api?apikey=key-2",
        "credential": "client-id:client-secret-3",
        "s3.secret-access-key": "s3-secret-4",
        "header.Authorization": "Bearer header-5",
        "auth": {"type": "oauth2", "oauth2": {"client_secret": "nested-6", "client_id": "visible-id"}},
        "warehouse": "s3://bucket/warehouse",
        "s3.endpoint": "http://127.0.0.1:9000",
        "n": 5,
    }

    shown, secrets = split_secrets(properties)

    assert shown == {
        "uri": "https://id:***@catalog.example/api?apikey=***",
        "credential": MASK,
        "s3.secret-access-key": MASK,
        "header.Authorization": MASK,
        "auth": {"type": "oauth2", "oauth2": {"client_secret": MASK, "client_id": "visible-id"}},
        "warehouse": "s3://bucket/warehouse",
        "s3.endpoint": "http://127.0.0.1:9000",
        "n": 5,
    }
    assert set(secrets) == {"uri", "credential", "s3.secret-access-key", "header.Authorization", "auth"}
    assert {**shown, **secrets} == properties
    forms = secret_forms(secrets)
    for secret in ("pw-1", "key-2", "client-secret-3", "s3-secret-4", "Bearer header-5", "nested-6"):
        assert secret in forms
    assert "client-id:client-secret-3" in forms and "client-id%3Aclient-secret-3" in forms
    assert not any("catalog.example" in form or "bucket" in form for form in forms)


def test_a_spec_shows_no_secret():
    uri = "https://user:p@ss/w#rd@catalog.example/api?token=tok-1"
    spec = from_options("rest", uri=uri, credential="id:sec-2", **{"s3.secret-access-key": "sec-3"})

    assert spec.properties["uri"] == "https://user:***@catalog.example/api?token=***"
    assert spec.properties["credential"] == MASK and spec.properties["s3.secret-access-key"] == MASK
    assert spec.pyiceberg_properties()["uri"] == uri and spec.pyiceberg_properties()["credential"] == "id:sec-2"
    assert spec.endpoint() == "https://user@catalog.example/api"
    shown = repr(spec) + str(spec.describe())
    for secret in ("p@ss/w#rd", "w#rd", "tok-1", "sec-2", "sec-3"):
        assert secret not in shown
    assert {"p@ss/w#rd", "tok-1", "sec-2", "sec-3"} <= set(spec.secret_values())


# --- never raises ------------------------------------------------------------------------------------------

URL_CHARACTERS = string.ascii_letters + string.digits + ":/?#[]@!$&'()*+,;=%-._~ \t\n\\\"<>^`{|}" + "é€\x00\U0001f600"


def _random_texts(count: int) -> list[str]:
    generator = random.Random(20260614)
    prefixes = ["", "http://", "https://", "postgresql+psycopg://", "sqlite:///", "a://", "h:", "//", "x+y.z-1://"]
    texts = []
    for _ in range(count):
        body = "".join(generator.choice(URL_CHARACTERS) for _ in range(generator.randint(0, 60)))
        texts.append(generator.choice(prefixes) + body)
    return texts


def _never_raises(text: str) -> None:
    parts = split_url(text)
    redacted = redact_url(text)
    displayed = display_url(text)
    assert isinstance(redacted, str) and isinstance(displayed, str)
    if parts is None:
        assert redacted == text and displayed == text
    elif parts.password:
        assert f":{MASK}@" in redacted
    shown, secrets = split_secrets({"uri": text, "nested": {"uri": text}})
    assert set(shown) == {"uri", "nested"}
    secret_forms(secrets)


def test_redaction_never_raises_on_seeded_random_text():
    for text in _random_texts(600):
        _never_raises(text)


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.one_of(
        st.text(),
        st.builds(
            lambda scheme, rest: f"{scheme}://{rest}",
            st.from_regex(r"[A-Za-z][A-Za-z0-9+.-]{0,8}", fullmatch=True),
            st.text(),
        ),
        st.builds(lambda rest: f"http://{rest}", st.text(alphabet=st.sampled_from(list(URL_CHARACTERS)))),
    )
)
def test_redaction_never_raises(text):
    _never_raises(text)


@settings(max_examples=300, deadline=None)
@given(
    user=st.from_regex(r"[A-Za-z0-9._~-]{1,10}", fullmatch=True),
    password=st.text(
        alphabet=st.sampled_from(list(string.ascii_letters + string.digits + "/[]#:@%?&=!$;+ ~-._")), min_size=1
    ),
    host=st.sampled_from(["db.example", "db.example:5432", "[::1]:5432", "[2001:db8::7]", "10.0.0.1"]),
    path=st.sampled_from(["", "/", "/lake", "/api/catalog"]),
    query=st.sampled_from(["", "?sslmode=require", "?apikey=k&x=1"]),
)
def test_a_password_of_any_characters_is_never_shown(user, password, host, path, query):
    url = f"postgresql://{user}:{password}@{host}{path}{query}"
    masked_query = "" if not query else "?" + "&".join(f"{pair.split('=')[0]}={MASK}" for pair in query[1:].split("&"))

    assert split_url(url).password == password
    assert redact_url(url) == f"postgresql://{user}:{MASK}@{host}{path}{masked_query}"
    assert display_url(url) == f"postgresql://{user}@{host}{path}"


def test_path_parameter_values_are_secrets_of_their_uri():
    shown, secrets = split_secrets({"uri": "http://h:1/api;token=SEMI-SECRET"})
    assert shown == {"uri": "http://h:1/api;token=***"}
    assert "SEMI-SECRET" in secret_forms(secrets)
