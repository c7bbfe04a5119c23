"""harness.jmx reads a broker's request counters again when JmxTool prints none (ci54 saw it once)."""

import subprocess

import pytest

from harness import jmx
from harness.broker import KafkaHarnessError

GOOD = 'time,"1"\nkafka.network:type=RequestMetrics,name=RequestsPerSec,request=Metadata,version=12:Count,"3.0"\n'


class Tools:
    """A cluster whose JmxTool answers the given (exit code, stdout) in turn."""

    def __init__(self, answers):
        self.answers, self.calls = list(answers), 0

    def jmx_port(self, node_id):
        return 9999

    def run_tool(self, *args, timeout=60):
        self.calls += 1
        code, out = self.answers.pop(0)
        return subprocess.CompletedProcess(args, code, out, "Trying to connect to JMX url")


def test_a_reading_without_counters_is_taken_again():
    cluster = Tools([(1, ""), (0, "Trying to connect\n"), (0, GOOD)])
    assert jmx._node_counts(cluster, 3) == {"Metadata": 3}
    assert cluster.calls == 3


def test_no_counters_after_every_try_names_the_exit_and_both_streams():
    cluster = Tools([(1, "")] * jmx.TRIES)
    with pytest.raises(KafkaHarnessError, match=r"node 3 failed 3 times \(exit 1\).*Trying to connect"):
        jmx._node_counts(cluster, 3)
