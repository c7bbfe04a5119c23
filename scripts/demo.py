"""Demo: a real local broker, real transactional traffic, and kafkatxn looking at it.

It starts from the page an on-call engineer gets: a read_committed consumer group ("billing") has
stopped. `kafkatxn diagnose` names the transaction holding it and the command that releases it;
the demo runs that command and diagnoses again. Then the rest of the tool on the same data.

Traffic: an idempotent producer, one committed, one aborted and one ongoing transaction, and one
genuinely hanging transaction (written straight to a partition without the coordinator knowing,
possible because the demo broker runs with transaction.partition.verification.enable=false); a
read_committed consumer group stopped behind the hanging transaction, and one ("reports") that
read everything committed and is caught up although high-watermark lag tools show it lagging.
"""

from __future__ import annotations

import json
import shlex
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from confluent_kafka import Consumer, TopicPartition as CTP  # noqa: E402

from harness.broker import KafkaCluster  # noqa: E402
from harness.hanging_maker import make_hanging_transaction, write_committed  # noqa: E402
from harness.scenarios import inspect_scenario  # noqa: E402
from kafkatxn.model import TopicPartition  # noqa: E402


def kafkatxn(bootstrap: str, *args: str) -> int:
    shown = "kafkatxn " + " ".join(shlex.quote(a) for a in args)
    print(f"\n$ {shown}", flush=True)
    result = subprocess.run([sys.executable, "-m", "kafkatxn", *args, "--bootstrap-server", bootstrap])
    print(f"(exit {result.returncode})", flush=True)
    return result.returncode


def kafkatxn_json(bootstrap: str, *args: str) -> dict:
    result = subprocess.run([sys.executable, "-m", "kafkatxn", *args, "--bootstrap-server", bootstrap, "-o", "json"],
                            capture_output=True, text=True)
    return json.loads(result.stdout)


def read_committed_group(bootstrap: str, group: str, topic: str, partition: int, wait_s: float = 5.0) -> None:
    """A read_committed consumer reads the partition as far as it can and commits where it stands."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "isolation.level": "read_committed",
                         "enable.auto.commit": False, "auto.offset.reset": "earliest", "log_level": 0})
    try:
        consumer.assign([CTP(topic, partition, 0)])
        deadline = time.monotonic() + wait_s
        last = None
        while time.monotonic() < deadline:
            msg = consumer.poll(0.2)
            if msg is not None and msg.error() is None:
                last = msg
                consumer.commit(message=msg, asynchronous=False)  # like per-record acknowledging applications
        if last is None:  # nothing readable: it stands at the start
            consumer.commit(offsets=[CTP(topic, partition, 0)], asynchronous=False)
    finally:
        consumer.close()


def interrupted_once(signum: int, frame: object) -> None:
    """The first Ctrl-C ends the demo; later ones are ignored, so the broker's stop is not cut short."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    raise KeyboardInterrupt


def main() -> int:
    signal.signal(signal.SIGINT, interrupted_once)
    try:
        return demo()
    except KeyboardInterrupt:
        # The broker was stopped on the way out (the cluster's context); a running kafkatxn got the
        # same Ctrl-C and ended on its own.
        print("\nInterrupted: broker stopped.", file=sys.stderr, flush=True)
        return 130


def demo() -> int:
    with tempfile.TemporaryDirectory(prefix="kafkatxn-demo-") as workdir:
        print("Starting a local Kafka broker (KRaft)…", flush=True)
        started = time.monotonic()
        cluster = KafkaCluster(
            Path(workdir),
            # Off only so the demo can make a genuinely hanging transaction (see harness/hanging_maker.py).
            broker_config={"transaction.partition.verification.enable": "false"},
        )
        with cluster.start():
            bootstrap = cluster.bootstrap_servers
            print(f"Kafka {cluster.version} at {bootstrap} in {time.monotonic() - started:.1f}s", flush=True)

            print("Making traffic: idempotent writes, committed, aborted and ongoing transactions…", flush=True)
            scenario = inspect_scenario(bootstrap, topic="demo-orders", prefix="demo")
            print("Making a hanging transaction on demo-orders partition 0, with committed records after it…", flush=True)
            hanging = make_hanging_transaction(bootstrap, "demo-zombie", "demo-orders", partition=0, transaction_timeout_ms=10_000)
            write_committed(bootstrap, TopicPartition("demo-orders", 0), [b"after-0", b"after-1"], "demo-after")
            print("Consumer groups: 'billing' reads demo-orders-0 (read_committed), 'reports' reads demo-orders-1…", flush=True)
            read_committed_group(bootstrap, "billing", "demo-orders", 0)
            read_committed_group(bootstrap, "reports", "demo-orders", 1)
            # Candidates are transactions idle longer than the maximum transaction timeout (15 min by
            # default); the demo asks about anything idle longer than 15 s instead of waiting that long.
            print("Waiting 16s so the hanging transaction is idle longer than --max-transaction-timeout 15s…", flush=True)
            time.sleep(16)
            bound = ("--max-transaction-timeout", "15s")

            print("\nThe page says: consumer group 'billing' has stopped. Why, and what do we do?", flush=True)
            kafkatxn(bootstrap, "diagnose", "--group", "billing", "--group", "reports", *bound)
            found = kafkatxn_json(bootstrap, "diagnose", "--group", "billing", *bound)
            for txn in found["transactions"]:
                # The step diagnose suggests, as printed (plus --yes and a demo audit log).
                for step in txn["command"].split(" && "):
                    argv = shlex.split(step)
                    if argv[:1] == ["kafkatxn"] and argv[1:2] in (["abort"], ["fence"]):
                        kafkatxn(bootstrap, *argv[1:], "--yes", "--audit-log", f"{workdir}/audit.jsonl")
            print("\nAfter the suggested command: is 'billing' still blocked?", flush=True)
            kafkatxn(bootstrap, "diagnose", "--group", "billing", *bound)

            print("\nThe rest of kafkatxn on the same data:", flush=True)
            kafkatxn(bootstrap, "cluster")
            kafkatxn(bootstrap, "producers", "--topic", "demo-orders")
            kafkatxn(bootstrap, "producers", "--summary")
            kafkatxn(bootstrap, "transactions", "list", "--describe")
            kafkatxn(bootstrap, "transactions", "describe", scenario.open.transactional_id, "no-such-id")
            kafkatxn(bootstrap, "lso", "--topic", "demo-orders")
            kafkatxn(bootstrap, "hanging", *bound)
            kafkatxn(bootstrap, "lso", "--groups", "billing", "reports")
            kafkatxn(bootstrap, "check", "--groups", *bound)
            # Already aborted by the step above: safe to repeat, "nothing to abort".
            kafkatxn(
                bootstrap, "abort", "--topic", "demo-orders", "--partition", "0",
                "--start-offset", str(hanging.start_offset), "--yes", "--audit-log", f"{workdir}/audit.jsonl",
            )
            scenario.close()
        print("\nBroker stopped. Done.")
    return 0


if __name__ == "__main__":
    sys.exit(main())
