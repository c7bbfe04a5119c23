"""The settings each Kafka client gets: librdkafka's (confluent-kafka) and kafka-python's keyword
arguments, from one :class:`ConnectionConfig`."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Mapping

from kafkatxn.config.properties import GSSAPI, KAFKATXN_ONLY_KEYS, OAUTHBEARER, SASL_MECHANISMS, check_kerberos, check_oauth, mask
from kafkatxn.config.kerberos import kafka_python_arguments, librdkafka_refusal
from kafkatxn.errors import UsageError

DEFAULT_TIMEOUT_MS = 30_000

# librdkafka key -> the kafka-python argument carrying the same setting as it is. (kafka-python 3.0
# has no ssl_cadata: ssl.ca.pem, like the other in-memory PEM keys, goes into its ssl_context.)
KAFKA_PYTHON_ARGUMENTS = {
    "sasl.mechanisms": "sasl_mechanism",
    "sasl.username": "sasl_plain_username",
    "sasl.password": "sasl_plain_password",
    "ssl.ca.location": "ssl_cafile",
    "ssl.certificate.location": "ssl_certfile",
    "ssl.key.location": "ssl_keyfile",
    "ssl.key.password": "ssl_password",
}


@dataclass
class ConnectionConfig:
    bootstrap_servers: str
    settings: dict[str, str] = field(default_factory=dict)
    timeout_ms: int = DEFAULT_TIMEOUT_MS
    profile: str | None = None
    sources: dict[str, str] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)  # for people, on stderr (e.g. a secrets file others can read)
    spark_checkpoints: tuple[str, ...] = ()  # the profile's Spark queries (spark_readers: NAME=PATH), read beside the groups
    spark_writers: tuple[str, ...] = ()  # their exactly-once writers (NAME=APPLICATION/QUERY[@LEDGER_TOPIC])

    @property
    def timeout_s(self) -> float:
        return self.timeout_ms / 1000

    @property
    def librdkafka_logs_in(self) -> bool:
        """Whether confluent-kafka can log in with these settings (its wheels have no GSSAPI)."""
        return self.settings.get("sasl.mechanisms") != GSSAPI

    def librdkafka(self, *, need: str = "", **extra: str | int | bool) -> dict:
        """Settings for confluent-kafka clients, with the deadline applied to every request. Asked as
        a client is built: where confluent-kafka cannot log in (GSSAPI), the usage error names
        ``need``, what the client was for."""
        if not self.librdkafka_logs_in:
            raise UsageError(librdkafka_refusal(need))
        conf: dict = {"bootstrap.servers": self.bootstrap_servers, "client.id": "kafkatxn"}
        conf.update((k, v) for k, v in self.settings.items() if k not in KAFKATXN_ONLY_KEYS)
        # Within librdkafka's ranges (it refuses the client otherwise); the deadline still ends the command.
        conf.setdefault("socket.timeout.ms", min(max(self.timeout_ms, 10), 300_000))
        conf.setdefault("socket.connection.setup.timeout.ms", min(max(self.timeout_ms, 1000), 2_147_483_647))
        # librdkafka logs connection failures to stderr by default; we report them as one line instead.
        conf.setdefault("log_level", 0)
        conf.update(extra)
        return conf

    def kafka_python(self) -> dict:
        """The same settings as kafka-python keyword arguments."""
        s = self.settings
        kw: dict = {
            "bootstrap_servers": self.bootstrap_servers.split(","),
            "client_id": s.get("client.id", "kafkatxn"),
            "request_timeout_ms": max(self.timeout_ms, 1000),
            "security_protocol": s.get("security.protocol", "PLAINTEXT"),
        }
        for key, argument in KAFKA_PYTHON_ARGUMENTS.items():
            if key in s:
                kw[argument] = s[key]
        if s.get("sasl.mechanisms") == OAUTHBEARER:  # the token provider kafka-python asks at each login
            from kafkatxn.config.sasl_oauth import ClientCredentials  # OAUTHBEARER's alone: not every start's

            kw["sasl_oauth_token_provider"] = ClientCredentials.from_settings(s, self.timeout_s)
        if s.get("sasl.mechanisms") == GSSAPI:
            kw.update(kafka_python_arguments(s))
        if s.get("ssl.endpoint.identification.algorithm") == "none":
            kw["ssl_check_hostname"] = False
        if any(key in s for key in ("ssl.ca.pem", "ssl.certificate.pem", "ssl.key.pem")):
            # In-memory TLS material (inline PEM, JKS/PKCS12 stores read by config.stores): kafka-python
            # reads only files, so it gets the context it would build, loaded from memory.
            from kafkatxn.config.stores import ssl_context

            kw["ssl_context"] = ssl_context(s, check_hostname=kw.get("ssl_check_hostname", True))
        return kw

    def masked(self) -> dict[str, str]:
        shown = {"bootstrap.servers": self.bootstrap_servers, "timeout": f"{self.timeout_ms}ms"}
        if self.profile:
            shown["profile"] = self.profile
        for key, value in sorted(self.settings.items()):
            shown[key] = mask(key, value)
            if shown[key].startswith("-----BEGIN "):  # certificates read from a store or given inline
                shown[key] = f"{value.count('-----BEGIN ')} PEM certificate(s), in memory"
        return shown


def check_settings_as_librdkafka(settings: Mapping[str, str]) -> None:
    """Refuse, before anything is sent, what librdkafka refuses when a client is built: a command
    served by kafka-python alone builds no librdkafka client, and kafka-python would only find these
    out while connecting (and retry them until the deadline)."""
    protocol = settings.get("security.protocol", "PLAINTEXT").upper()
    if protocol.startswith("SASL"):
        mechanism = settings.get("sasl.mechanisms", "GSSAPI")  # librdkafka's default
        if mechanism not in SASL_MECHANISMS:
            raise UsageError(
                f"bad client settings: SASL mechanism {mechanism} is not supported ({', '.join(SASL_MECHANISMS)} are; "
                "set sasl.mechanism)"
            )
        if mechanism in (OAUTHBEARER, GSSAPI):
            check = check_oauth if mechanism == OAUTHBEARER else check_kerberos
            check({**settings, "sasl.mechanisms": mechanism}, lambda keys, message: UsageError(f"bad client settings: {message}"))
        elif settings.get("sasl.username") is None or settings.get("sasl.password") is None:
            raise UsageError("bad client settings: sasl.username and sasl.password must be set")
    if protocol in ("SSL", "SASL_SSL"):
        for key in ("ssl.ca.location", "ssl.certificate.location", "ssl.key.location"):
            path = settings.get(key)
            if path is not None and path != "probe" and not os.path.exists(path):
                raise UsageError(f"bad client settings: {key}: no such file {path}")
