"""Web configuration files (exporter-toolkit format) and TLS clients for the guarded-exporter tests.

Certificates come from harness/security.py: the exporter serves the harness's broker
certificate (SANs 127.0.0.1 and localhost), and trusts client certificates of one PKI's CA.
"""

from __future__ import annotations

import base64
import http.client
import ssl
from dataclasses import dataclass
from pathlib import Path

import bcrypt
import yaml

from harness.security import Pki

USER = "prometheus"
PASSWORD = "s3cret-scrape-password"


def bcrypt_hash(password: str) -> str:
    # Cost 4, the minimum: the tests check hashes, not bcrypt's slowness.
    return bcrypt.hashpw(password.encode(), bcrypt.gensalt(4)).decode()


def web_config(pki: Pki, users: dict[str, str] | None = None, client_auth: str | None = "RequireAndVerifyClientCert",
               client_ca: Path | None = None, **tls_extra: object) -> dict:
    """A web-config.yml document: TLS with the harness broker certificate, client certificates of
    ``client_ca`` (default: the PKI's CA) when ``client_auth`` is set, basic auth for ``users``."""
    tls: dict[str, object] = {"cert_file": str(pki.broker_keystore), "key_file": str(pki.broker_keystore), **tls_extra}
    if client_auth:
        tls["client_auth_type"] = client_auth
        tls["client_ca_file"] = str(client_ca or pki.ca)
    doc: dict[str, object] = {"tls_server_config": tls}
    if users:
        doc["basic_auth_users"] = {user: bcrypt_hash(password) for user, password in users.items()}
    return doc


def write_yaml(path: Path, doc: object) -> Path:
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    return path


def client_context(pki: Pki, client: Pki | None = None, maximum_version: ssl.TLSVersion | None = None) -> ssl.SSLContext:
    """Trusts ``pki``'s CA (the exporter's certificate); presents ``client``'s client certificate if given."""
    context = ssl.create_default_context(cafile=str(pki.ca))
    if client is not None:
        context.load_cert_chain(str(client.client_cert), str(client.client_key))
    if maximum_version is not None:
        context.maximum_version = maximum_version
    return context


@dataclass
class Answer:
    status: int
    body: str
    headers: dict[str, str]


def https_get(port: int, path: str, context: ssl.SSLContext, auth: tuple[str, str] | None = None,
              timeout: float = 30) -> Answer:
    """One HTTPS request to 127.0.0.1; TLS refusals raise ssl.SSLError / ConnectionError."""
    conn = http.client.HTTPSConnection("127.0.0.1", port, context=context, timeout=timeout)
    try:
        headers = {}
        if auth is not None:
            headers["Authorization"] = "Basic " + base64.b64encode(":".join(auth).encode()).decode()
        conn.request("GET", path, headers=headers)
        response = conn.getresponse()
        return Answer(response.status, response.read().decode(), {k.lower(): v for k, v in response.getheaders()})
    finally:
        conn.close()
