"""A principal that sees part of the cluster (issue 23): ListTransactions leaves out the ids it may
not DESCRIBE, so a producer id it does not list is undetermined, never hanging; topics, groups and
configs it may not read are typed missing parts naming the ACL. Over the fake cluster, no broker."""

from __future__ import annotations

import time

from kafkatxn import gather, hanging, remedy, verdicts
from kafkatxn.kafka.client_errors import authorization_error, part_missing
from kafkatxn.model import IDS_ALL, IDS_FILTERED, IDS_UNKNOWN, Missing, Part, ProducerState, TopicPartition, TransactionDescription
from tests.support.fake_kafka import FakeCluster, KafkaModel

A0 = TopicPartition("a", 0)
B0 = TopicPartition("b", 0)
MAX = 60_000


def now_ms():
    return int(time.time() * 1000)


def restricted_cluster(describable=None, **model_kw):
    """a-0: producer 7's open transaction, tracked by its coordinator under id ``other-1``;
    b-0: producer 9's transaction, which no coordinator knows (hanging)."""
    model = KafkaModel(brokers=(1,), describable=describable, **model_kw)
    model.add_partition("a", 0, lso=10, hw=20)
    model.add_partition("b", 0, lso=3, hw=8)
    model.add_transaction_log([1])
    old = now_ms() - 10 * MAX
    model.producers[A0] = [ProducerState(7, 0, 3, old, -1, 10)]
    model.producers[B0] = [ProducerState(9, 0, 1, old, -1, 3)]
    model.transactions["other-1"] = TransactionDescription("other-1", 1, "Ongoing", 7, 0, 3_600_000, old, frozenset({A0}))
    return FakeCluster(model)


def only(*ids):
    return lambda tid: tid in ids


def prefixed(prefix):
    return lambda tid: tid.startswith(prefix)


# -- the pure verdict ----------------------------------------------------------------------------


def open_txn(pid=7, tp=A0):
    return verdicts.OpenTransaction(tp, ProducerState(pid, 0, 3, 0, -1, 10))


def test_a_filtered_view_makes_an_unlisted_producer_undetermined_naming_the_acl():
    view = verdicts.CoordinatorView(ids_hidden=verdicts.hidden_ids(IDS_FILTERED))
    c = verdicts.classify(open_txn(), view)
    assert c.verdict is verdicts.Verdict.UNDETERMINED
    assert c.reason == verdicts.REASON_IDS_FILTERED
    (m,) = c.missing
    assert m.subject == Part("transactional ids") and m.not_authorized and "DESCRIBE on TransactionalId" in m.acl


def test_an_unfiltered_view_keeps_the_hanging_verdict():
    assert verdicts.hidden_ids(IDS_ALL) == ()
    c = verdicts.classify(open_txn(), verdicts.CoordinatorView(ids_hidden=verdicts.hidden_ids(IDS_ALL)))
    assert (c.verdict, c.reason) == (verdicts.Verdict.HANGING, verdicts.REASON_NO_TRANSACTIONAL_ID)


def test_a_probe_that_did_not_answer_is_undetermined_too():
    hidden = verdicts.hidden_ids(IDS_UNKNOWN, [Missing(Part("transactional id visibility"), "the probe did not answer: timed out")])
    c = verdicts.classify(open_txn(), verdicts.CoordinatorView(ids_hidden=hidden))
    assert c.verdict is verdicts.Verdict.UNDETERMINED and "timed out" in c.reason and not c.missing[0].not_authorized


def test_a_listed_id_is_decided_as_before_whatever_the_visibility():
    d = TransactionDescription("app-1", 1, "Ongoing", 7, 0, 60_000, 0, frozenset())
    view = verdicts.CoordinatorView(transactional_ids={7: "app-1"}, descriptions={"app-1": d}, ids_hidden=verdicts.hidden_ids(IDS_FILTERED))
    assert verdicts.classify(open_txn(), view).verdict is verdicts.Verdict.HANGING  # its coordinator does not track a-0


# -- the probe -----------------------------------------------------------------------------------


def test_the_probe_tells_filtered_from_unfiltered_views():
    assert restricted_cluster().transactional_id_visibility().value == IDS_ALL
    assert restricted_cluster(only("app-1")).transactional_id_visibility().value == IDS_FILTERED
    assert restricted_cluster(prefixed("app-")).transactional_id_visibility().value == IDS_FILTERED
    assert restricted_cluster(lambda tid: False).transactional_id_visibility().value == IDS_FILTERED
    assert restricted_cluster(lambda tid: True).transactional_id_visibility().value == IDS_ALL  # wildcard
    timing_out = restricted_cluster(timeouts={1: {"DescribeTransactions"}})
    probe = timing_out.transactional_id_visibility()
    assert probe.value == IDS_UNKNOWN and probe.missing


def test_the_probe_is_asked_only_when_a_producer_id_is_not_listed():
    fake = restricted_cluster()
    gather.coordinator_view(fake, [7])
    assert fake.called("transactional_id_visibility") == []  # producer 7 is listed (other-1)
    fake.calls.clear()
    gather.coordinator_view(fake, [7, 9])
    assert len(fake.called("transactional_id_visibility")) == 1


# -- commands over a filtered view ---------------------------------------------------------------


def test_a_tracked_transaction_is_never_hanging_for_a_principal_that_cannot_see_its_id():
    for describable in (only("app-1"), prefixed("app-"), lambda tid: False):
        result = hanging.find_hanging(restricted_cluster(describable), max_transaction_timeout_ms=MAX)
        assert result.hanging == [] and result.long_running == []
        assert sorted((r.topic, r.reason) for r in result.undetermined) == [
            ("a", verdicts.REASON_IDS_FILTERED), ("b", verdicts.REASON_IDS_FILTERED)
        ]
        assert all("DESCRIBE on TransactionalId" in m for r in result.undetermined for m in r.missing)


def test_with_every_id_visible_the_tracked_one_is_long_running_and_the_other_hanging():
    for describable in (None, lambda tid: True):
        result = hanging.find_hanging(restricted_cluster(describable), max_transaction_timeout_ms=MAX)
        assert [(r.topic, r.reason) for r in result.hanging] == [("b", verdicts.REASON_NO_TRANSACTIONAL_ID)]
        assert [(r.topic, r.transactional_id) for r in result.long_running] == [("a", "other-1")]
        assert result.undetermined == []


def test_abort_all_hanging_by_a_filtered_principal_writes_no_marker(tmp_path):
    from kafkatxn import auditlog

    fake = restricted_cluster(prefixed("app-"))
    audit = auditlog.AuditLog(tmp_path / "audit.jsonl")
    result = remedy.abort(fake, all_hanging=True, max_transaction_timeout_ms=MAX, audit=audit, confirm=lambda rows: True)
    assert fake.called("write_abort_marker") == []
    assert result.exit_code == 3
    assert fake.model.offsets[A0] == [10, 20] and fake.model.offsets[B0] == [3, 8]


# -- topics, groups, configs ---------------------------------------------------------------------


def test_topic_authorization_is_a_missing_part_naming_the_acl_not_an_error():
    fake = restricted_cluster(denied_topics={"DescribeProducers": {"b"}, "ListOffsets": {"b"}})
    producers = fake.describe_producers([A0, B0])
    assert set(producers.value) == {A0}
    (m,) = producers.missing
    assert (m.subject, m.reason, m.acl) == (B0, "not authorized: needs READ on Topic b", "READ on Topic b")
    offsets = fake.stable_and_high_offsets([A0, B0])
    assert set(offsets.value) == {A0}
    assert [(m.subject, m.reason) for m in offsets.missing] == [(B0, "not authorized: needs DESCRIBE on Topic b")]
    result = hanging.find_hanging(fake, max_transaction_timeout_ms=MAX)
    assert result.hanging == [] and any(m.subject == B0 and m.not_authorized for m in result.missing)


def test_client_exceptions_carrying_an_authorization_error_are_not_authorized_parts():
    class KafkaError:
        def __init__(self, name):
            self._name = name

        def name(self):
            return self._name

        code = 0

    class KafkaException(Exception):
        pass

    assert authorization_error("GROUP_AUTHORIZATION_FAILED") and authorization_error(KafkaException(KafkaError("CLUSTER_AUTHORIZATION_FAILED")))
    assert not authorization_error("SASL_AUTHENTICATION_FAILED") and not authorization_error(None)
    m = part_missing(Part("group g"), KafkaException(KafkaError("GROUP_AUTHORIZATION_FAILED")), "DESCRIBE on Group g")
    assert (m.reason, m.acl) == ("not authorized: needs DESCRIBE on Group g", "DESCRIBE on Group g")
    assert part_missing(B0, "NOT_LEADER_OR_FOLLOWER", "READ on Topic b") == Missing(B0, "NOT_LEADER_OR_FOLLOWER")


def test_cluster_visibility_names_what_the_principal_cannot_see():
    from kafkatxn import clusterinfo

    fake = restricted_cluster(prefixed("app-"), denied_topics={"DescribeProducers": {"b"}}, cluster_operations=set(), topics_filtered=True)
    seen = {r.part: (r.visible, r.needs) for r in clusterinfo.principal_visibility(fake, ["a", "b"], [])}
    assert seen["transactional ids"] == ("filtered", "DESCRIBE on TransactionalId *")
    assert seen["topics"] == ("filtered", "DESCRIBE on Topic *")
    assert seen["producer state of b"] == ("not authorized", "READ on Topic b") and "producer state of a" not in seen
    assert seen["consumer groups"][0] == "filtered" and seen["abort markers"][0] == "no"
    everything = restricted_cluster(cluster_operations={"DESCRIBE", "CLUSTER_ACTION"})
    seen = {r.part: r.visible for r in clusterinfo.principal_visibility(everything, ["a", "b"], [])}
    assert (seen["transactional ids"], seen["topics"], seen["consumer groups"], seen["abort markers"]) == ("all", "all", "all", "yes")


def test_a_named_group_the_principal_may_not_describe_is_not_unknown_but_not_authorized():
    import pytest

    from kafkatxn import facts_lso
    from kafkatxn.errors import NotFoundError

    fake = restricted_cluster()
    fake.model.groups["app"] = {A0: 10}
    fake.model.denied_groups = {"app"}
    snap = facts_lso.take_group_snapshot(fake, ["app"])
    assert [(m.subject, m.reason) for m in snap.missing] == [(Part("group app"), "not authorized: needs DESCRIBE on Group app")]
    with pytest.raises(NotFoundError, match="unknown consumer group 'nope'"):
        facts_lso.take_group_snapshot(fake, ["nope"])


# -- a filtered topic list -------------------------------------------------------------------------


def test_a_cluster_wide_scan_by_a_principal_that_sees_only_some_topics_is_undetermined():
    """It used to answer "no hanging transaction" (exit 0) for a cluster it saw only part of."""
    from kafkatxn.facts_cluster import gather_snapshot

    seeing_all = restricted_cluster(topics_filtered=False)
    assert not [m for m in hanging.find_hanging(seeing_all, max_transaction_timeout_ms=MAX).missing if m.subject == Part("topics this principal cannot see")]
    filtered = restricted_cluster(topics_filtered=True)
    result = hanging.find_hanging(filtered, max_transaction_timeout_ms=MAX)
    (unseen,) = [m for m in result.missing if m.subject == Part("topics this principal cannot see")]
    assert unseen.not_authorized and unseen.acl == "DESCRIBE on Topic *"
    snap = gather_snapshot(restricted_cluster(topics_filtered=True), max_transaction_timeout_ms=MAX)
    assert Part("topics this principal cannot see") in [m.subject for m in snap.missing]


def test_a_scan_of_named_topics_or_a_regex_is_not_made_undetermined_by_the_filter():
    from kafkatxn.facts_cluster import gather_snapshot

    result = hanging.find_hanging(restricted_cluster(topics_filtered=True), topics=["b"], max_transaction_timeout_ms=MAX)
    assert Part("topics this principal cannot see") not in [m.subject for m in result.missing]
    snap = gather_snapshot(restricted_cluster(topics_filtered=True), topic_regex="^b$", max_transaction_timeout_ms=MAX)
    assert Part("topics this principal cannot see") not in [m.subject for m in snap.missing]


def test_a_visibility_probe_without_an_answer_is_not_taken_for_a_filter():
    assert gather.unseen_topics(restricted_cluster(topics_filtered=None)) == []


def test_the_topic_visibility_answer_is_reused_by_the_same_session_not_asked_every_scrape():
    """bench_scale: the exporter's scrape paid a fresh librdkafka bootstrap each time for this probe."""
    from kafkatxn.config import ConnectionConfig
    from kafkatxn.kafka import Cluster

    cluster = Cluster(ConnectionConfig("127.0.0.1:1", timeout_ms=1000))
    asked = []
    cluster._probe_topic_list_filtered = lambda suffix: asked.append(suffix) or True
    assert cluster.topic_list_filtered() is True and cluster.topic_list_filtered() is True
    assert len(asked) == 1
    no_answer = Cluster(ConnectionConfig("127.0.0.1:1", timeout_ms=1000))
    tries = []
    no_answer._probe_topic_list_filtered = lambda suffix: tries.append(suffix) and None
    assert no_answer.topic_list_filtered() is None and no_answer.topic_list_filtered() is None
    assert len(tries) == 2  # no answer is not kept: the next scrape asks again
