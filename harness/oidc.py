"""An OIDC provider for the OAUTHBEARER tests, and a broker listener that validates its tokens.

    with OidcProvider(workdir / "oidc") as oidc:             # NAV's mock-oauth2-server, from Maven Central
        listener = oauth_listener(oidc)                       # SASL_PLAINTEXT, OAUTHBEARER, JWKS-validated
        cluster = KafkaCluster(..., listeners=[Listener(), listener], broker_config=oauth_broker_config(oidc),
                               jvm_options=[*FAST_START_JVM_OPTIONS, oidc.allowed_urls_option])

The provider is no.nav.security:mock-oauth2-server (maintained by the Norwegian Labour and Welfare
Administration, released monthly, Apache-2.0): a real OAuth 2.0 / OIDC server (Nimbus OAuth SDK)
that serves the client-credentials grant, a JWKS endpoint and one signing key per issuer, run here
with the JDK the brokers use, so CI needs no container runtime and no Python package of its own.
The PyPI candidates did not fit: oidc-provider-mock serves only the authorization-code grant.
It accepts any client secret (it checks that the client authenticates, not with what), so a refused
login is tested with a token from an issuer the broker does not trust (:attr:`OidcProvider.untrusted_token_url`).

Kafka 4.x reads token and JWKS URLs only when ``-Dorg.apache.kafka.sasl.oauthbearer.allowed.urls``
lists them (a JVM system property, CVE-2025-27817): brokers and Kafka's tools get
:attr:`OidcProvider.allowed_urls_option`.
"""

from __future__ import annotations

import json
import os
import subprocess
import time
import urllib.request
from pathlib import Path

from .broker import KafkaHarnessError, Listener, _free_ports, _java, _parent_death_signal_prefix
from .jars import ensure_artifact_jars
from .services import ServiceProcess

MOCK_OAUTH2_SERVER = ("no.nav.security", "mock-oauth2-server", "2.3.0")
MAIN_CLASS = "no.nav.security.mock.oauth2.StandaloneMockOAuth2ServerKt"
LOOPBACK = "127.0.0.1"

ISSUER = "kafka"  # tokens the broker trusts
UNTRUSTED_ISSUER = "elsewhere"  # another issuer of the same server: its own key, its own `iss`
AUDIENCE = "kafka-broker"
SCOPE = "kafka"
OAUTH_LISTENER = "OAUTH"

LOGIN_MODULE = "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule"
LOGIN_CALLBACK_HANDLER = "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginCallbackHandler"
VALIDATOR_CALLBACK_HANDLER = "org.apache.kafka.common.security.oauthbearer.OAuthBearerValidatorCallbackHandler"
ALLOWED_URLS_PROPERTY = "org.apache.kafka.sasl.oauthbearer.allowed.urls"

_JVM_OPTIONS = ("-Xmx128m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1", "-Xshare:auto")


def _token_callback(issuer: str, expiry_s: int) -> dict:
    # sub is the client id, as an IdP's service accounts usually are; the broker's principal is User:<client id>.
    return {
        "issuerId": issuer,
        "tokenExpiry": expiry_s,
        "requestMappings": [
            {"requestParam": "grant_type", "match": "client_credentials",
             "claims": {"sub": "${clientId}", "aud": [AUDIENCE], "scope": SCOPE}},
        ],
    }


class OidcProvider(ServiceProcess):
    """mock-oauth2-server on a free loopback port, with the trusted and an untrusted issuer."""

    def __init__(self, workdir: Path, token_expiry_s: int = 300):
        self.workdir = Path(workdir)
        self.token_expiry_s = token_expiry_s
        self.port: int | None = None
        self._process: subprocess.Popen | None = None

    def _url(self, issuer: str, path: str) -> str:
        return f"http://{LOOPBACK}:{self.port}/{issuer}/{path}"

    @property
    def issuer(self) -> str:
        return f"http://{LOOPBACK}:{self.port}/{ISSUER}"

    @property
    def token_url(self) -> str:
        return self._url(ISSUER, "token")

    @property
    def untrusted_token_url(self) -> str:
        return self._url(UNTRUSTED_ISSUER, "token")

    @property
    def jwks_url(self) -> str:
        return self._url(ISSUER, "jwks")

    @property
    def allowed_urls_option(self) -> str:
        urls = [self.jwks_url, self.token_url, self.untrusted_token_url]
        return f"-D{ALLOWED_URLS_PROPERTY}={','.join(urls)}"

    @property
    def log(self) -> Path:
        return self.workdir / "oidc.log"

    def start(self, timeout: float = 60) -> "OidcProvider":
        libs = ensure_artifact_jars(*MOCK_OAUTH2_SERVER)
        self.workdir.mkdir(parents=True, exist_ok=True)
        [self.port] = _free_ports(1)
        config = {
            "interactiveLogin": False,
            "httpServer": "NettyWrapper",
            "tokenCallbacks": [_token_callback(ISSUER, self.token_expiry_s), _token_callback(UNTRUSTED_ISSUER, self.token_expiry_s)],
        }
        env = {**os.environ, "SERVER_HOSTNAME": LOOPBACK, "SERVER_PORT": str(self.port), "JSON_CONFIG": json.dumps(config)}
        with open(self.log, "ab") as log:
            self._process = subprocess.Popen(
                [*_parent_death_signal_prefix(), _java(), *_JVM_OPTIONS, "-cp", f"{libs}/*", MAIN_CLASS],
                env=env, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
            )
        deadline = time.monotonic() + timeout
        while True:
            if self._process.poll() is not None:
                raise KafkaHarnessError(f"the OIDC provider exited with {self._process.returncode}:\n{self.log.read_text()[-3000:]}")
            try:
                with urllib.request.urlopen(self.jwks_url, timeout=1) as answer:
                    if answer.status == 200:
                        return self
            except OSError:
                pass
            if time.monotonic() > deadline:
                self.stop()
                raise KafkaHarnessError(f"the OIDC provider did not serve {self.jwks_url} within {timeout:g}s")
            time.sleep(0.2)


def oauth_listener(name: str = OAUTH_LISTENER) -> Listener:
    """A SASL_PLAINTEXT listener offering OAUTHBEARER, validating tokens with Kafka's JWKS validator."""
    return Listener(
        name, "SASL_PLAINTEXT",
        {
            "sasl.enabled.mechanisms": "OAUTHBEARER",
            "oauthbearer.sasl.jaas.config": f"{LOGIN_MODULE} required;",
            "oauthbearer.sasl.server.callback.handler.class": VALIDATOR_CALLBACK_HANDLER,
        },
    )


def oauth_broker_config(oidc: OidcProvider) -> dict[str, str]:
    """What the validator checks: the signature (JWKS), the audience and the issuer."""
    return {
        "sasl.oauthbearer.jwks.endpoint.url": oidc.jwks_url,
        "sasl.oauthbearer.expected.audience": AUDIENCE,
        "sasl.oauthbearer.expected.issuer": oidc.issuer,
    }


def oauth_client_properties(oidc: OidcProvider, client_id: str, client_secret: str, *, token_url: str | None = None) -> dict[str, str]:
    """A Java ``--command-config`` for OIDC client credentials (KIP-768), as Kafka's docs write it."""
    return {
        "security.protocol": "SASL_PLAINTEXT",
        "sasl.mechanism": "OAUTHBEARER",
        "sasl.login.callback.handler.class": LOGIN_CALLBACK_HANDLER,
        "sasl.oauthbearer.token.endpoint.url": token_url or oidc.token_url,
        "sasl.jaas.config": f'{LOGIN_MODULE} required clientId="{client_id}" clientSecret="{client_secret}" scope="{SCOPE}";',
    }
