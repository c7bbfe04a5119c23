"""Demo: a real local broker, real transactional traffic, and kafkatxn looking at it.

Traffic: an idempotent producer, one committed, one aborted and one ongoing transaction, and one
genuinely hanging transaction (written straight to a partition without the coordinator knowing,
possible because the demo broker runs with transaction.partition.verification.enable=false).
"""

from __future__ import annotations

import shlex
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.hanging_maker import make_hanging_transaction  # noqa: E402
from tests.harness.broker import KafkaCluster  # noqa: E402
from tests.scenarios import inspect_scenario  # noqa: E402


def kafkatxn(bootstrap: str, *args: str) -> int:
    shown = "kafkatxn " + " ".join(shlex.quote(a) for a in args)
    print(f"\n$ {shown}", flush=True)
    result = subprocess.run([sys.executable, "-m", "kafkatxn", *args, "--bootstrap-server", bootstrap])
    print(f"(exit {result.returncode})", flush=True)
    return result.returncode


def main() -> int:
    with tempfile.TemporaryDirectory(prefix="kafkatxn-demo-") as workdir:
        print("Starting a local Kafka broker (KRaft)…", flush=True)
        started = time.monotonic()
        cluster = KafkaCluster(
            Path(workdir),
            # Off only so the demo can make a genuinely hanging transaction (see tests/hanging_maker.py).
            broker_config={"transaction.partition.verification.enable": "false"},
        )
        with cluster.start():
            bootstrap = cluster.bootstrap_servers
            print(f"Kafka {cluster.version} at {bootstrap} in {time.monotonic() - started:.1f}s", flush=True)

            print("Making traffic: idempotent writes, committed, aborted and ongoing transactions…", flush=True)
            scenario = inspect_scenario(bootstrap, topic="demo-orders", prefix="demo")
            print("Making a hanging transaction on demo-orders partition 0…", flush=True)
            hanging = make_hanging_transaction(bootstrap, "demo-zombie", "demo-orders", partition=0, transaction_timeout_ms=10_000)
            # Candidates are transactions idle longer than the maximum transaction timeout (15 min by
            # default); the demo asks about anything idle longer than 15 s instead of waiting that long.
            print("Waiting 16s so the hanging transaction is idle longer than --max-transaction-timeout 15s…", flush=True)
            time.sleep(16)
            bound = ("--max-transaction-timeout", "15s")

            kafkatxn(bootstrap, "cluster")
            kafkatxn(bootstrap, "producers", "--topic", "demo-orders")
            kafkatxn(bootstrap, "producers", "--summary")
            kafkatxn(bootstrap, "transactions", "list", "--describe")
            kafkatxn(bootstrap, "transactions", "describe", scenario.open.transactional_id, "no-such-id")
            kafkatxn(bootstrap, "lso", "--topic", "demo-orders")
            kafkatxn(bootstrap, "hanging", *bound)
            kafkatxn(bootstrap, "check", *bound)
            kafkatxn(
                bootstrap, "abort", "--topic", "demo-orders", "--partition", "0",
                "--start-offset", str(hanging.start_offset), "--yes", "--audit-log", f"{workdir}/audit.jsonl",
            )
            kafkatxn(bootstrap, "hanging", *bound)
            kafkatxn(bootstrap, "lso", "--topic", "demo-orders")
            scenario.close()
        print("\nBroker stopped. Done.")
    return 0


if __name__ == "__main__":
    sys.exit(main())
