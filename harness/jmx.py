"""The brokers' own request counters, read over JMX with Kafka's JmxTool (a cluster made with ``jmx=True``).

``kafka.network:type=RequestMetrics,name=RequestsPerSec,request=<API>,version=<v>`` counts every
request a broker has received since it started; the difference between two readings is what a
command sent, as the broker saw it (connection set-up included: ApiVersions, SaslHandshake).
"""

from __future__ import annotations

import re
from collections import Counter
from concurrent.futures import ThreadPoolExecutor

from .broker import LOOPBACK, KafkaCluster, KafkaHarnessError

REQUESTS = "kafka.network:type=RequestMetrics,name=RequestsPerSec,request=*,version=*"
_NAME = re.compile(r"request=([A-Za-z]+),version=(\d+):Count$")


# A JmxTool that could not read a broker's counters is run again: CI saw one connect and print no
# counters once (ci54), with the broker up and answering. A reading changes nothing, so asking again
# is safe; what the test compares is the difference between readings, not when one was taken.
TRIES = 3


def _node_counts(cluster: KafkaCluster, node_id: int) -> Counter:
    url = f"service:jmx:rmi:///jndi/rmi://{LOOPBACK}:{cluster.jmx_port(node_id)}/jmxrmi"
    for _ in range(TRIES):
        done = cluster.run_tool("org.apache.kafka.tools.JmxTool", "--jmx-url", url, "--object-name", REQUESTS,
                                "--attributes", "Count", "--one-time", "true", "--report-format", "csv", timeout=60)
        # --one-time prints one `name,"value"` line per attribute (the name has commas of its own), after a time line.
        rows = [line.rsplit(",", 1) for line in done.stdout.splitlines() if "," in line]
        if done.returncode == 0 and rows and rows[0][0] == "time":
            break
    else:
        raise KafkaHarnessError(f"JmxTool on node {node_id} failed {TRIES} times (exit {done.returncode}): "
                                f"stderr {done.stderr.strip()[-400:]!r}, stdout {done.stdout.strip()[-400:]!r}")
    counts: Counter = Counter()
    for name, value in rows[1:]:
        found = _NAME.search(name)
        if found:
            counts[found.group(1)] += int(float(value.strip('"')))
    return counts


def request_counts(cluster: KafkaCluster) -> dict[int, Counter]:
    """Per broker id, the requests it has received so far, per API name (every version summed)."""
    with ThreadPoolExecutor(len(cluster.broker_ids)) as pool:
        return dict(zip(cluster.broker_ids, pool.map(lambda node: _node_counts(cluster, node), cluster.broker_ids)))


def counts_between(before: dict[int, Counter], after: dict[int, Counter]) -> dict[int, Counter]:
    """What each broker received between two readings (APIs with none left out)."""
    return {node: +(after[node] - before.get(node, Counter())) for node in after}
