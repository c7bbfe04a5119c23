"""A real MIT Kerberos KDC for the GSSAPI tests, with its own realm on a free loopback port, and a broker
listener that logs clients in with it.

    with Kdc(workdir / "kdc") as kdc:                   # Debian's krb5-kdc: kdb5_util, kadmin.local, krb5kdc
        listener = gssapi_listener(kdc)                 # SASL_PLAINTEXT, GSSAPI, the broker's keytab
        cluster = KafkaCluster(..., jvm_options=[*FAST_START_JVM_OPTIONS, kdc.java_option])

The realm's principals: ``kafka/localhost`` (the broker; Kafka's Java client asks for a ticket to the
reverse-resolved host name, and MIT's library canonicalises 127.0.0.1 the same way) and
``kafkatxn-client`` (the clients), each with a random key in a keytab. Processes find the realm
through ``KRB5_CONFIG`` (MIT) and ``-Djava.security.krb5.conf`` (the JVM): :attr:`Kdc.environment`,
:attr:`Kdc.java_option`.
"""

from __future__ import annotations

import os
import secrets
import shutil
import subprocess
import time
from pathlib import Path

from .broker import KafkaHarnessError, Listener, _free_ports, _parent_death_signal_prefix
from .services import ServiceProcess

REALM = "KAFKATXN.TEST"
SERVICE = "kafka"
BROKER_HOST = "localhost"
CLIENT = "kafkatxn-client"
GSSAPI_LISTENER = "KERBEROS"
KRB5_LOGIN_MODULE = "com.sun.security.auth.module.Krb5LoginModule"
# Debian's krb5-kdc (krb5kdc, kdb5_util) and krb5-admin-server (kadmin.local); krb5-user (kinit) for the ticket cache.
PROGRAMS = ("krb5kdc", "kdb5_util", "kadmin.local", "kinit")


def _program(name: str) -> str:
    found = shutil.which(name) or next((p for p in (f"/usr/sbin/{name}", f"/usr/bin/{name}") if os.path.exists(p)), None)
    if found is None:
        raise KafkaHarnessError(f"{name} is not installed (Debian: krb5-kdc, krb5-admin-server, krb5-user; scripts/test installs them)")
    return found


def kerberos_available() -> bool:
    try:
        for name in PROGRAMS:
            _program(name)
    except KafkaHarnessError:
        return False
    return True


class Kdc(ServiceProcess):
    """krb5kdc in the foreground, its database, and the broker's and client's keytabs in ``workdir``."""

    def __init__(self, workdir: Path):
        self.workdir = Path(workdir)
        self.port: int | None = None
        self._process: subprocess.Popen | None = None

    @property
    def krb5_conf(self) -> Path:
        return self.workdir / "krb5.conf"

    @property
    def broker_keytab(self) -> Path:
        return self.workdir / "broker.keytab"

    @property
    def client_keytab(self) -> Path:
        return self.workdir / "client.keytab"

    @property
    def broker_principal(self) -> str:
        return f"{SERVICE}/{BROKER_HOST}@{REALM}"

    @property
    def client_principal(self) -> str:
        return f"{CLIENT}@{REALM}"

    @property
    def environment(self) -> dict[str, str]:
        """For MIT Kerberos processes (kinit, Python's gssapi): this realm's krb5.conf, no system ticket cache."""
        return {"KRB5_CONFIG": str(self.krb5_conf), "KRB5_KDC_PROFILE": str(self.workdir / "kdc.conf"),
                "KRB5CCNAME": f"FILE:{self.workdir / 'no-such-cache'}"}

    @property
    def java_option(self) -> str:
        return f"-Djava.security.krb5.conf={self.krb5_conf}"

    @property
    def log(self) -> Path:
        return self.workdir / "kdc.log"

    def start(self, timeout: float = 30) -> "Kdc":
        self.workdir.mkdir(parents=True, exist_ok=True)
        [self.port] = _free_ports(1)
        db = self.workdir / "db"
        (self.workdir / "kdc.conf").write_text(
            f"[kdcdefaults]\n kdc_ports = {self.port}\n kdc_tcp_ports = {self.port}\n"
            f"[realms]\n {REALM} = {{\n  database_name = {db}/principal\n  key_stash_file = {db}/stash\n"
            f"  acl_file = {self.workdir}/kadm5.acl\n  max_life = 1h\n  max_renewable_life = 1h\n"
            "  supported_enctypes = aes256-cts-hmac-sha1-96:normal aes128-cts-hmac-sha1-96:normal\n }\n"
            f"[logging]\n kdc = FILE:{self.log}\n admin_server = FILE:{self.workdir}/kadmin.log\n"
        )
        self.krb5_conf.write_text(
            f"[libdefaults]\n default_realm = {REALM}\n dns_lookup_realm = false\n dns_lookup_kdc = false\n"
            " udp_preference_limit = 1\n ticket_lifetime = 1h\n forwardable = true\n"
            f"[realms]\n {REALM} = {{\n  kdc = 127.0.0.1:{self.port}\n }}\n"
            f"[domain_realm]\n localhost = {REALM}\n .localhost = {REALM}\n"
        )
        (self.workdir / "kadm5.acl").write_text("")
        db.mkdir(exist_ok=True)
        env = {**os.environ, **self.environment}
        self._run(env, _program("kdb5_util"), "create", "-s", "-r", REALM, "-P", secrets.token_hex(16))
        for principal, keytab in ((f"{SERVICE}/{BROKER_HOST}", self.broker_keytab), (CLIENT, self.client_keytab)):
            self._run(env, _program("kadmin.local"), "-r", REALM, "-q", f"addprinc -randkey {principal}")
            self._run(env, _program("kadmin.local"), "-r", REALM, "-q", f"ktadd -k {keytab} {principal}")
            keytab.chmod(0o600)
        with open(self.workdir / "krb5kdc.out", "ab") as out:
            self._process = subprocess.Popen(
                [*_parent_death_signal_prefix(), _program("krb5kdc"), "-n", "-r", REALM],
                env=env, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT, start_new_session=True,
            )
        deadline = time.monotonic() + timeout
        probe = self.workdir / "probe.ccache"
        while True:  # serving once a client gets a ticket with its keytab
            if self._process.poll() is not None:
                raise KafkaHarnessError(f"krb5kdc exited with {self._process.returncode}: {self.log.read_text()[-2000:] if self.log.exists() else ''}")
            done = subprocess.run(
                [_program("kinit"), "-kt", str(self.client_keytab), "-c", f"FILE:{probe}", self.client_principal],
                env=env, capture_output=True, text=True, timeout=10,
            )
            if done.returncode == 0:
                probe.unlink(missing_ok=True)
                return self
            if time.monotonic() > deadline:
                self.stop()
                raise KafkaHarnessError(f"the KDC did not issue a ticket within {timeout:g}s: {done.stderr.strip()}")
            time.sleep(0.2)

    def kinit(self, ccache: Path) -> Path:
        """A ticket cache holding the client's ticket-granting ticket (the ``useTicketCache=true`` style)."""
        subprocess.run(
            [_program("kinit"), "-kt", str(self.client_keytab), "-c", f"FILE:{ccache}", self.client_principal],
            env={**os.environ, **self.environment}, check=True, capture_output=True, timeout=30,
        )
        return ccache

    def client_keys(self) -> list[bytes]:
        """The key material of the client's keytab (``klist -kK``): what must never leave the keytab."""
        import re

        listed = subprocess.run(
            [_program("klist"), "-kK", str(self.client_keytab)], capture_output=True, text=True, check=True, timeout=30,
            env={**os.environ, **self.environment},
        ).stdout
        return [bytes.fromhex(m) for m in re.findall(r"\(0x([0-9a-f]{32,})\)", listed)]

    def _run(self, env: dict[str, str], *command: str) -> None:
        done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL)
        if done.returncode != 0:
            raise KafkaHarnessError(f"{' '.join(command[:3])} failed: {done.stdout}{done.stderr}")


def gssapi_listener(kdc: Kdc, name: str = GSSAPI_LISTENER) -> Listener:
    """A SASL_PLAINTEXT listener offering GSSAPI, logging in as ``kafka/localhost`` from the broker's keytab."""
    return Listener(
        name, "SASL_PLAINTEXT",
        {
            "sasl.enabled.mechanisms": "GSSAPI",
            "gssapi.sasl.jaas.config": (
                f'{KRB5_LOGIN_MODULE} required useKeyTab=true storeKey=true keyTab="{kdc.broker_keytab}" '
                f'principal="{kdc.broker_principal}";'
            ),
        },
    )


def gssapi_client_properties(kdc: Kdc, style: str = "keytab", *, ccache: Path | None = None, keytab: Path | None = None) -> dict[str, str]:
    """A Java ``--command-config`` logging in as the client: ``keytab`` (useKeyTab) or ``ticket-cache``."""
    if style == "keytab":
        jaas = (f'{KRB5_LOGIN_MODULE} required useKeyTab=true storeKey=true keyTab="{keytab or kdc.client_keytab}" '
                f'principal="{kdc.client_principal}";')
    else:
        jaas = f'{KRB5_LOGIN_MODULE} required useTicketCache=true ticketCache="{ccache}";'
    return {
        "security.protocol": "SASL_PLAINTEXT",
        "sasl.mechanism": "GSSAPI",
        "sasl.kerberos.service.name": SERVICE,
        "sasl.jaas.config": jaas,
    }
