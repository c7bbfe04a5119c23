"""The exporter's HTTP side without a broker: routes, /probe per profile, the web configuration
(exporter-toolkit format) with real TLS handshakes and bcrypt basic auth, reloading, refusals.

Collectors here gather fake snapshots and count their gathers: a refused request must never gather.
"""

from __future__ import annotations

import base64
import http.client
import ssl
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families

from harness.security import make_pki
from kafkatxn import exporter_http
from kafkatxn.errors import UsageError
from kafkatxn.exporter import SnapshotCollector
from kafkatxn.exporter_http import ExporterApp, ProbeTargets, WebConfigError, WebConfigFile
from kafkatxn.snapshot import ClusterSnapshot, PartitionSample
from tests.support.cli_helpers import run_cli
from tests.support.prometheus import promtool
from tests.support.web_config import PASSWORD, USER, bcrypt_hash, client_context, https_get, web_config, write_yaml

REFUSED = (ssl.SSLError, ConnectionError, http.client.RemoteDisconnected)


class Gather:
    """A fake cluster: counts gathers; ``block`` holds a gather until it is set."""

    def __init__(self, topic: str = "orders", block: threading.Event | None = None):
        self.topic = topic
        self.block = block
        self.calls = 0
        self.started = threading.Event()

    def __call__(self) -> ClusterSnapshot:
        self.calls += 1
        self.started.set()
        if self.block is not None:
            assert self.block.wait(30)
        return ClusterSnapshot(1_700_000_000_000, 0.01, cluster_id=self.topic, brokers=(1,), replica_brokers=(1,),
                               partitions=(PartitionSample(self.topic, 0, 1, 10, 7),))


class Running:
    """serve() on a thread, stopped at the end of the test."""

    def __init__(self, app: ExporterApp):
        self.stop = threading.Event()
        ready = threading.Event()
        urls: list[str] = []
        self.thread = threading.Thread(target=exporter_http.serve, args=(app, "127.0.0.1:0"), daemon=True,
                                       kwargs={"on_ready": lambda url: (urls.append(url), ready.set()), "stop": self.stop})
        self.thread.start()
        assert ready.wait(10)
        self.url = urls[0]
        self.port = int(self.url.split("://", 1)[1].split("/", 1)[0].rsplit(":", 1)[1])
        self.base = self.url.split("/metrics")[0].split("/probe")[0]

    def close(self) -> None:
        self.stop.set()
        self.thread.join(10)
        assert not self.thread.is_alive()


@pytest.fixture
def running():
    started: list[Running] = []

    def start(app: ExporterApp) -> Running:
        started.append(Running(app))
        return started[-1]

    yield start
    for r in started:
        r.close()


def get(url: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(url, timeout=30) as response:
            return response.status, response.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode()


def series(body: str) -> dict[tuple, float]:
    return {(s.name, tuple(sorted(s.labels.items()))): s.value
            for family in text_string_to_metric_families(body) for s in family.samples}


# -- listen address -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    "text, expected",
    [("127.0.0.1:9799", ("127.0.0.1", 9799)), (":9799", ("0.0.0.0", 9799)), ("[::1]:80", ("::1", 80)),
     ("exporter.local:0", ("exporter.local", 0))],
)
def test_parse_listen(text, expected):
    assert exporter_http.parse_listen(text) == expected


@pytest.mark.parametrize("text", ["9799", "host:", "host:99999", "::1:80", "a b:1"])
def test_parse_listen_rejects_bad_addresses(text):
    with pytest.raises(UsageError, match="--listen"):
        exporter_http.parse_listen(text)


# -- routes -------------------------------------------------------------------------------------


def test_serve_answers_scrapes_over_http_until_stopped(running):
    gather = Gather()
    server = running(ExporterApp(SnapshotCollector(gather, cache_ttl_s=0)))
    assert server.url.startswith("http://127.0.0.1:") and server.url.endswith("/metrics")
    status, body = get(server.url)
    assert status == 200
    assert series(body)[("kafkatxn_partition_lso_lag_messages", (("partition", "0"), ("topic", "orders")))] == 3
    get(server.url)
    assert gather.calls == 2
    assert get(server.base + "/nothing-here")[0] == 404
    assert gather.calls == 2


def serving(app: ExporterApp, drain_s: float) -> tuple[threading.Event, threading.Thread, str]:
    """serve() on a thread with ``drain_s``: its stop event, its thread and its URL."""
    stop, ready, urls = threading.Event(), threading.Event(), []
    thread = threading.Thread(target=exporter_http.serve, args=(app, "127.0.0.1:0"), daemon=True,
                              kwargs={"on_ready": lambda url: (urls.append(url), ready.set()), "stop": stop, "drain_s": drain_s})
    thread.start()
    assert ready.wait(10)
    return stop, thread, urls[0]


def test_stopping_lets_a_scrape_under_way_finish_and_get_its_answer():
    release = threading.Event()
    gather = Gather(block=release)
    stop, serving_thread, url = serving(ExporterApp(SnapshotCollector(gather, cache_ttl_s=0)), drain_s=10)
    results: list[tuple[int, str]] = []
    scrape = threading.Thread(target=lambda: results.append(get(url)))
    scrape.start()
    assert gather.started.wait(10)
    stop.set()
    time.sleep(0.3)
    assert serving_thread.is_alive()  # waiting for the scrape under way
    release.set()
    scrape.join(10)
    serving_thread.join(10)
    assert not serving_thread.is_alive()
    assert results[0][0] == 200 and series(results[0][1])[("kafkatxn_up", ())] == 1


def test_stopping_waits_no_longer_than_the_drain_limit():
    release = threading.Event()
    gather = Gather(block=release)
    stop, serving_thread, url = serving(ExporterApp(SnapshotCollector(gather, cache_ttl_s=0)), drain_s=0.2)
    scrape = threading.Thread(target=lambda: get(url), daemon=True)
    scrape.start()
    try:
        assert gather.started.wait(10)
        started = time.monotonic()
        stop.set()
        serving_thread.join(5)
        assert not serving_thread.is_alive() and time.monotonic() - started < 2
    finally:
        release.set()
        scrape.join(10)


def probe_targets(gathers: dict[str, Gather], closed: list[str] | None = None) -> ProbeTargets:
    closed = [] if closed is None else closed
    def resolve(name: str) -> str:
        if name not in gathers:
            raise UsageError(f"profile {name!r} not found in /somewhere/config.toml (profiles: {', '.join(sorted(gathers))})")
        return name

    def make(name: str):
        return SnapshotCollector(gathers[name], cache_ttl_s=0), lambda: closed.append(name)

    return ProbeTargets(resolve, make)


def test_probe_gathers_the_cluster_of_the_profile_asked_for(running):
    gathers = {"east": Gather("east-topic"), "west": Gather("west-topic")}
    server = running(ExporterApp(None, probe_targets(gathers)))
    assert server.url.endswith("/probe?profile=NAME")  # no cluster on the command line: probes only
    status, body = get(server.base + "/probe?profile=west")
    assert status == 200
    topics = {dict(labels).get("topic") for name, labels in series(body) if name == "kafkatxn_partition_lso_lag_messages"}
    assert topics == {"west-topic"}
    assert (gathers["east"].calls, gathers["west"].calls) == (0, 1)
    status, body = get(server.base + "/metrics")
    assert status == 404 and "/probe?profile=NAME" in body


@pytest.mark.parametrize("query", ["profile=north", "", "profile=", "profile=east&profile=west"])
def test_a_bad_probe_is_400_with_one_line_and_gathers_nothing(running, query):
    gathers = {"east": Gather(), "west": Gather()}
    server = running(ExporterApp(None, probe_targets(gathers)))
    status, body = get(server.base + "/probe?" + query)
    assert status == 400
    assert body.count("\n") == 1, body
    if query == "profile=north":
        assert "'north' not found" in body
    assert gathers["east"].calls == gathers["west"].calls == 0


def test_a_slow_cluster_does_not_hold_up_another_profiles_probe(running):
    release = threading.Event()
    gathers = {"slow": Gather("slow", block=release), "fast": Gather("fast")}
    server = running(ExporterApp(None, probe_targets(gathers)))
    results: list[tuple[int, str]] = []
    slow = threading.Thread(target=lambda: results.append(get(server.base + "/probe?profile=slow")))
    slow.start()
    try:
        assert gathers["slow"].started.wait(10)
        status, body = get(server.base + "/probe?profile=fast")
        assert not release.is_set() and slow.is_alive()  # answered while the slow gather still hangs
        assert status == 200 and series(body)[("kafkatxn_up", ())] == 1
    finally:
        release.set()
        slow.join(10)
    assert results[0][0] == 200


def test_probe_collectors_are_kept_per_profile_and_closed_at_the_end():
    closed: list[str] = []
    targets = probe_targets({"east": Gather(), "west": Gather()}, closed)
    assert targets.app_for("east") is targets.app_for("east")
    assert targets.app_for("west") is not targets.app_for("east")
    targets.close()
    assert sorted(closed) == ["east", "west"]


# -- web configuration: parsing -----------------------------------------------------------------


@pytest.fixture(scope="module")
def pki(tmp_path_factory):
    return make_pki(tmp_path_factory.mktemp("pki"))


@pytest.fixture(scope="module")
def other_pki(tmp_path_factory):
    """A second PKI: its client certificate comes from a CA the exporter does not trust."""
    return make_pki(tmp_path_factory.mktemp("other-pki"))


def test_an_empty_web_config_serves_plain_http_without_auth(tmp_path):
    config = WebConfigFile(write_yaml(tmp_path / "web.yml", None))
    assert not config.tls and not config.current().users


# (document, what the error says, whether the exporter toolkit refuses it too: where it does not,
# kafkatxn is stricter on purpose: below TLS 1.2, client certificates nobody verifies, Go-only settings)
MALFORMED_WEB_CONFIGS = [
    ("tls_server_config: [", "not valid YAML", True),
    ("- a\n- b\n", "expected a mapping", True),
    ("tls_server_configs: {}\n", "unknown key(s): tls_server_configs", True),
    ("tls_server_config: {cert_file: CERT}\n", "needs both cert_file and key_file", True),
    ("tls_server_config: {cert_file: CERT, key_file: CERT, min_version: TLS11}\n", "TLS12 or TLS13", False),
    ("tls_server_config: {cert_file: CERT, key_file: CERT, client_auth_type: RequireAnyClientCert, client_ca_file: CA}\n",
     "nobody verifies", False),
    ("tls_server_config: {cert_file: CERT, key_file: CERT, client_auth_type: RequireAndVerifyClientCert}\n",
     "needs client_ca_file", False),
    ("tls_server_config: {cert_file: CERT, key_file: CERT, client_auth_type: Sometimes, client_ca_file: CA}\n",
     "'Sometimes'", True),
    ("tls_server_config: {cert_file: CERT, key_file: CERT, client_auth_type: NoClientCert, client_ca_file: CA}\n",
     "client_auth_type is NoClientCert", True),
    ("tls_server_config: {cert_file: CERT, key_file: CERT, cipher_suites: [TLS_AES_128_GCM_SHA256]}\n",
     "not supported", False),
    ("tls_server_config: {cert_file: missing.pem, key_file: missing.pem}\n", "cannot load", True),
    ("tls_server_config: {cert_file: CA, key_file: CA}\n", "cannot load", True),  # a certificate without its key
    ("basic_auth_users: {prometheus: plain-password-in-the-file}\n", "not a bcrypt hash", True),
    ("basic_auth_users: [prometheus]\n", "basic_auth_users must be a mapping", True),
    ("http_server_config: {headers: {Content-Type: text/html}}\n", "is not one of", True),
]


@pytest.mark.parametrize("doc, message, toolkit_refuses", MALFORMED_WEB_CONFIGS)
def test_a_malformed_web_config_is_one_clear_usage_error(tmp_path, pki, doc, message, toolkit_refuses):
    path = tmp_path / "web.yml"
    path.write_text(doc.replace("CERT", str(pki.broker_keystore)).replace("CA", str(pki.ca)))
    with pytest.raises(WebConfigError) as info:
        WebConfigFile(path)
    text = str(info.value)
    assert message in text and str(path) in text and "\n" not in text
    assert "plain-password-in-the-file" not in text
    toolkit = promtool("check", "web-config", path.name, cwd=tmp_path)
    assert (toolkit.returncode != 0) == toolkit_refuses, toolkit.stdout + toolkit.stderr


def test_the_cli_refuses_a_malformed_web_config_with_exit_64_before_listening(capsys, tmp_path):
    path = write_yaml(tmp_path / "web.yml", {"basic_auth_users": {"prometheus": "hunter2"}})
    result = run_cli(capsys, "exporter", "-b", "127.0.0.1:1", "--listen", "127.0.0.1:0", "--web-config-file", path)
    assert result.code == 64
    assert result.stderr.count("\n") == 1 and "not a bcrypt hash" in result.stderr
    assert "hunter2" not in result.stderr
    assert "serving" not in result.stderr


def test_relative_file_names_are_relative_to_the_web_config(tmp_path, pki):
    (tmp_path / "tls").mkdir()
    (tmp_path / "tls" / "server.pem").write_bytes(pki.broker_keystore.read_bytes())
    config = WebConfigFile(write_yaml(tmp_path / "web.yml", {"tls_server_config": {
        "cert_file": "tls/server.pem", "key_file": "tls/server.pem"}}))
    assert config.current().tls.cert_file == tmp_path / "tls" / "server.pem"


# -- web configuration: real TLS and basic auth --------------------------------------------------


@pytest.fixture
def guarded(tmp_path, pki, running):
    """An exporter with TLS, client certificates of ``pki``'s CA required, and basic auth."""
    path = write_yaml(tmp_path / "web.yml", web_config(pki, {USER: PASSWORD}))
    gather = Gather()
    gathers = {"east": Gather()}
    server = running(ExporterApp(SnapshotCollector(gather, cache_ttl_s=0), probe_targets(gathers), WebConfigFile(path)))
    return server, path, gather, gathers


def test_refused_clients_never_reach_the_cluster_and_the_right_one_gets_metrics(guarded, pki, other_pki):
    server, _path, gather, gathers = guarded
    assert server.url.startswith("https://")
    for path in ("/metrics", "/probe?profile=east"):
        with pytest.raises(REFUSED):  # no client certificate
            https_get(server.port, path, client_context(pki))
        with pytest.raises(REFUSED):  # a client certificate from another CA
            https_get(server.port, path, client_context(pki, other_pki))
        with pytest.raises((ConnectionError, urllib.error.URLError, http.client.HTTPException)):  # plain HTTP: no answer
            urllib.request.urlopen(server.base.replace("https", "http") + path, timeout=10)
        for auth in (None, (USER, "wrong"), ("someone", PASSWORD), (USER, "")):
            answer = https_get(server.port, path, client_context(pki, pki), auth)
            assert answer.status == 401, (path, auth)
            assert answer.headers["www-authenticate"].startswith("Basic ")
            assert PASSWORD not in answer.body
    assert gather.calls == 0 and gathers["east"].calls == 0

    answer = https_get(server.port, "/metrics", client_context(pki, pki), (USER, PASSWORD))
    assert answer.status == 200 and series(answer.body)[("kafkatxn_up", ())] == 1
    answer = https_get(server.port, "/probe?profile=east", client_context(pki, pki), (USER, PASSWORD))
    assert answer.status == 200 and series(answer.body)[("kafkatxn_up", ())] == 1
    assert gather.calls == 1 and gathers["east"].calls == 1


def test_tls_below_the_configured_minimum_is_refused(tmp_path, pki, running):
    path = write_yaml(tmp_path / "web.yml", web_config(pki, client_auth=None, min_version="TLS13"))
    server = running(ExporterApp(SnapshotCollector(Gather(), cache_ttl_s=0), None, WebConfigFile(path)))
    with pytest.raises(ssl.SSLError):
        https_get(server.port, "/metrics", client_context(pki, maximum_version=ssl.TLSVersion.TLSv1_2))
    assert https_get(server.port, "/metrics", client_context(pki)).status == 200


def test_the_default_minimum_is_tls_1_2(tmp_path, pki):
    config = WebConfigFile(write_yaml(tmp_path / "web.yml", web_config(pki, client_auth=None)))
    assert config.ssl_context().minimum_version == ssl.TLSVersion.TLSv1_2


def test_changes_to_the_web_config_apply_without_a_restart(guarded, pki, other_pki):
    server, path, gather, _ = guarded
    new_password = "rotated-password"
    write_yaml(path, web_config(pki, {USER: new_password}))
    assert https_get(server.port, "/metrics", client_context(pki, pki), (USER, PASSWORD)).status == 401
    assert https_get(server.port, "/metrics", client_context(pki, pki), (USER, new_password)).status == 200

    # Trust the other PKI's client certificates instead: the next handshake uses the new CA.
    write_yaml(path, web_config(pki, {USER: new_password}, client_ca=other_pki.ca))
    assert https_get(server.port, "/metrics", client_context(pki, other_pki), (USER, new_password)).status == 200
    with pytest.raises(REFUSED):
        https_get(server.port, "/metrics", client_context(pki, pki), (USER, new_password))
    assert gather.calls == 2


def test_a_web_config_broken_after_start_refuses_until_fixed(guarded, pki):
    server, path, gather, _ = guarded
    good = path.read_text()
    path.write_text(good.replace("basic_auth_users", "basic_auth_userz"))
    with pytest.raises(REFUSED):  # the TLS context cannot be taken from a broken file: fail closed
        https_get(server.port, "/metrics", client_context(pki, pki), (USER, PASSWORD))
    path.write_text(good)
    assert https_get(server.port, "/metrics", client_context(pki, pki), (USER, PASSWORD)).status == 200
    assert gather.calls == 1


def test_basic_auth_without_tls_and_a_broken_file_answers_500(tmp_path, running):
    path = write_yaml(tmp_path / "web.yml", {"basic_auth_users": {USER: bcrypt_hash(PASSWORD)},
                                             "http_server_config": {"headers": {"X-Frame-Options": "deny"}}})
    gather = Gather()
    server = running(ExporterApp(SnapshotCollector(gather, cache_ttl_s=0), None, WebConfigFile(path)))
    assert get(server.url)[0] == 401
    request = urllib.request.Request(server.url, headers={"Authorization": "Basic " + base64.b64encode(
        f"{USER}:{PASSWORD}".encode()).decode()})
    with urllib.request.urlopen(request, timeout=30) as response:
        assert response.status == 200 and response.headers["X-Frame-Options"] == "deny"
    path.write_text("basic_auth_users: [")
    status, body = get(server.url)
    assert status == 500 and "web configuration" in body
    assert gather.calls == 1


def test_basic_auth_remembers_checked_credentials_but_not_across_hash_changes():
    auth = exporter_http.BasicAuth()
    users = {USER: bcrypt_hash(PASSWORD).encode()}
    header = "Basic " + base64.b64encode(f"{USER}:{PASSWORD}".encode()).decode()
    assert auth.check(users, header) and auth.check(users, header)
    assert not auth.check({USER: bcrypt_hash("other").encode()}, header)
    assert not auth.check(users, "Basic !!!not-base64")
    assert not auth.check(users, "Bearer token")
    assert not auth.check({}, header)


def test_the_example_web_config_works_once_its_files_exist(tmp_path, pki):
    """monitoring/web-config.yml as shipped, next to the certificate files it names."""
    example = Path(__file__).resolve().parents[2] / "monitoring" / "web-config.yml"
    (tmp_path / "web-config.yml").write_text(example.read_text())
    for name in ("exporter.pem", "exporter.key"):
        (tmp_path / name).write_bytes(pki.broker_keystore.read_bytes())
    (tmp_path / "prometheus-ca.pem").write_bytes(pki.ca.read_bytes())
    config = WebConfigFile(tmp_path / "web-config.yml")
    assert config.tls and config.current().tls.client_auth_type == "RequireAndVerifyClientCert"
    header = "Basic " + base64.b64encode(b"prometheus:change-me").decode()  # the password its comment names
    assert exporter_http.BasicAuth().check(config.current().users, header)
    # The exporter toolkit itself (in promtool) accepts it too.
    checked = promtool("check", "web-config", "web-config.yml", cwd=tmp_path)
    assert checked.returncode == 0, checked.stdout + checked.stderr


@pytest.mark.parametrize("client_auth", [None, "VerifyClientCertIfGiven", "RequireAndVerifyClientCert"])
def test_the_test_web_configs_are_valid_for_the_exporter_toolkit_too(tmp_path, pki, client_auth):
    path = write_yaml(tmp_path / "web.yml", web_config(pki, {USER: PASSWORD}, client_auth=client_auth, min_version="TLS12"))
    WebConfigFile(path)
    checked = promtool("check", "web-config", str(path))
    assert checked.returncode == 0, checked.stdout + checked.stderr
