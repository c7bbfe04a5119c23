"""SASL/GSSAPI (Kerberos) for kafka-python, the one client that can do it here.

confluent-kafka's PyPI wheels are built without GSSAPI (librdkafka refuses the mechanism: "No provider
for SASL mechanism GSSAPI"), so a Kerberos cluster is served by kafka-python alone, through the
``gssapi`` package (the ``[gssapi]`` extra, built against MIT Kerberos). Commands the wire serves alone
work; a part that needs librdkafka says so in one line as its client is built (:func:`librdkafka_refusal`).

MIT's library takes its credentials from the environment, the way Kafka's Java client takes them from
Krb5LoginModule: the keytab as the client keytab (``KRB5_CLIENT_KTNAME``: MIT gets the initial ticket
with it, for the keytab's principal), the tickets it gets in a ticket cache in this process's memory
(nothing written to disk), or the ticket cache ``useTicketCache=true`` names (``KRB5CCNAME``). The realm
is found as MIT finds it: ``/etc/krb5.conf`` or ``KRB5_CONFIG`` (Java: ``-Djava.security.krb5.conf``).
"""

from __future__ import annotations

import importlib.util
import os
from typing import MutableMapping

from kafkatxn.config.properties import KERBEROS_CCACHE, KERBEROS_KEYTAB, KERBEROS_SERVICE
from kafkatxn.errors import UsageError

def librdkafka_refusal(need: str = "") -> str:
    """The one line a GSSAPI command meets where it would build a librdkafka client, naming what for."""
    return (
        "GSSAPI (Kerberos) logins are made by kafka-python only (confluent-kafka's wheels have no GSSAPI), and this "
        f"command needs confluent-kafka{f' for {need}' if need else ''}"
    )


LIBRDKAFKA_HAS_NO_GSSAPI = librdkafka_refusal()
NO_GSSAPI_PACKAGE = (
    "GSSAPI (Kerberos) needs the gssapi package: pip install 'kafkatxn[gssapi]' (it builds against MIT Kerberos: "
    "apt install libkrb5-dev, or dnf install krb5-devel)"
)


def kafka_python_arguments(settings: dict[str, str], environ: MutableMapping[str, str] = os.environ) -> dict[str, str]:
    """kafka-python's GSSAPI arguments, with MIT's credentials set up in ``environ`` as Krb5LoginModule says."""
    if importlib.util.find_spec("gssapi") is None:
        raise UsageError(NO_GSSAPI_PACKAGE)
    keytab, ccache = settings.get(KERBEROS_KEYTAB), settings.get(KERBEROS_CCACHE)
    if keytab:
        environ["KRB5_CLIENT_KTNAME"] = keytab if ":" in keytab else f"FILE:{keytab}"
    if ccache:
        environ["KRB5CCNAME"] = ccache if ":" in ccache else f"FILE:{ccache}"
    elif keytab:  # the tickets the keytab gets stay in this process
        environ["KRB5CCNAME"] = f"MEMORY:kafkatxn-{os.getpid()}"
    return {"sasl_kerberos_service_name": settings[KERBEROS_SERVICE]}
