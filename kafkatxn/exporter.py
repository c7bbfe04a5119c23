"""The exporter's gathering and serving, over the metric families of one snapshot
(:mod:`kafkatxn.exporter_metrics`, pure; the same snapshot ``kafkatxn check`` decides on).

:class:`SnapshotCollector` is a prometheus_client custom collector that gathers at scrape time, keeps
the result for ``cache_ttl_s`` and lets only one gather run at a time: a scrape that arrives while
another is gathering waits for it and answers with its result, so a slow cluster never piles up gathers. :func:`build_registry` gives a collector a registry of
its own (no process-global state); :mod:`kafkatxn.exporter_http` serves it over HTTP(S);
:func:`write_textfile` writes the same metrics for node_exporter's textfile collector.
"""

from __future__ import annotations

import dataclasses
import gc
import logging
import os
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Callable, Iterator, Mapping, Sequence

from prometheus_client.core import Metric
from prometheus_client.registry import Collector, CollectorRegistry

from kafkatxn.audit.churn import ChurnSample, IdChurn, churn_metric_families
from kafkatxn.exporter_metrics import ExportOptions, metric_families
from kafkatxn.facts_cluster import gather_snapshot
from kafkatxn.facts_probes import ProbeMemo
from kafkatxn.snapshot import ClusterSnapshot
from kafkatxn.kafka import Cluster
from kafkatxn.validation import compile_regex
from kafkatxn.config import ConnectionConfig
from kafkatxn.errors import KafkatxnError, UsageError

from kafkatxn import defaults
from kafkatxn.durations import parse_duration_ms

log = logging.getLogger("kafkatxn.exporter")

DEFAULT_CACHE_TTL_S = parse_duration_ms(defaults.EXPORTER_CACHE_TTL) / 1000
DEFAULT_SCRAPE_TIMEOUT_S = parse_duration_ms(defaults.EXPORTER_SCRAPE_TIMEOUT) / 1000


# glibc's default first mmap threshold; a pinned one stays there.
MMAP_THRESHOLD_BYTES = 128 * 1024


def pin_mmap_threshold(size: int = MMAP_THRESHOLD_BYTES, environ: Mapping[str, str] = os.environ) -> bool:
    """Keep glibc's mmap threshold where it starts, for a process that runs for days.

    glibc serves a large block from mmap and returns it on free, but each time such a block is
    freed it raises the threshold to that block's size (up to 32 MB): from then on blocks of that
    size come from the heap, and the heap's top stays in RSS after they are freed: a step in a
    long-running exporter's RSS (``bench/bench_soak.py`` watches it). Returns whether it was pinned:
    not on other C libraries, nor when ``MALLOC_MMAP_THRESHOLD_`` already sets it.
    """
    if not sys.platform.startswith("linux") or "MALLOC_MMAP_THRESHOLD_" in environ:
        return False
    import ctypes

    try:
        mallopt = ctypes.CDLL(None).mallopt
    except (OSError, AttributeError):  # musl and others have no mallopt
        return False
    m_mmap_threshold = -3  # <malloc.h> M_MMAP_THRESHOLD
    return bool(mallopt(m_mmap_threshold, int(size)))


class SnapshotCollector(Collector):
    """Gathers at scrape time, caches for ``cache_ttl_s``, and never runs two gathers at once."""

    def __init__(
        self,
        gather: Callable[[], ClusterSnapshot],
        options: ExportOptions = ExportOptions(),
        cache_ttl_s: float = DEFAULT_CACHE_TTL_S,
        clock: Callable[[], float] = time.monotonic,
    ):
        self._gather = gather
        self.options = options
        self.cache_ttl_s = cache_ttl_s
        self._clock = clock
        self._lock = threading.Lock()
        self._snapshot: ClusterSnapshot | None = None
        self._gathered_at = 0.0
        self._generation = 0  # bumped after each gather, so waiters can tell one finished
        self._churn = IdChurn()  # transactional ids new since the previous gather
        self._churn_for: tuple[ClusterSnapshot, ChurnSample] | None = None

    def stale(self) -> bool:
        """Whether the next scrape gathers anew (no snapshot, or it is past the cache TTL): what the
        HTTP side keeps of the served one is then let go before it asks (:mod:`kafkatxn.exposition_shared`)."""
        return self._snapshot is None or self._clock() - self._gathered_at >= self.cache_ttl_s

    def describe(self) -> list[Metric]:
        # Registering must not gather: the cluster is only asked at scrape time.
        return []

    def snapshot(self) -> tuple[ClusterSnapshot, float]:
        """The snapshot to serve and its age in seconds."""
        arrived_in = self._generation
        with self._lock:
            now = self._clock()
            fresh = self._snapshot is not None and now - self._gathered_at < self.cache_ttl_s
            # A gather that finished while this scrape waited for the lock answers it too.
            if self._snapshot is not None and (fresh or self._generation != arrived_in):
                return self._snapshot, now - self._gathered_at
            # The snapshot served until now is let go before the next is gathered (a scrape still
            # writing it holds its own): at 20,000 groups x 20 partitions its 400,000 group samples
            # would otherwise be held through the gather, at its peak, beside the new ones.
            self._snapshot = self._churn_for = None
            if self._generation == 1:
                _settle_heap()
            try:
                snap = self._gather()
            except UsageError:
                raise
            except Exception as exc:  # noqa: BLE001 - the exporter must outlive anything one gather does
                log.warning("gather failed: %s", exc, exc_info=log.isEnabledFor(logging.DEBUG))
                # Our own errors are already one line for the user; anything else is named, not its class.
                snap = ClusterSnapshot(int(time.time() * 1000), error=str(exc) if isinstance(exc, KafkatxnError) else f"unexpected failure: {exc}")
            self._snapshot, self._gathered_at = snap, self._clock()
            if snap.up and snap.transactional_ids is not None:  # an incomplete listing keeps the baseline
                self._churn_for = (snap, self._churn.observe(snap.transactional_ids))
            self._generation += 1
            return snap, 0.0

    # The one family that differs between scrapes of one snapshot (exposition.SnapshotBodies).
    per_scrape_family = "kafkatxn_snapshot_age_seconds"

    def collect(self) -> Iterator[Metric]:
        yield from self.families(*self.snapshot())

    def families(self, snap: ClusterSnapshot, age: float) -> Iterator[Metric]:
        """What :meth:`collect` yields for ``snap`` served at ``age``."""
        yield from metric_families(snap, self.options, age)
        churn = self._churn_for
        if churn is not None and churn[0] is snap:
            yield from churn_metric_families(churn[1], self.options.per_family)


def _settle_heap() -> None:
    """What the first gather imported and built to last (kafka-python's protocol tables, the wire's and
    the fact layer's modules, the long-lived clients) taken out of the cyclic collector's sight
    (``gc.freeze``), as the command's start took its own (``cli.common.settle_heap``): the full
    collection that ends every scrape then walks 40,000 objects, not 110,000 (30 -> 10-25 ms a scrape
    at 5,000 groups). Called as the second gather begins, once the first snapshot is let go: what is
    frozen is what lives on (a frozen object is still freed when the last reference to it goes), once
    what is cyclic garbage now is collected."""
    gc.collect()
    gc.freeze()


class ClusterGatherer:
    """Gathers with one long-lived :class:`Cluster`, a fresh deadline per scrape; after a failure the
    clients are rebuilt, so the exporter recovers by itself when the cluster comes back."""

    def __init__(
        self,
        config: ConnectionConfig,
        scrape_timeout_s: float = DEFAULT_SCRAPE_TIMEOUT_S,
        topic_regex: str | None = None,
        max_transaction_timeout_ms: int | None = None,
        groups: bool = False,
        group_regex: str | None = None,
        spark_checkpoints: Sequence[str] = (), spark_writers: Sequence = (),
    ):
        # The scrape deadline is the command's deadline, so error messages name the right figure.
        self.config = dataclasses.replace(config, timeout_ms=int(scrape_timeout_s * 1000))
        self.scrape_timeout_s = scrape_timeout_s
        self.topic_regex = topic_regex
        self.max_transaction_timeout_ms = max_transaction_timeout_ms
        self._cluster: Cluster | None = None
        self._probes = ProbeMemo()  # the probes' answers from the last gather, taken again while still true
        self.groups = groups
        self.group_regex, self.spark_checkpoints, self.spark_writers = group_regex, tuple(spark_checkpoints), tuple(spark_writers)
        if topic_regex:
            compile_regex(topic_regex, "--topic-regex")
        if group_regex:
            compile_regex(group_regex, "--group-regex")

    def __call__(self) -> ClusterSnapshot:
        if self._cluster is None:
            self._cluster = Cluster(self.config)
        self._cluster.restart_deadline(self.scrape_timeout_s)
        try:
            with self._cluster.one_run():  # the scrape's run (gather_snapshot's), begun here for what goes ahead
                if self.groups:  # the brokers' group listings go with the scrape's Metadata
                    self._cluster.list_groups_ahead()
                snap = gather_snapshot(self._cluster, self.topic_regex, self.max_transaction_timeout_ms, groups=self.groups,
                                       group_regex=self.group_regex, spark_checkpoints=self.spark_checkpoints,
                                       spark_writers=self.spark_writers, probe_memo=self._probes)
        except Exception:
            self.close()
            raise
        if not snap.up:
            log.warning("cluster not reachable: %s", snap.error)
            self.close()
        return snap

    def close(self) -> None:
        self._probes = ProbeMemo()  # the cluster that answers next may not be the one that answered these
        if self._cluster is not None:
            self._cluster.close()
            self._cluster = None


class _StaticCollector(Collector):
    def __init__(self, families: list[Metric]):
        self._families = families

    def collect(self) -> Iterator[Metric]:
        return iter(self._families)


def render_text(snapshot: ClusterSnapshot, options: ExportOptions = ExportOptions()) -> bytes:
    """The Prometheus text exposition of one snapshot."""
    from kafkatxn.exposition import encode

    registry = CollectorRegistry(auto_describe=False)
    registry.register(_StaticCollector(metric_families(snapshot, options)))
    return encode(registry)


def render_parts(snapshot: ClusterSnapshot, options: ExportOptions) -> Iterator[bytes]:
    """:func:`render_text` in parts, each made when it is asked for (the whole text is never held)."""
    from kafkatxn.exposition import iter_parts

    return iter_parts(metric_families(snapshot, options))


def write_textfile(path: str | os.PathLike, snapshot: ClusterSnapshot, options: ExportOptions = ExportOptions()) -> None:
    """Write the metrics for node_exporter's textfile collector atomically: a temporary file in the
    same directory (not ending in .prom, so never read half-written), then a rename over ``path``."""
    target = Path(path)
    if target.suffix != ".prom":
        raise UsageError(f"--textfile {str(target)!r} must end in .prom (node_exporter's textfile collector reads only *.prom)")
    directory = target.parent if str(target.parent) else Path(".")
    if not directory.is_dir():
        raise UsageError(f"--textfile: directory {str(directory)!r} does not exist")
    data = render_parts(snapshot, options)
    try:
        fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=directory)
    except OSError as exc:
        raise UsageError(f"--textfile: cannot write in {str(directory)!r}: {exc.strerror}") from None
    try:
        with os.fdopen(fd, "wb") as f:
            f.writelines(data)
            f.flush()
            os.fsync(f.fileno())
        os.chmod(tmp, 0o644)  # mkstemp makes it 0600; node_exporter usually runs as another user
        os.replace(tmp, target)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise


def build_registry(collector: Collector) -> CollectorRegistry:
    registry = CollectorRegistry(auto_describe=False)
    registry.register(collector)
    return registry
