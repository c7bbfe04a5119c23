"""The ``--command-config`` files of each Java store style, shared by the security matrix
(tests/integration/test_security.py), the store tests (test_stores.py) and the leak checks (test_secrets.py).

    stores = client_stores(secure.pki, ...)               # harness/stores.py: keytool's JKS and PKCS12 stores
    mode, props = store_files(secure, stores)["jks-keystore-mtls"]
    bootstrap = secure.bootstrap(mode)                    # the listener that style logs in on

Trust stores go with SASL_SSL SCRAM-SHA-512 (the broker's certificate is checked against the store),
key stores with the mutual-TLS listener (the broker requires the client's certificate).
"""

from __future__ import annotations

from pathlib import Path

from harness.security import SecureKafka
from harness.stores import ClientStores

# The store styles of the security matrix, one cell each: (security mode, name in store_files()).
MATRIX_STORE_CELLS = (
    ("scram", "jks-truststore"), ("scram", "pkcs12-truststore"), ("mtls", "jks-keystore-mtls"), ("mtls", "pkcs12-keystore-mtls"),
)


def store_files(secure: SecureKafka, stores: ClientStores) -> dict[str, tuple[str, dict[str, str]]]:
    """name -> (security mode, Java client properties)."""
    scram = secure.properties("scram", "java")
    del scram["ssl.truststore.type"], scram["ssl.truststore.location"]

    def trust(store_type: str | None, path: Path) -> dict[str, str]:
        typed = {"ssl.truststore.type": store_type} if store_type else {}
        return {**typed, "ssl.truststore.location": str(path), "ssl.truststore.password": stores.store_password}

    def key(store_type: str | None, path: Path, key_password: str | None = None) -> dict[str, str]:
        typed = {"ssl.keystore.type": store_type} if store_type else {}
        out = {**typed, "ssl.keystore.location": str(path), "ssl.keystore.password": stores.store_password}
        return {**out, "ssl.key.password": key_password} if key_password else out

    return {
        "jks-truststore": ("scram", {**scram, **trust("JKS", stores.truststore["JKS"])}),
        "pkcs12-truststore": ("scram", {**scram, **trust("PKCS12", stores.truststore["PKCS12"])}),
        # The JKS key entry has its own password (ssl.key.password), unlike PKCS12 entries.
        "jks-keystore-mtls": ("mtls", {
            "security.protocol": "SSL", **trust("JKS", stores.truststore["JKS"]),
            **key("JKS", stores.keystore["JKS"], stores.key_password),
        }),
        "pkcs12-keystore-mtls": ("mtls", {
            "security.protocol": "SSL", **trust("PKCS12", stores.truststore["PKCS12"]), **key("PKCS12", stores.keystore["PKCS12"]),
        }),
        "pkcs12-named-jks-no-type-mtls": ("mtls", {
            "security.protocol": "SSL", **trust(None, stores.disguised_truststore), **key(None, stores.disguised_keystore),
        }),
    }
