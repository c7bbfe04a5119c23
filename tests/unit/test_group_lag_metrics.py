"""Consumer-group lag in the exporter and in `check --groups`: the gather over the shared fake, the
metric families and the check findings over snapshots."""

from __future__ import annotations

import pytest

from kafkatxn import check, exitcodes, monitoring_plugin
from kafkatxn.exporter import render_text
from kafkatxn.exporter_metrics import ExportOptions
from kafkatxn.facts_cluster import gather_snapshot
from kafkatxn.snapshot import ClusterSnapshot, GroupSample
from kafkatxn.monitoring_plugin import check_ranges
from tests.support.blocked_group import blocked_model

NOW = 1_700_000_000_000


def samples(text: bytes) -> dict[str, float]:
    from prometheus_client.parser import text_string_to_metric_families

    out = {}
    for family in text_string_to_metric_families(text.decode()):
        for s in family.samples:
            labels = ",".join(f"{k}={v}" for k, v in sorted(s.labels.items()))
            out[f"{s.name}{{{labels}}}"] = s.value
    return out


# billing's transaction is past its own timeout (10 min): blocked, not in flight.
OVERDUE = {"started_ago_ms": 700_000, "timeout_ms": 600_000}


def test_gather_measures_group_lag_transaction_aware():
    _, cluster = blocked_model(**OVERDUE)
    snap = gather_snapshot(cluster, groups=True)
    by_group = {g.group: g for g in snap.groups}
    assert by_group["billing"].blocked and by_group["billing"].lag_messages == 0
    assert (by_group["reports"].lag_messages, by_group["reports"].lag_to_hw_messages, by_group["reports"].blocked) == (0, 3, False)
    assert gather_snapshot(cluster).groups is None  # not asked for: no group requests at all
    only = gather_snapshot(cluster, groups=True, group_regex="^rep")
    assert [g.group for g in only.groups] == ["reports"]
    # Within its timeout, tracked by its coordinator: the group waits on it, it is not blocked.
    _, cluster = blocked_model()
    (billing,) = [g for g in gather_snapshot(cluster, groups=True).groups if g.group == "billing"]
    assert billing.waiting and not billing.blocked and billing.txn_age_ms is not None


def test_samples_made_without_their_constructor_equal_the_constructors():
    """group_samples makes the not-blocked samples with tuple.__new__ (100,000 a scrape): each must be
    what GroupSample(...) makes with its defaults, whatever fields GroupSample gains."""
    _, cluster = blocked_model()
    snap = gather_snapshot(cluster, groups=True)
    not_blocked = [g for g in snap.groups if not g.blocked and not g.waiting]
    assert not_blocked
    for g in not_blocked:
        made = GroupSample(g.group, g.topic, g.partition, g.lag_messages, g.lag_to_lso_messages, g.lag_to_hw_messages, False)
        assert g == made and len(g) == len(GroupSample._fields) and g._asdict() == made._asdict()


def test_metric_families_per_partition_and_per_group():
    _, cluster = blocked_model(**OVERDUE)
    snap = gather_snapshot(cluster, groups=True)
    got = samples(render_text(snap))
    assert got["kafkatxn_group_blocked{group=billing,partition=0,topic=orders}"] == 1
    assert got["kafkatxn_group_blocked{group=reports,partition=0,topic=audit}"] == 0
    assert got["kafkatxn_group_lag_messages{group=reports,partition=0,topic=audit}"] == 0
    assert got["kafkatxn_group_lag_to_high_watermark_messages{group=reports,partition=0,topic=audit}"] == 3
    assert got["kafkatxn_group_lag_to_lso_messages{group=reports,partition=0,topic=audit}"] == 3
    assert got["kafkatxn_group_blocked_partitions{group=billing}"] == 1
    assert got["kafkatxn_group_summed_lag_to_high_watermark_messages{group=billing}"] == 4
    assert got["kafkatxn_groups_blocked{}"] == 1
    assert got["kafkatxn_group_waiting_partitions{group=billing}"] == 0 and got["kafkatxn_groups_waiting{}"] == 0
    per_group = samples(render_text(snap, ExportOptions(per_group=True)))
    assert not any(k.startswith("kafkatxn_group_blocked{") for k in per_group)
    assert per_group["kafkatxn_group_blocked_partitions{group=billing}"] == 1
    # Without group lag gathered, no group families at all.
    assert not any(k.startswith("kafkatxn_group") for k in samples(render_text(gather_snapshot(cluster))))
    # A transaction in flight: waiting, counted, not blocked.
    _, cluster = blocked_model()
    got = samples(render_text(gather_snapshot(cluster, groups=True)))
    assert got["kafkatxn_group_blocked{group=billing,partition=0,topic=orders}"] == 0
    assert got["kafkatxn_group_waiting_partitions{group=billing}"] == 1
    assert (got["kafkatxn_groups_waiting{}"], got["kafkatxn_groups_blocked{}"]) == (1, 0)


def test_the_fix_brings_blocked_back_to_0():
    model, cluster = blocked_model(**OVERDUE)
    cluster.fence_transactional_id("billing-tx", 60_000)
    got = samples(render_text(gather_snapshot(cluster, groups=True)))
    assert got["kafkatxn_group_blocked{group=billing,partition=0,topic=orders}"] == 0
    assert got["kafkatxn_groups_blocked{}"] == 0


def snapshot_with(groups):
    return ClusterSnapshot(NOW, 0.1, cluster_id="c", brokers=(1,), groups=groups, max_transaction_timeout_ms=900_000)


def test_check_blocked_group_is_critical_and_lag_thresholds_apply():
    groups = (GroupSample("billing", "orders", 0, 0, 0, 4, True, 20_000, txn_hanging=True),
              GroupSample("reports", "audit", 0, 500, 500, 503, False))
    result = check.evaluate(snapshot_with(groups), check.Thresholds(*check_ranges("1000", "10000", "5m", "15m", None, None, "100", None)))
    assert result.status is exitcodes.Status.CRITICAL
    assert "1 consumer group blocked" in result.summary and "1 group partition with lag > 100" in result.summary
    assert {f.kind for f in result.findings} == {"group_blocked", "group_lag"}
    perf = monitoring_plugin.format_perfdata(result.perfdata)
    assert "groups_blocked=1;;0;0" in perf and "group_lag_max=500;100;;0" in perf
    assert result.facts["groups_blocked"] == 1


def test_check_without_groups_has_no_group_perfdata():
    result = check.evaluate(snapshot_with(None))
    assert result.status is exitcodes.Status.OK and "groups_blocked" not in monitoring_plugin.format_perfdata(result.perfdata)
    caught_up = check.evaluate(snapshot_with((GroupSample("reports", "audit", 0, 0, 0, 3, False),)))
    assert caught_up.status is exitcodes.Status.OK and "groups_blocked=0" in monitoring_plugin.format_perfdata(caught_up.perfdata)


def test_group_lag_reuses_the_offsets_pass_and_reads_commits_before_it():
    model, cluster = blocked_model()
    model.add_partition("orders", 1, leader=2, lso=4, hw=4)
    snap = gather_snapshot(cluster, groups=True)
    assert {g.group for g in snap.groups} == {"billing", "reports"} and not snap.missing
    names = [c[0] for c in cluster.calls]
    # One ListOffsets pass (both isolation levels, one request each per leader), not a second one
    # over the groups' partitions.
    assert names.count("ListOffsets") == 2 * len({p.leader for p in model.partitions.values()})
    # The commits are read before the offsets they are compared with (a commit cannot pass the LSO
    # of its moment, so read in this order the lag is never negative).
    assert names.index("group_offsets") < names.index("ListOffsets")


def test_group_partitions_whose_offsets_did_not_arrive_are_asked_again_and_reported():
    model, cluster = blocked_model()
    orders = next(tp for tp in model.partitions if tp.topic == "orders")
    model.partition_errors[(1, orders)] = ["NOT_LEADER_OR_FOLLOWER"] * 2 + ["UNKNOWN_SERVER_ERROR"] * 4
    snap = gather_snapshot(cluster, groups=True)
    missing = {(m.what, m.subject) for m in snap.missing}
    # Missing in the offsets pass, asked again for the group, and missing there too: both say so.
    assert {("offsets", orders), ("group lag", orders)} <= missing
    assert {g.group for g in snap.groups} == {"reports"}  # no lag made up for billing's partition


def test_groups_that_do_not_answer_leave_the_offsets_pass_time_of_its_own():
    import time

    from kafkatxn.model import Part

    model, cluster = blocked_model()
    cluster.restart_deadline(2.0)

    def list_groups_waiting_for_a_dead_broker():
        while time.monotonic() < cluster.deadline:  # a listing that waits for every broker's answer
            time.sleep(0.01)
        raise cluster.errors.deadline_exceeded()

    cluster.list_groups = cluster.list_groups_partial = list_groups_waiting_for_a_dead_broker
    snap = gather_snapshot(cluster, groups=True)
    assert snap.up and snap.groups == ()
    assert [p.lso_lag_messages for p in snap.partitions if p.topic == "orders"] == [4]  # the offsets pass still ran
    assert snap.active_producer_ids  # and the producer state
    (groups_missing,) = [m for m in snap.missing if m.subject == Part("consumer groups")]
    assert "no answer within 1.0s" in groups_missing.reason
    assert cluster.deadline - time.monotonic() > 0  # the deadline of the scrape is back


def test_per_group_sums_add_every_sample_of_a_group_in_any_order():
    rows = [
        GroupSample("a", "t", 0, 1, 2, 3, False), GroupSample("a", "t", 1, 10, 20, 30, True, 5, True),
        GroupSample("b", "t", 0, 100, 200, 300, False),
        GroupSample("a", "u", 0, 1000, 2000, 3000, True, 5, False),  # "a" again, after "b"
        GroupSample("c", "t", 0, 0, 0, 0, False),
    ]
    got = samples(render_text(snapshot_with(tuple(rows))))
    for group in ("a", "b", "c"):
        mine = [r for r in rows if r.group == group]
        assert got[f"kafkatxn_group_summed_lag_messages{{group={group}}}"] == sum(r.lag_messages for r in mine)
        assert got[f"kafkatxn_group_summed_lag_to_lso_messages{{group={group}}}"] == sum(r.lag_to_lso_messages for r in mine)
        assert got[f"kafkatxn_group_summed_lag_to_high_watermark_messages{{group={group}}}"] == sum(r.lag_to_hw_messages for r in mine)
        assert got[f"kafkatxn_group_blocked_partitions{{group={group}}}"] == sum(r.blocked for r in mine)
    assert got["kafkatxn_groups_blocked{}"] == 1
    assert got["kafkatxn_groups_stuck{}"] == 1  # "a": blocked behind a hanging transaction on t-1


def test_per_group_sums_of_runs_equal_a_row_by_row_sum():
    """exporter_metrics._per_group_sums sums each group's run of rows as a slice and counts the
    flagged rows per run: the same sums as adding row by row, whatever order the groups come in, a
    group met in several runs, a single row, or none."""
    import random

    from kafkatxn.exporter_metrics import _per_group_sums

    rng = random.Random(38)
    cases = [[], ["a"], ["b", "a"], ["a", "a", "b", "a", "c", "c"]]
    cases += [sorted(rng.choice("abcdefg") for _ in range(rng.randrange(1, 40))) for _ in range(20)]
    cases += [[rng.choice("abcdefg") for _ in range(rng.randrange(1, 40))] for _ in range(20)]
    for groups in cases:
        n = len(groups)
        columns = [[rng.randrange(-3, 1000) for _ in range(n)] for _ in range(3)]
        flagged = [sorted(rng.sample(range(n), rng.randrange(0, n + 1))) for _ in range(2)]
        ordered, sums = _per_group_sums(groups, columns, flagged)
        assert ordered == sorted(set(groups))
        for k, group in enumerate(ordered):
            rows = [i for i in range(n) if groups[i] == group]
            assert [column[k] for column in sums] == [sum(c[i] for i in rows) for c in columns] + \
                [sum(1 for i in f if i in rows) for f in flagged]


@pytest.mark.parametrize("seed", range(12))
def test_partition_lags_and_their_families_are_each_partitions_lso_lag(seed):
    """snapshot.lso_lags (the exporter's and check's) takes the lags in C when every partition's offsets arrived: each is
    PartitionSample.lso_lag_messages (None where a leader did not answer, 0 where the LSO passed the high
    watermark), and the partitions' families are those of the lags taken one by one, only_lagging or not."""
    import random

    from kafkatxn import exporter_metrics
    from kafkatxn.snapshot import PartitionSample, lso_lags

    rng = random.Random(seed)
    parts = []
    for i in range(rng.randrange(0, 60)):
        hw = rng.choice([0, 5, 10**7 + rng.randrange(100), 2**40])
        lso = hw - rng.choice([0, 0, 0, 1, 3, -2])  # -2: the LSO past the high watermark (a leader moved)
        parts.append(PartitionSample(f"t{i % 4}", i, 1, None, None) if seed % 3 == 0 and rng.random() < 0.2 else
                     PartitionSample(f"t{i % 4}", i, 1, hw, lso))
    lags = lso_lags(parts)
    assert lags == [p.lso_lag_messages for p in parts]
    known = [lag for lag in lags if lag is not None]
    for only_lagging in (False, True):
        families = {f.name: f.samples for f in
                    exporter_metrics.metric_families(_with_partitions(parts), ExportOptions(only_lagging=only_lagging))}
        assert [s.value for s in families["kafkatxn_lagging_partitions"]] == [sum(1 for lag in known if lag > 0)]
        assert [s.value for s in families["kafkatxn_lso_lag_max_messages"]] == [max(known, default=0)]
        expected = [(p.topic, str(p.partition), lag) for p, lag in zip(parts, lags) if lag is not None and (lag or not only_lagging)]
        assert [(s.labels["topic"], s.labels["partition"], s.value) for s in families["kafkatxn_partition_lso_lag_messages"]] == expected
        assert [(s.labels["topic"], s.labels["partition"]) for s in families["kafkatxn_partition_offsets_missing"]] == \
            [(p.topic, str(p.partition)) for p, lag in zip(parts, lags) if lag is None]


def _with_partitions(parts) -> ClusterSnapshot:
    return ClusterSnapshot(1_700_000_000_000, partitions=tuple(parts))
