"""The exporter's memo of read_committed probe answers (facts_probes.ProbeMemo): an answer is taken
again only while the cluster says the gap is as it was probed, and never makes a verdict the probe
would not make now."""

from __future__ import annotations

from kafkatxn.facts_cluster import gather_snapshot
from kafkatxn.facts_probes import ProbeMemo
from kafkatxn.model import TopicPartition
from tests.support.blocked_group import PhantomCluster
from tests.support.fake_kafka import KafkaModel

READABLE = TopicPartition("orders", 0)  # group "lags" at 7: records 7..9 before the LSO 10
MARKERS = TopicPartition("orders", 1)  # group "markers" at 7: 7..9 are markers and aborted records
BLOCKED = TopicPartition("orders", 2)  # group "held" at 7: 7..9 markers, then an open transaction (LSO 10 < HW 12)


class Clock:
    def __init__(self):
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def setup():
    model = KafkaModel(brokers=(1,))
    model.add_transaction_log([1])
    for tp in (READABLE, MARKERS):
        model.add_partition(tp.topic, tp.partition, lso=10, hw=10)
    model.add_partition(BLOCKED.topic, BLOCKED.partition, lso=10, hw=12)
    model.groups = {"lags": {READABLE: 7}, "markers": {MARKERS: 7}, "held": {BLOCKED: 7}}
    cluster = PhantomCluster(model, unreadable={MARKERS: {7, 8, 9}, BLOCKED: {7, 8, 9}})
    return model, cluster


def probed(cluster) -> dict:
    """Partition -> start of every probe asked since the calls were last cleared."""
    out = {}
    for call in cluster.calls:
        if call[0] == "first_readable_offsets":
            out.update(call[1])
    return out


def log_starts_asked(cluster) -> set:
    return {tp for call in cluster.calls if call[0] == "log_start_offsets" for tp in call[1]}


def verdicts(snap) -> dict:
    return {(g.group, g.topic, g.partition): (g.lag_messages, g.blocked, g.lag_to_lso_messages) for g in snap.groups}


def test_an_answer_is_taken_again_while_the_gap_is_as_it_was_probed():
    _, cluster = setup()
    memo = ProbeMemo(clock=Clock())
    first = gather_snapshot(cluster, groups=True, probe_memo=memo)
    assert probed(cluster) == {READABLE: 7, MARKERS: 7, BLOCKED: 7}
    assert verdicts(first)[("held", "orders", 2)][1]  # blocked: only markers before the open transaction
    cluster.calls.clear()
    again = gather_snapshot(cluster, groups=True, probe_memo=memo)
    assert probed(cluster) == {}  # nothing probed again
    # A record found is taken again only with the log start, read now, not past it; a gap found
    # empty needs no more (a log start moved into it only shortens it).
    assert log_starts_asked(cluster) == {READABLE}
    assert verdicts(again) == verdicts(first)
    assert verdicts(again) == verdicts(gather_snapshot(cluster, groups=True))  # as probing afresh says


def test_a_gap_whose_offsets_moved_is_probed_again():
    model, cluster = setup()
    memo = ProbeMemo(clock=Clock())
    gather_snapshot(cluster, groups=True, probe_memo=memo)
    # The open transaction committed: LSO 12 = HW, records 10..11 readable now. Had the kept "nothing
    # readable" answer been taken, the group would read as caught up at the LSO.
    model.offsets[BLOCKED] = [12, 12]
    model.offsets[MARKERS] = [10, 11]  # a record written after the markers: the HW moved
    cluster.calls.clear()
    snap = gather_snapshot(cluster, groups=True, probe_memo=memo)
    assert probed(cluster) == {BLOCKED: 7, MARKERS: 7}
    assert verdicts(snap)[("held", "orders", 2)] == (5, False, 5)  # lagging: 10..11 to read


def test_a_record_the_log_start_passed_is_probed_again():
    model, cluster = setup()
    memo = ProbeMemo(clock=Clock())
    gather_snapshot(cluster, groups=True, probe_memo=memo)
    model.log_starts[READABLE] = 8  # retention or DeleteRecords removed the record found at 7
    cluster.calls.clear()
    gather_snapshot(cluster, groups=True, probe_memo=memo)
    assert probed(cluster) == {READABLE: 7}


def test_an_answer_older_than_its_age_or_of_another_cluster_is_probed_again():
    model, cluster = setup()
    clock = Clock()
    memo = ProbeMemo(max_age_s=60, clock=clock)
    gather_snapshot(cluster, groups=True, probe_memo=memo)
    clock.now += 61
    cluster.calls.clear()
    gather_snapshot(cluster, groups=True, probe_memo=memo)
    assert probed(cluster) == {READABLE: 7, MARKERS: 7, BLOCKED: 7}
    model.cluster_id = "another-cluster"  # the same bootstrap now answers for another cluster
    cluster.calls.clear()
    gather_snapshot(cluster, groups=True, probe_memo=memo)
    assert probed(cluster) == {READABLE: 7, MARKERS: 7, BLOCKED: 7}


def test_only_the_last_gathers_answers_are_kept():
    model, cluster = setup()
    memo = ProbeMemo(clock=Clock())
    gather_snapshot(cluster, groups=True, probe_memo=memo)
    model.groups["lags"] = {READABLE: 8}  # the group read on: its old start is not asked again
    gather_snapshot(cluster, groups=True, probe_memo=memo)
    model.groups["lags"] = {READABLE: 7}
    cluster.calls.clear()
    gather_snapshot(cluster, groups=True, probe_memo=memo)
    assert probed(cluster) == {READABLE: 7}


def test_the_exporter_keeps_the_probes_answers_from_one_scrape_to_the_next(monkeypatch):
    from kafkatxn import exporter
    from kafkatxn.config import ConnectionConfig

    _, cluster = setup()
    monkeypatch.setattr(exporter, "Cluster", lambda config: cluster)
    gatherer = exporter.ClusterGatherer(ConnectionConfig(bootstrap_servers="fake:9092"), groups=True)
    gatherer()
    cluster.calls.clear()
    gatherer()
    assert probed(cluster) == {}
    gatherer.close()  # after a failure: the next cluster may be another
    cluster.calls.clear()
    gatherer()
    assert probed(cluster) == {READABLE: 7, MARKERS: 7, BLOCKED: 7}


def test_the_log_starts_kept_answers_need_go_in_the_request_of_those_of_places_without_a_commit():
    """One ListOffsets (log starts) a leader a gather: the kept answers' and the uncommitted places'."""
    model, cluster = setup()
    uncommitted = model.add_partition("orders", 3, lso=10, hw=10)
    model.assignments = {"lags": {READABLE, uncommitted}}  # a member has orders-3, no offset committed there
    memo = ProbeMemo(clock=Clock())
    first = gather_snapshot(cluster, groups=True, probe_memo=memo)
    cluster.calls.clear()
    again = gather_snapshot(cluster, groups=True, probe_memo=memo)
    asked = [call[1] for call in cluster.calls if call[0] == "log_start_offsets"]
    assert len(asked) == 1 and set(asked[0]) == {READABLE, uncommitted}
    assert probed(cluster) == {}
    assert verdicts(again) == verdicts(first) and ("lags", "orders", 3) in verdicts(again)
