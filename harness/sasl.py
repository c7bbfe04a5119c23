"""A broker whose clients log in with OAUTHBEARER (OIDC client credentials, tokens validated against
the provider's JWKS) and with GSSAPI (Kerberos, a real MIT KDC), next to a PLAINTEXT listener for
inter-broker traffic and the harness's set-up. One broker serves both: one start for both test files.

    with OidcProvider(workdir / "oidc") as oidc, Kdc(workdir / "kdc") as kdc:
        setup = sasl_setup(oidc, kdc)
        cluster = KafkaCluster(workdir, listeners=setup.listeners, broker_config=setup.broker_config,
                               jvm_options=setup.jvm_options).start()
        kafka = SaslKafka(cluster, oidc, kdc)
"""

from __future__ import annotations

import secrets
from dataclasses import dataclass, field

from pathlib import Path

from .broker import FAST_START_JVM_OPTIONS, Listener
from .kerberos import GSSAPI_LISTENER, SERVICE, Kdc, gssapi_client_properties, gssapi_listener
from .oidc import OAUTH_LISTENER, OidcProvider, oauth_broker_config, oauth_client_properties, oauth_listener

PLAIN_LISTENER = "PLAINTEXT"


@dataclass(frozen=True)
class SaslSetup:
    listeners: list[Listener]
    broker_config: dict[str, str]
    jvm_options: list[str]


def sasl_setup(oidc: OidcProvider, kdc: Kdc | None = None) -> SaslSetup:
    """The listeners, broker settings and JVM options; without a KDC, OAUTHBEARER only."""
    if kdc is None:
        # The global list must not offer GSSAPI (Kafka's default), which needs a JAAS entry of its own.
        return SaslSetup(
            [Listener(PLAIN_LISTENER, "PLAINTEXT"), oauth_listener()],
            {"sasl.enabled.mechanisms": "OAUTHBEARER", **oauth_broker_config(oidc)},
            [*FAST_START_JVM_OPTIONS, oidc.allowed_urls_option],
        )
    return SaslSetup(
        [Listener(PLAIN_LISTENER, "PLAINTEXT"), oauth_listener(), gssapi_listener(kdc)],
        {"sasl.enabled.mechanisms": "OAUTHBEARER,GSSAPI", "sasl.kerberos.service.name": SERVICE, **oauth_broker_config(oidc)},
        [*FAST_START_JVM_OPTIONS, oidc.allowed_urls_option, kdc.java_option],
    )


@dataclass
class SaslKafka:
    """A running cluster with an OAUTHBEARER listener (and a GSSAPI one with a KDC), and their clients."""

    cluster: object  # KafkaCluster
    oidc: OidcProvider
    kdc: Kdc | None = None
    client_id: str = "kt-oauth-client"
    # Distinctive and random: a leak check can search output for it without false hits.
    client_secret: str = field(default_factory=lambda: f"oauthSecret-{secrets.token_hex(10)}")

    def bootstrap(self, mechanism: str = "OAUTHBEARER") -> str:
        listener = GSSAPI_LISTENER if mechanism == "GSSAPI" else OAUTH_LISTENER
        return self.cluster.bootstrap_servers_for(listener)  # type: ignore[attr-defined]

    @property
    def plaintext_bootstrap(self) -> str:
        return self.cluster.bootstrap_servers_for(PLAIN_LISTENER)  # type: ignore[attr-defined]

    @property
    def tool_jvm_options(self) -> list[str]:
        """What Kafka's own tools need to log in from the same files (the allowed token URLs, the realm)."""
        return [self.oidc.allowed_urls_option, *([self.kdc.java_option] if self.kdc else [])]

    def kerberos_properties(self, style: str = "keytab", **kwargs: Path) -> dict[str, str]:
        """A Java ``--command-config`` for GSSAPI: ``keytab`` (useKeyTab) or ``ticket-cache`` (give ``ccache``)."""
        assert self.kdc is not None
        return gssapi_client_properties(self.kdc, style, **kwargs)

    def properties(self, **kwargs: str) -> dict[str, str]:
        """A Java ``--command-config`` for OAUTHBEARER; ``client_secret``/``token_url`` replace the real ones."""
        secret = kwargs.pop("client_secret", self.client_secret)
        return oauth_client_properties(self.oidc, self.client_id, secret, **kwargs)

    def run_tool(self, main_class: str, *args: str, timeout: float = 120):
        return self.cluster.run_tool(main_class, *args, timeout=timeout, jvm_options=self.tool_jvm_options)  # type: ignore[attr-defined]

    def secrets(self) -> list[str]:
        return [self.client_secret]
