"""Command line for the test harness, used by the demo script and the benchmarks.

    python -m harness up [--brokers N] [--workdir DIR] [--set key=value ...]
        Starts a cluster, prints BOOTSTRAP=host:port,... once it is ready, writes it to
        DIR/bootstrap and this process's pid to DIR/harness.pid, and runs until SIGTERM/SIGINT.
    python -m harness fetch [--kafka-version V]
        Only fetches the jars into the cache.

Only the BOOTSTRAP line goes to stdout; progress and errors go to stderr.
"""

from __future__ import annotations

import argparse
import os
import shlex
import signal
import sys
import tempfile
import time
from pathlib import Path

from .broker import KafkaCluster, KafkaHarnessError
from .jars import JarFetchError, default_kafka_version, ensure_artifact_jars, ensure_kafka_jars


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    try:
        if args.command == "fetch":
            return _fetch(args)
        return _up(args)
    except (KafkaHarnessError, JarFetchError) as error:
        print(f"harness: {error}", file=sys.stderr)
        return 1


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m harness", description="Real Kafka clusters for tests.")
    commands = parser.add_subparsers(dest="command", required=True)

    fetch = commands.add_parser("fetch", help="fetch Kafka's jars into the cache")
    fetch.add_argument("--kafka-version", help="default: $KAFKA_VERSION or the pinned version")

    up = commands.add_parser("up", help="start a cluster and keep it running until SIGTERM/SIGINT")
    up.add_argument("--brokers", type=int, default=1, help="number of combined broker+controller nodes")
    up.add_argument("--workdir", type=Path, help="node directories, bootstrap and harness.pid (default: a temp dir)")
    up.add_argument(
        "--set", dest="settings", action="append", default=[], metavar="KEY=VALUE",
        help="broker setting, repeatable, e.g. --set transaction.partition.verification.enable=false",
    )
    up.add_argument("--kafka-version", help="default: $KAFKA_VERSION or the pinned version")
    up.add_argument("--metadata-mode", choices=["kraft", "zookeeper"],
                    help="default: $KAFKA_METADATA_MODE, else ZooKeeper on Kafka 2.x and KRaft from 3.x")
    up.add_argument(
        "--jvm-options",
        help="broker JVM options replacing the fast-start defaults, e.g. '-Xmx1g -XX:+UseG1GC' for benchmarks",
    )
    up.add_argument("--timeout", type=float, default=120, help="seconds to wait for the cluster")
    return parser


def _fetch(args: argparse.Namespace) -> int:
    version = args.kafka_version or default_kafka_version()
    started = time.monotonic()
    libs_dir = ensure_kafka_jars(version)
    print(f"Kafka {version} jars in {libs_dir} ({time.monotonic() - started:.1f} s)", file=sys.stderr)
    from .oidc import MOCK_OAUTH2_SERVER  # the OIDC provider the OAUTHBEARER tests run

    print(f"OIDC provider jars in {ensure_artifact_jars(*MOCK_OAUTH2_SERVER)}", file=sys.stderr)
    return 0


def _up(args: argparse.Namespace) -> int:
    broker_config = dict(_parse_setting(setting) for setting in args.settings)
    jvm_options = shlex.split(args.jvm_options) if args.jvm_options is not None else None

    temporary = None if args.workdir else tempfile.TemporaryDirectory(prefix="kafkatxn-harness-")
    workdir = args.workdir or Path(temporary.name)
    workdir.mkdir(parents=True, exist_ok=True)
    bootstrap_file = workdir / "bootstrap"
    pid_file = workdir / "harness.pid"
    # A stale bootstrap file would send a waiting script to a dead cluster.
    bootstrap_file.unlink(missing_ok=True)
    pid_file.write_text(f"{os.getpid()}\n")

    # SIGTERM and SIGINT are the normal way to stop: both unwind into the finally below.
    signal.signal(signal.SIGTERM, _raise_stop_requested)
    signal.signal(signal.SIGINT, _raise_stop_requested)
    cluster = KafkaCluster(
        workdir, n_brokers=args.brokers, broker_config=broker_config,
        kafka_version=args.kafka_version, jvm_options=jvm_options, metadata_mode=args.metadata_mode,
    )
    try:
        cluster.start(timeout=args.timeout)
        print(
            f"harness: Kafka {cluster.version}, {args.brokers} node(s) ready in {cluster.startup_seconds:.1f} s; "
            f"node dirs under {workdir}",
            file=sys.stderr,
        )
        bootstrap_file.write_text(cluster.bootstrap_servers + "\n")
        print(f"BOOTSTRAP={cluster.bootstrap_servers}", flush=True)
        while True:
            signal.pause()
    except _StopRequested:
        return 0
    finally:
        # A second signal must not cut the brokers' shutdown short (it is bounded anyway).
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        cluster.stop()
        bootstrap_file.unlink(missing_ok=True)
        pid_file.unlink(missing_ok=True)
        if temporary is not None:
            temporary.cleanup()


class _StopRequested(Exception):
    pass


def _raise_stop_requested(signum, frame) -> None:
    raise _StopRequested(signal.Signals(signum).name)


def _parse_setting(setting: str) -> tuple[str, str]:
    key, separator, value = setting.partition("=")
    if not separator or not key:
        raise SystemExit(f"--set expects KEY=VALUE, got {setting!r}")
    return key.strip(), value


if __name__ == "__main__":
    sys.exit(main())
