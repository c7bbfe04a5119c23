"""SASL/OAUTHBEARER with OIDC client credentials (KIP-768): Java's keys mapped to what the two Python
clients take, the errors for what cannot map, and kafkatxn's token provider for kafka-python (fetch,
reuse, refresh before expiry), with a clock and a token endpoint given to it (no network here; the
integration tests fetch from a real OIDC provider: tests/integration/test_sasl_oauth.py)."""

from __future__ import annotations

import base64
import json
import re
from pathlib import Path
from urllib.parse import parse_qs

import pytest

from kafkatxn import config
from kafkatxn.config.sasl_oauth import ClientCredentials
from kafkatxn.errors import AuthenticationError, InputError, UsageError

HANDLER = "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginCallbackHandler"
MODULE = "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule"
SECRET = "oauthSecret-0123456789abcdef"
URL = "https://idp.example/oauth2/token"


def java_file(tmp_path: Path, *lines: str, jaas: str | None = None) -> Path:
    jaas = f'{MODULE} required clientId="kt-client" clientSecret="{SECRET}" scope="kafka";' if jaas is None else jaas
    text = [
        "security.protocol=SASL_SSL",
        "sasl.mechanism=OAUTHBEARER",
        f"sasl.login.callback.handler.class={HANDLER}",
        f"sasl.oauthbearer.token.endpoint.url={URL}",
        *([f"sasl.jaas.config={jaas}"] if jaas else []),
        *lines,
    ]
    path = tmp_path / "client.properties"
    path.write_text("\n".join(text) + "\n")
    path.chmod(0o600)
    return path


def settings_of(path: Path) -> dict[str, str]:
    return config.resolve("h:1", command_config=str(path)).settings


def test_a_java_oidc_file_becomes_librdkafkas_oidc_method_and_a_token_provider(tmp_path):
    path = java_file(tmp_path, "sasl.oauthbearer.scope.claim.name=scp", "sasl.login.read.timeout.ms=5000",
                     jaas=f'{MODULE} required clientId="kt-client" clientSecret="{SECRET}" scope="kafka" extension_cluster="lkc-1";')
    cfg = config.resolve("h:1", command_config=str(path))
    conf = cfg.librdkafka()
    assert {k: v for k, v in conf.items() if k.startswith("sasl.")} == {
        "sasl.mechanisms": "OAUTHBEARER",
        "sasl.oauthbearer.method": "oidc",
        "sasl.oauthbearer.token.endpoint.url": URL,
        "sasl.oauthbearer.client.id": "kt-client",
        "sasl.oauthbearer.client.secret": SECRET,
        "sasl.oauthbearer.scope": "kafka",
        "sasl.oauthbearer.extensions": "cluster=lkc-1",
    }  # the scope claim's name is kafkatxn's own: librdkafka refuses keys it does not know
    provider = cfg.kafka_python()["sasl_oauth_token_provider"]
    assert (provider.url, provider.client_id, provider.client_secret, provider.scope) == (URL, "kt-client", SECRET, "kafka")
    assert (provider.scope_claim, provider.extensions()) == ("scp", {"cluster": "lkc-1"})
    assert SECRET not in repr(provider)
    assert cfg.masked()["sasl.oauthbearer.client.secret"] == "******"
    config.check_settings_as_librdkafka(cfg.settings)


def test_kafka_4_properties_win_over_the_jaas_options_as_in_java(tmp_path):
    path = java_file(
        tmp_path, "sasl.oauthbearer.client.credentials.client.id=from-config",
        "sasl.oauthbearer.client.credentials.client.secret=config-secret", "sasl.oauthbearer.scope=other",
        "sasl.oauthbearer.jwt.retriever.class=org.apache.kafka.common.security.oauthbearer.ClientCredentialsJwtRetriever",
        jaas=f"{MODULE} required;",
    )
    got = settings_of(path)
    assert (got["sasl.oauthbearer.client.id"], got["sasl.oauthbearer.client.secret"], got["sasl.oauthbearer.scope"]) == (
        "from-config", "config-secret", "other"
    )
    path.write_text(path.read_text().replace(f"{MODULE} required;", f'{MODULE} required clientId="jaas-id" clientSecret="x";'))
    assert settings_of(path)["sasl.oauthbearer.client.id"] == "from-config"


def test_kafka_3s_old_callback_handler_name_and_librdkafka_keys_are_taken(tmp_path):
    old = "org.apache.kafka.common.security.oauthbearer.secured.OAuthBearerLoginCallbackHandler"
    path = java_file(tmp_path)
    path.write_text(path.read_text().replace(HANDLER, old))
    assert settings_of(path)["sasl.oauthbearer.method"] == "oidc"
    native = tmp_path / "native.properties"
    native.write_text(
        "security.protocol=SASL_SSL\nsasl.mechanisms=OAUTHBEARER\nsasl.oauthbearer.method=oidc\n"
        f"sasl.oauthbearer.client.id=kt\nsasl.oauthbearer.client.secret={SECRET}\nsasl.oauthbearer.token.endpoint.url={URL}\n"
    )
    native.chmod(0o600)
    assert settings_of(native)["sasl.oauthbearer.client.id"] == "kt"


@pytest.mark.parametrize("change, line, says", [
    # one line naming the key (and the line) to fix; never the secret
    ({"jaas": f'{MODULE} required clientId="kt-client";'}, 5,
     "OAUTHBEARER needs clientSecret in sasl.jaas.config (or sasl.oauthbearer.client.credentials.client.secret)"),
    ({"jaas": f'{MODULE} required clientSecret="{SECRET}";'}, 5, "OAUTHBEARER needs clientId in sasl.jaas.config"),
    ({"jaas": f'com.example.VaultLoginModule required clientId="kt" clientSecret="{SECRET}";'}, 5,
     "sasl.jaas.config login module com.example.VaultLoginModule is not supported"),
    ({"drop": "sasl.login.callback.handler.class"}, 4,
     f"OAUTHBEARER needs sasl.login.callback.handler.class={HANDLER}: without it Kafka's clients send unsecured test tokens"),
    ({"replace": (HANDLER, "com.example.MyHandler")}, 3,
     "sasl.login.callback.handler.class com.example.MyHandler is not supported (kafkatxn logs in with OIDC client credentials"),
    ({"drop": "sasl.oauthbearer.token.endpoint.url"}, 2, "OAUTHBEARER needs sasl.oauthbearer.token.endpoint.url"),
    ({"replace": (URL, "file:///var/run/token.jwt")}, 4, "must be the http(s) URL of a token endpoint"),
    ({"replace": ("sasl.mechanism=OAUTHBEARER", "sasl.mechanism=PLAIN")}, 5, "it needs sasl.mechanism=OAUTHBEARER"),
    ({"add": "sasl.login.refresh.window.factor=0.3"}, 6, "sasl.login.refresh.window.factor must be a number from 0.5 to 1.0"),
])
def test_what_cannot_be_followed_is_one_line_naming_the_key(tmp_path, change, line, says):
    path = java_file(tmp_path, *([change["add"]] if "add" in change else []), jaas=change.get("jaas"))
    text = path.read_text()
    if "drop" in change:
        text = "".join(t for t in text.splitlines(True) if not t.startswith(change["drop"]))
    if "replace" in change:
        text = text.replace(*change["replace"])
    path.write_text(text)
    with pytest.raises(UsageError) as refused:
        config.resolve("h:1", command_config=str(path))
    message = str(refused.value)
    assert message.startswith(f"{path}:{line}: "), message
    assert says in message and "\n" not in message and SECRET not in message


def test_the_client_secret_is_refused_on_the_command_line():
    with pytest.raises(InputError) as refused:
        config.resolve("h:1", overrides=[f"sasl.oauthbearer.client.secret={SECRET}"])
    assert "refused: secrets are not taken from the command line" in str(refused.value)
    assert SECRET not in str(refused.value)


# -- the token provider ----------------------------------------------------------------------------


def jwt(claims: dict) -> str:
    def part(value: dict) -> str:
        return base64.urlsafe_b64encode(json.dumps(value).encode()).decode().rstrip("=")

    return f"{part({'alg': 'RS256', 'kid': 'k'})}.{part(claims)}.c2lnbmF0dXJl"


class Endpoint:
    """A token endpoint as a function: records each request, answers with the next response."""

    def __init__(self, *answers: tuple[int, dict]):
        self.answers = list(answers)
        self.requests: list[tuple[str, dict, dict, float]] = []

    def __call__(self, url: str, body: bytes, headers: dict, timeout_s: float) -> tuple[int, bytes]:
        self.requests.append((url, parse_qs(body.decode()), headers, timeout_s))
        status, answer = self.answers.pop(0)
        return status, json.dumps(answer).encode()


class Clock:
    def __init__(self, now: float = 1_000_000.0):
        self.now = now

    def __call__(self) -> float:
        return self.now


def provider(endpoint: Endpoint, clock: Clock, **kwargs) -> ClientCredentials:
    return ClientCredentials(URL, "kt-client", SECRET, "kafka", post=endpoint, clock=clock, timeout_s=7, **kwargs)


def test_a_token_is_fetched_with_client_credentials_reused_and_refreshed_before_it_expires():
    clock = Clock()
    first, second = jwt({"sub": "kt-client", "exp": clock.now + 100}), jwt({"sub": "kt-client", "exp": clock.now + 200})
    endpoint = Endpoint((200, {"access_token": first, "expires_in": 100}), (200, {"access_token": second}))
    tokens = provider(endpoint, clock)
    assert tokens.token() == first
    url, form, headers, timeout_s = endpoint.requests[0]
    assert (url, form, timeout_s) == (URL, {"grant_type": ["client_credentials"], "scope": ["kafka"]}, 7)
    assert headers["Authorization"] == "Basic " + base64.b64encode(f"kt-client:{SECRET}".encode()).decode()
    clock.now += 79  # before 80% of its life: the same token, nothing asked
    assert tokens.token() == first and tokens.fetched == 1
    clock.now += 1  # 80% of 100 s
    assert tokens.token() == second and tokens.fetched == 2
    clock.now += 79
    assert tokens.token() == second and tokens.fetched == 2


def test_a_refused_client_is_one_line_naming_the_endpoint_and_the_client_never_the_secret():
    tokens = provider(Endpoint((401, {"error": "invalid_client", "error_description": "bad secret"})), Clock())
    with pytest.raises(AuthenticationError) as refused:
        tokens.token()
    assert str(refused.value) == (
        f"the OAuth token endpoint {URL} refused client kt-client: HTTP 401 invalid_client (check clientId, clientSecret and scope)"
    )


@pytest.mark.parametrize("answer, says", [
    ({"token_type": "Bearer"}, "answered without an access_token"),
    ({"access_token": "opaque-token"}, "is not a JWT"),
    ({"access_token": jwt({"exp": 2_000_000})}, "has no 'sub' claim (sasl.oauthbearer.sub.claim.name)"),
    ({"access_token": jwt({"sub": "kt", "exp": 2_000_000, "scope": 7})}, "has a malformed 'scope' claim"),
    ({"access_token": jwt({"sub": "kt"})}, "has no 'exp' claim"),
])
def test_a_token_kafkas_client_would_refuse_is_refused(answer, says):
    with pytest.raises(AuthenticationError, match=re.escape(says)):
        provider(Endpoint((200, answer)), Clock()).token()


def test_the_sub_claim_name_is_honoured():
    token = jwt({"client_id": "kt", "exp": 2_000_000})
    assert provider(Endpoint((200, {"access_token": token})), Clock(), sub_claim="client_id").token() == token


def test_kafka_pythons_oauthbearer_mechanism_takes_the_provider_once_registered_as_wire_does():
    """wire.py registers the provider's class with kafka-python's AbstractTokenProvider (its type check)."""
    from kafka.net.sasl.oauth import AbstractTokenProvider, SaslMechanismOAuth

    token = jwt({"sub": "kt", "exp": 2_000_000})
    tokens = provider(Endpoint((200, {"access_token": token})), Clock(), sasl_extensions={"cluster": "lkc-1"})
    AbstractTokenProvider.register(ClientCredentials)
    mechanism = SaslMechanismOAuth(sasl_oauth_token_provider=tokens)
    assert mechanism.auth_bytes() == f"n,,\x01auth=Bearer {token}\x01cluster=lkc-1\x01\x01".encode()
