"""``kafkatxn exporter --web-config-file`` on a real broker: TLS, client certificates, bcrypt basic auth.

Refused clients (no certificate, a certificate from another CA, wrong or missing credentials) must
not cause a single request to the broker: the broker's own request counters (RequestsPerSec over
JMX, read with Kafka's JmxTool by bench/benchlib.py) do not move for them, and do for the
client that gets in. Then a real Prometheus (Debian's package) scrapes the exporter over TLS with
a client certificate and basic auth, using the ``kafkatxn-tls`` job of monitoring/prometheus.yml.
"""

from __future__ import annotations

import http.client
import shutil
import ssl
import tempfile
from pathlib import Path

import pytest

from bench.benchlib import JmxCluster, counted_delta
from harness.security import make_pki
from tests.support.exporter_process import ExporterProcess
from tests.support.prometheus import PrometheusServer, example_job
from tests.support.web_config import PASSWORD, USER, client_context, https_get, web_config, write_yaml

pytestmark = pytest.mark.integration

REFUSED = (ssl.SSLError, ConnectionError, http.client.RemoteDisconnected)


@pytest.fixture(scope="module")
def jmx_broker():
    """A broker of its own (nothing else talks to it) with JMX on a loopback port."""
    workdir = Path(tempfile.mkdtemp(prefix="kafkatxn-guarded-"))
    cluster = JmxCluster(workdir, 1, heap="512m", name="guarded")
    try:
        cluster.start(timeout=90)
        yield cluster
    finally:
        cluster.stop()
        shutil.rmtree(workdir, ignore_errors=True)


def test_refused_clients_cause_no_broker_request_and_prometheus_scrapes_over_tls(jmx_broker, tmp_path, figures):
    pki = make_pki(tmp_path / "pki")
    other = make_pki(tmp_path / "other-pki")  # its client certificate is signed by a CA the exporter does not trust
    config = write_yaml(tmp_path / "web-config.yml", web_config(pki, {USER: PASSWORD}))
    exporter = ExporterProcess("-b", jmx_broker.bootstrap_servers, "--cache-ttl", "0s", "--scrape-timeout", "5s",
                               "--web-config-file", str(config))
    port = int(exporter.base.rsplit(":", 1)[1])
    try:
        assert exporter.url.startswith("https://127.0.0.1:")
        before = jmx_broker.request_counts()
        refusals = 0
        for path in ("/metrics", "/probe?profile=anything"):
            for context in (client_context(pki), client_context(pki, other)):  # no certificate; another CA's
                with pytest.raises(REFUSED):
                    https_get(port, path, context, (USER, PASSWORD))
                refusals += 1
            for auth in (None, (USER, "wrong password"), ("nobody", PASSWORD)):
                answer = https_get(port, path, client_context(pki, pki), auth)
                assert answer.status == 401, (path, auth, answer.body)
                refusals += 1
        during_refusals = counted_delta(before, jmx_broker.request_counts())
        assert during_refusals == {}, f"refused clients caused broker requests: {during_refusals}"

        answer = https_get(port, "/metrics", client_context(pki, pki), (USER, PASSWORD))
        assert answer.status == 200
        assert "\nkafkatxn_up 1.0\n" in answer.body
        after_scrape = counted_delta(before, jmx_broker.request_counts())
        assert after_scrape.get("Metadata", 0) >= 1  # the counters do see the exporter when it is let in
        figures["guarded exporter: broker requests for refused clients"] = (
            f"0 for {refusals} refused requests; {sum(after_scrape.values())} for one accepted scrape")

        # Prometheus as configured in monitoring/prometheus.yml, with the test's files; and the same
        # job with a wrong password, which Prometheus reports as a 401.
        password = tmp_path / "exporter-password"
        password.write_text(PASSWORD)
        wrong = tmp_path / "wrong-password"
        wrong.write_text("not-the-password")
        job = example_job("kafkatxn-tls")
        job["tls_config"].update(ca_file=str(pki.ca), cert_file=str(pki.client_cert), key_file=str(pki.client_key))
        job["basic_auth"]["password_file"] = str(password)
        job.update(static_configs=[{"targets": [f"127.0.0.1:{port}"]}], scrape_timeout="5s")
        refused_job = {**job, "job_name": "kafkatxn-tls-wrong-password", "basic_auth": {**job["basic_auth"], "password_file": str(wrong)}}
        with PrometheusServer(tmp_path / "prometheus", [job, refused_job], interval="5s", scrape_timeout="5s") as prom:
            up = prom.wait_for(lambda: prom.query('kafkatxn_up{job="kafkatxn-tls"}'), "a scrape over TLS with basic auth")
            assert list(up.values()) == [1.0]
            target = prom.wait_for(lambda: [t for t in prom.targets("kafkatxn-tls-wrong-password") if t["lastError"]],
                                   "the wrong password's scrape to fail")[0]
            assert target["health"] == "down" and "401" in target["lastError"]
            assert prom.targets("kafkatxn-tls")[0]["health"] == "up"
    finally:
        code = exporter.stop()
    assert code == 0, "".join(exporter.stderr_lines)
