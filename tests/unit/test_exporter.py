"""kafkatxn.exporter without a broker: metrics from fake snapshots, cache, single-flight gathers,
recovery, textfile writing (the HTTP side is tested in test_exporter_http.py)."""

from __future__ import annotations

import os
import stat
import threading
import time

import pytest
from prometheus_client.parser import text_string_to_metric_families

from kafkatxn import exporter
from kafkatxn.snapshot import ClusterSnapshot, HangingSample, PartitionSample, TransactionSample
from kafkatxn.errors import UsageError
from kafkatxn.exporter import SnapshotCollector, render_text
from kafkatxn.exporter_metrics import ExportOptions, metric_families

NOW_MS = 1_700_000_000_000


def fake_snapshot(**kw) -> ClusterSnapshot:
    base = dict(
        taken_at_ms=NOW_MS,
        duration_s=0.25,
        cluster_id="c1",
        brokers=(1, 2),
        replica_brokers=(1, 2, 3),
        partitions=(
            PartitionSample("orders", 0, 1, 120, 100),
            PartitionSample("orders", 1, 2, 50, 50),
            PartitionSample("payments", 0, 1, 9, 9),
            PartitionSample("payments", 1, 3, None, None),
        ),
        transaction_states={"Ongoing": 2, "CompleteCommit": 5},
        open_transactions=(
            TransactionSample("app-1", "Ongoing", 7, 1, NOW_MS - 90_000, 60_000, ("orders",)),
            TransactionSample("app-2", "Ongoing", 8, 2, NOW_MS - 5_000, 60_000, ("orders",)),
        ),
        active_producer_ids={1: 12, 2: 3},
        hanging=(HangingSample("orders", 0, 7, 100, "app-1", "coordinator does not track this partition", 20),),
        max_transaction_timeout_ms=900_000,
        missing=("payments-1: no leader",),
    )
    base.update(kw)
    return ClusterSnapshot(**base)


def samples(snapshot: ClusterSnapshot, options: ExportOptions = ExportOptions()) -> dict[str, dict[tuple, float]]:
    """name -> {sorted label items: value}, parsed back from the text exposition."""
    out: dict[str, dict[tuple, float]] = {}
    for family in text_string_to_metric_families(render_text(snapshot, options).decode()):
        for s in family.samples:
            out.setdefault(s.name, {})[tuple(sorted(s.labels.items()))] = s.value
    return out


def test_metrics_of_a_snapshot_round_trip_through_the_text_format():
    m = samples(fake_snapshot())
    assert m["kafkatxn_up"] == {(): 1}
    assert m["kafkatxn_scrape_duration_seconds"] == {(): 0.25}
    assert m["kafkatxn_scrape_incomplete"] == {(): 1} and m["kafkatxn_scrape_missing_parts"] == {(): 1}
    assert m["kafkatxn_broker_up"] == {(("broker", "1"),): 1, (("broker", "2"),): 1, (("broker", "3"),): 0}
    assert m["kafkatxn_partition_lso_lag_messages"] == {
        (("partition", "0"), ("topic", "orders")): 20,
        (("partition", "1"), ("topic", "orders")): 0,
        (("partition", "0"), ("topic", "payments")): 0,
    }
    assert m["kafkatxn_partition_high_watermark"][(("partition", "0"), ("topic", "orders"))] == 120
    assert m["kafkatxn_partition_last_stable_offset"][(("partition", "0"), ("topic", "orders"))] == 100
    assert m["kafkatxn_lso_lag_max_messages"] == {(): 20} and m["kafkatxn_lagging_partitions"] == {(): 1}
    assert m["kafkatxn_partitions"] == {(): 4}
    assert m["kafkatxn_transactions"][(("state", "Ongoing"),)] == 2
    assert m["kafkatxn_transactions"][(("state", "PrepareCommit"),)] == 0  # absent states are 0, not gone
    assert m["kafkatxn_transaction_oldest_age_seconds"] == {(): 90}
    assert m["kafkatxn_hanging_transactions"] == {(): 1}
    assert m["kafkatxn_active_producer_ids"] == {(("broker", "1"),): 12, (("broker", "2"),): 3}
    assert m["kafkatxn_max_transaction_timeout_seconds"] == {(): 900}


def test_no_label_clashes_with_prometheus_target_labels():
    for family in metric_families(fake_snapshot()):
        assert family.name.startswith("kafkatxn_")
        for s in family.samples:
            assert not {"cluster", "instance", "job"} & set(s.labels), s


def test_only_lagging_keeps_partition_series_where_the_lso_lags():
    m = samples(fake_snapshot(), ExportOptions(only_lagging=True))
    assert list(m["kafkatxn_partition_lso_lag_messages"]) == [(("partition", "0"), ("topic", "orders"))]
    assert m["kafkatxn_lagging_partitions"] == {(): 1}  # cluster-wide figures stay whole


@pytest.mark.parametrize("options", [ExportOptions(), ExportOptions(only_lagging=True)])
def test_partition_series_from_the_gathers_columns_make_no_sample_and_say_the_same(options):
    """The gather's partition samples are columns (partition_columns.of_offsets): the per-partition series
    read them as they are, not 30,000 samples made to be taken apart again (a tenth of the metric families'
    CPU at 30,000 partitions); the text is the one of the samples themselves."""
    from kafkatxn.model import PartitionInfo, TopicPartition
    from kafkatxn.snapshot import partition_samples

    as_tuples = fake_snapshot()
    selected = [PartitionInfo(p.topic, p.partition, p.leader, (p.leader,), (p.leader,)) for p in as_tuples.partitions]
    tps = [TopicPartition(p.topic, p.partition) for p in selected]
    offsets = {TopicPartition(p.topic, p.partition): (p.last_stable_offset, p.high_watermark)
               for p in as_tuples.partitions if p.high_watermark is not None}
    columns = partition_samples(selected, tps, offsets)
    assert tuple(columns) == as_tuples.partitions  # the same samples, read as rows
    columns = partition_samples(selected, tps, offsets)
    assert render_text(fake_snapshot(partitions=columns), options) == render_text(as_tuples, options)
    assert columns._rows is None  # no sample made


def test_per_topic_replaces_partition_series():
    m = samples(fake_snapshot(), ExportOptions(per_topic=True))
    assert not any(name.startswith("kafkatxn_partition_") for name in m)
    assert m["kafkatxn_topic_lso_lag_messages"] == {(("topic", "orders"),): 20, (("topic", "payments"),): 0}
    assert m["kafkatxn_topic_lagging_partitions"] == {(("topic", "orders"),): 1, (("topic", "payments"),): 0}
    only = samples(fake_snapshot(), ExportOptions(per_topic=True, only_lagging=True))
    assert list(only["kafkatxn_topic_lso_lag_max_messages"]) == [(("topic", "orders"),)]


def test_an_unreachable_cluster_exports_up_0_and_no_stale_figures():
    m = samples(ClusterSnapshot(NOW_MS, duration_s=2.0, error="cannot reach any broker"))
    assert m["kafkatxn_up"] == {(): 0}
    assert m["kafkatxn_scrape_incomplete"] == {(): 1}
    assert "kafkatxn_partition_lso_lag_messages" not in m and "kafkatxn_hanging_transactions" not in m


# -- the collector ------------------------------------------------------------------------------


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


class CountingGather:
    def __init__(self, snapshots=None, release: threading.Event | None = None):
        self.calls = 0
        self.snapshots = snapshots
        self.release = release
        self.started = threading.Event()

    def __call__(self) -> ClusterSnapshot:
        self.calls += 1
        self.started.set()
        if self.release is not None:
            assert self.release.wait(5)
        if self.snapshots:
            item = self.snapshots.pop(0)
            if isinstance(item, Exception):
                raise item
            return item
        return fake_snapshot(duration_s=float(self.calls))


def value(collector: SnapshotCollector, name: str) -> float:
    for family in collector.collect():
        for s in family.samples:
            if s.name == name and not s.labels:
                return s.value
    raise AssertionError(f"{name} not collected")


def test_the_cache_serves_scrapes_within_the_ttl_and_gathers_after_it():
    clock, gather = Clock(), CountingGather()
    collector = SnapshotCollector(gather, cache_ttl_s=10, clock=clock)
    assert value(collector, "kafkatxn_scrape_duration_seconds") == 1
    clock.now += 4
    assert value(collector, "kafkatxn_scrape_duration_seconds") == 1
    assert value(collector, "kafkatxn_snapshot_age_seconds") == 4
    clock.now += 7
    assert value(collector, "kafkatxn_scrape_duration_seconds") == 2
    assert gather.calls == 2


def test_registering_the_collector_does_not_touch_the_cluster():
    gather = CountingGather()
    exporter.build_registry(SnapshotCollector(gather))
    assert gather.calls == 0


@pytest.mark.parametrize("ttl", [0.0, 10.0])
def test_scrapes_arriving_during_a_gather_wait_for_it_instead_of_starting_another(ttl):
    release = threading.Event()
    gather = CountingGather(release=release)
    collector = SnapshotCollector(gather, cache_ttl_s=ttl)
    results: list[float] = []
    first = threading.Thread(target=lambda: results.append(value(collector, "kafkatxn_scrape_duration_seconds")))
    first.start()
    assert gather.started.wait(5)
    waiting = [threading.Thread(target=lambda: results.append(value(collector, "kafkatxn_scrape_duration_seconds")))
               for _ in range(5)]
    for t in waiting:
        t.start()
    time.sleep(0.2)  # let them all block on the running gather
    release.set()
    for t in [first, *waiting]:
        t.join(5)
    assert gather.calls == 1
    assert results == [1.0] * 6


def test_the_exporter_command_drains_scrapes_before_closing_its_clients_and_dumps_stacks_on_a_crash(monkeypatch):
    from kafkatxn import exporter as exporter_mod
    from kafkatxn import exporter_http
    from kafkatxn.cli.app import main

    events: list[object] = []
    monkeypatch.setattr(exporter_mod.ClusterGatherer, "close", lambda self: events.append("closed"))
    monkeypatch.setattr(exporter_mod, "pin_mmap_threshold", lambda: True)
    monkeypatch.setattr(exporter_http, "serve", lambda *a, **k: events.append(("served", k["drain_s"])))
    monkeypatch.setattr("kafkatxn.kafka.check_client_settings", lambda config: None)
    dumps: list[dict] = []
    monkeypatch.setattr("kafkatxn.cli.exporter_cmd.faulthandler.enable", lambda *a, **k: dumps.append(k))
    try:
        main(["exporter", "-b", "127.0.0.1:9", "--listen", "127.0.0.1:0", "--scrape-timeout", "7s"])
    except SystemExit:
        pass
    # Served, then the scrapes under way drained (their gathers end within the 7 s), then the clients closed.
    (served, drain_s), *rest = events
    assert served == "served" and 7 < drain_s <= 15 and rest == ["closed"], events
    assert dumps == [{"all_threads": True}]  # a native crash names every thread's Python stack on stderr


def test_a_failing_gather_exports_up_0_and_the_next_scrape_recovers():
    gather = CountingGather(snapshots=[RuntimeError("socket exploded"), fake_snapshot(), ])
    collector = SnapshotCollector(gather, cache_ttl_s=0)
    assert value(collector, "kafkatxn_up") == 0
    assert value(collector, "kafkatxn_up") == 1


def test_usage_errors_are_not_swallowed():
    collector = SnapshotCollector(CountingGather(snapshots=[UsageError("bad regex")]), cache_ttl_s=0)
    with pytest.raises(UsageError):
        list(collector.collect())


# -- textfile -----------------------------------------------------------------------------------


def test_textfile_is_written_whole_readable_and_without_leftovers(tmp_path):
    target = tmp_path / "kafkatxn.prom"
    target.write_text("old\n")
    exporter.write_textfile(target, fake_snapshot())
    text = target.read_text()
    names = {f.name for f in text_string_to_metric_families(text)}
    assert {"kafkatxn_up", "kafkatxn_hanging_transactions"} <= names
    assert stat.S_IMODE(os.stat(target).st_mode) == 0o644
    assert sorted(p.name for p in tmp_path.iterdir()) == ["kafkatxn.prom"]


def test_the_textfile_is_written_as_its_text_is_made(tmp_path, monkeypatch):
    """The textfile's body is written a part at a time (at 20,000 groups x 20 partitions it is 250 MB
    of text, never held whole), and is the exposition of the snapshot."""
    from kafkatxn import exposition, exposition_tables

    monkeypatch.setattr(exposition_tables, "_CHUNK_ROWS", 2)
    monkeypatch.setattr(exposition, "_OWN_PART_CHARS", 1)
    writes = []
    real_fdopen = exporter.os.fdopen

    class Recording:
        def __init__(self, f):
            self.f = f

        def __enter__(self):
            return self

        def __exit__(self, *exc):
            return self.f.__exit__(*exc)

        def __getattr__(self, name):
            return getattr(self.f, name)

        def write(self, data):
            writes.append(len(data))
            return self.f.write(data)

        def writelines(self, parts):
            for part in parts:
                self.write(part)

    monkeypatch.setattr(exporter.os, "fdopen", lambda fd, mode: Recording(real_fdopen(fd, mode)))
    target = tmp_path / "kafkatxn.prom"
    snap = fake_snapshot()
    exporter.write_textfile(target, snap)
    assert target.read_bytes() == exporter.render_text(snap)
    assert len(writes) > 10


def test_a_failed_textfile_write_leaves_the_old_file_and_no_temporary(tmp_path, monkeypatch):
    target = tmp_path / "kafkatxn.prom"
    target.write_text("old\n")

    def broken_replace(src, dst):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(exporter.os, "replace", broken_replace)
    with pytest.raises(OSError):
        exporter.write_textfile(target, fake_snapshot())
    assert target.read_text() == "old\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["kafkatxn.prom"]


def test_textfile_path_must_be_a_prom_file_in_an_existing_directory(tmp_path):
    with pytest.raises(UsageError, match=r"\.prom"):
        exporter.write_textfile(tmp_path / "metrics.txt", fake_snapshot())
    with pytest.raises(UsageError, match="does not exist"):
        exporter.write_textfile(tmp_path / "nope" / "m.prom", fake_snapshot())


def test_the_exporter_pins_glibcs_mmap_threshold_unless_the_environment_sets_it(monkeypatch):
    """A raised threshold left a ~1.9 MB step in the soak's RSS (bench/README.md, bench_soak.py)."""
    import sys

    from kafkatxn import exporter as exporter_mod

    if not sys.platform.startswith("linux"):
        assert exporter_mod.pin_mmap_threshold() is False
        return
    assert exporter_mod.pin_mmap_threshold(environ={}) is True
    assert exporter_mod.pin_mmap_threshold(environ={"MALLOC_MMAP_THRESHOLD_": "65536"}) is False


def test_the_exporter_command_pins_the_threshold_before_it_serves(monkeypatch):
    from kafkatxn import exporter as exporter_mod
    from kafkatxn import exporter_http
    from kafkatxn.cli.app import main

    calls = []
    monkeypatch.setattr(exporter_mod, "pin_mmap_threshold", lambda: calls.append("pinned") or True)
    monkeypatch.setattr(exporter_http, "serve", lambda *a, **k: calls.append("served"))
    try:
        main(["exporter", "-b", "127.0.0.1:9", "--listen", "127.0.0.1:0"])
    except SystemExit:
        pass
    assert calls == ["pinned", "served"]
