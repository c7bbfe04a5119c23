"""A broker whose clients log in with OAUTHBEARER (OIDC client credentials, tokens validated against
the provider's JWKS), next to a PLAINTEXT listener for inter-broker traffic and the harness's set-up.

    with OidcProvider(workdir / "oidc") as oidc:
        setup = sasl_setup(oidc)
        cluster = KafkaCluster(workdir, listeners=setup.listeners, broker_config=setup.broker_config,
                               jvm_options=setup.jvm_options).start()
        kafka = SaslKafka(cluster, oidc)
"""

from __future__ import annotations

import secrets
from dataclasses import dataclass, field

from .broker import FAST_START_JVM_OPTIONS, Listener
from .oidc import OAUTH_LISTENER, OidcProvider, oauth_broker_config, oauth_client_properties, oauth_listener

PLAIN_LISTENER = "PLAINTEXT"


@dataclass(frozen=True)
class SaslSetup:
    listeners: list[Listener]
    broker_config: dict[str, str]
    jvm_options: list[str]


def sasl_setup(oidc: OidcProvider) -> SaslSetup:
    return SaslSetup(
        listeners=[Listener(PLAIN_LISTENER, "PLAINTEXT"), oauth_listener()],
        # The global list must not offer GSSAPI (Kafka's default), which needs a JAAS entry of its own.
        broker_config={"sasl.enabled.mechanisms": "OAUTHBEARER", **oauth_broker_config(oidc)},
        jvm_options=[*FAST_START_JVM_OPTIONS, oidc.allowed_urls_option],
    )


@dataclass
class SaslKafka:
    """A running cluster with an OAUTHBEARER listener, the OIDC provider, and one OAuth client."""

    cluster: object  # KafkaCluster
    oidc: OidcProvider
    client_id: str = "kt-oauth-client"
    # Distinctive and random: a leak check can search output for it without false hits.
    client_secret: str = field(default_factory=lambda: f"oauthSecret-{secrets.token_hex(10)}")

    def bootstrap(self, mechanism: str = "OAUTHBEARER") -> str:
        return self.cluster.bootstrap_servers_for(OAUTH_LISTENER)  # type: ignore[attr-defined]

    @property
    def plaintext_bootstrap(self) -> str:
        return self.cluster.bootstrap_servers_for(PLAIN_LISTENER)  # type: ignore[attr-defined]

    @property
    def tool_jvm_options(self) -> list[str]:
        """What Kafka's own tools need to log in from the same files (the allowed token URLs)."""
        return [self.oidc.allowed_urls_option]

    def properties(self, mechanism: str = "OAUTHBEARER", **kwargs: str) -> dict[str, str]:
        """A Java ``--command-config`` for ``mechanism``; ``client_secret``/``token_url`` replace the real ones."""
        secret = kwargs.pop("client_secret", self.client_secret)
        return oauth_client_properties(self.oidc, self.client_id, secret, **kwargs)

    def run_tool(self, main_class: str, *args: str, timeout: float = 120):
        return self.cluster.run_tool(main_class, *args, timeout=timeout, jvm_options=self.tool_jvm_options)  # type: ignore[attr-defined]

    def secrets(self) -> list[str]:
        return [self.client_secret]
