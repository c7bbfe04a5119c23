"""Kafka Streams applications on the streams rebalance protocol (KIP-1071, ``group.protocol=streams``;
on by default from Kafka 4.2): ListGroups lists their groups with protocol type "streams", and the
group commands left them out as they leave out Connect's, so an exactly-once Streams application held
behind an open transaction was never reported (``check --groups`` said OK). Now they are read as
consumer groups are, described with StreamsGroupDescribe (API 89): DescribeGroups and
ConsumerGroupDescribe both answer them GROUP_ID_NOT_FOUND."""

from __future__ import annotations

import json

from kafkatxn.cli.common import CommandContext
from kafkatxn.kafka import protocol as p
from kafkatxn.model import Part
from tests.support.blocked_group import ORDERS, blocked_model
from tests.support.cli_helpers import run_cli
from tests.support.fake_groups import O0, O1, P0, model_with_groups
from tests.support.fake_kafka import FakeCluster, KafkaModel
from tests.support.json_compare import differences, without_times

DESCRIBE_APIS = (p.DescribeGroups, p.ConsumerGroupDescribe, p.StreamsGroupDescribe)


def described(model: KafkaModel) -> list[tuple[str, int, tuple[str, ...]]]:
    return sorted((type(r).__name__, node, r.group_ids) for node, r in model.sent if isinstance(r, DESCRIBE_APIS))


def test_streams_groups_are_listed_and_connect_groups_are_not():
    model = model_with_groups(a=1, s=2, c=2)
    model.streams_groups = {"s"}
    model.group_protocol_types["c"] = "connect"
    assert FakeCluster(model).list_groups() == ["a", "s"]


def test_each_kind_of_group_is_described_by_its_own_api_in_one_request_per_coordinator():
    model = model_with_groups(consumer=("k",), a=1, k=1, s1=1, s2=2, s3=2)
    model.streams_groups = {"s1", "s2", "s3"}
    model.assignments = {"a": {O0}, "k": {O1}, "s1": {O0, O1}, "s2": {P0}, "s3": {O1}}
    model.group_states = {"s3": "Reconciling"}  # its members' tasks are moving: left out as a rebalance is
    cluster = FakeCluster(model)
    cluster.list_groups()
    result = cluster.group_assignments(["a", "k", "s1", "s2", "s3"])
    assert result.value == {"a": frozenset({O0}), "k": frozenset({O1}), "s1": frozenset({O0, O1}), "s2": frozenset({P0})}
    assert not result.missing
    assert described(model) == [("ConsumerGroupDescribe", 1, ("k",)), ("DescribeGroups", 1, ("a",)),
                                ("StreamsGroupDescribe", 1, ("s1",)), ("StreamsGroupDescribe", 2, ("s2", "s3"))]


def test_a_streams_group_listed_empty_is_not_described():
    """An Empty streams group has no member, as an Empty group of the other protocols."""
    model = model_with_groups(s1=1, s2=2)
    model.streams_groups = {"s1", "s2"}
    model.assignments = {"s2": {P0}}
    cluster = FakeCluster(model)
    cluster.list_groups()
    assert cluster.group_assignments(["s1", "s2"]).value == {"s2": frozenset({P0})}
    assert described(model) == [("StreamsGroupDescribe", 2, ("s2",))]


def test_without_streams_group_describe_a_streams_group_is_read_by_its_commits_and_not_described():
    """Kafka 4.1's brokers list streams groups only with the API enabled; a broker that lists one
    without it (or whose principal cannot see it) is not asked two other APIs for GROUP_ID_NOT_FOUND."""
    model = model_with_groups(a=1, s=2)
    model.streams_groups = {"s"}
    model.assignments = {"a": {O0}, "s": {O0}}
    del model.api_versions["StreamsGroupDescribe"]
    cluster = FakeCluster(model)
    assert cluster.list_groups() == ["a", "s"]
    assert cluster.group_offsets(["a", "s"]).value == {"a": {O0: 3}, "s": {O0: 3}}
    result = cluster.group_assignments(["a", "s"])
    assert result.value == {"a": frozenset({O0})} and not result.missing
    assert described(model) == [("DescribeGroups", 1, ("a",))]


def test_stream_group_describe_errors_follow_the_one_rule():
    """A refusal is the group's missing part naming the ACL; a streams group gone between the listing
    and the describe (GROUP_ID_NOT_FOUND) is asked with DescribeGroups, and neither finding it, Dead."""
    model = model_with_groups(brokers=(1, 2), s1=1, s2=2, s3=2)
    model.streams_groups = {"s1", "s2", "s3"}
    model.assignments = {g: {O0} for g in ("s1", "s2", "s3")}
    cluster = FakeCluster(model)
    cluster.list_groups()
    model.group_errors[("StreamsGroupDescribe", "s1")] = ["GROUP_AUTHORIZATION_FAILED"]
    model.group_errors[("StreamsGroupDescribe", "s3")] = ["GROUP_ID_NOT_FOUND"]
    model.group_errors[("DescribeGroups", "s3")] = ["GROUP_ID_NOT_FOUND"]
    result = cluster.group_assignments(["s1", "s2", "s3"])
    assert result.value == {"s2": frozenset({O0})}
    assert [(m.subject, m.acl) for m in result.missing] == [(Part("group s1"), "DESCRIBE on Group s1")]
    assert ("DescribeGroups", 2, ("s3",)) in described(model)


def test_a_streams_group_whose_topology_topics_may_not_be_described_is_missing_naming_that_acl():
    """StreamsGroupDescribe answers TOPIC_AUTHORIZATION_FAILED for a group with a topology topic the
    principal may not describe (Kafka 4.4's KafkaApis filters the groups by DESCRIBE on every source,
    repartition and changelog topic): the group is missing, naming that ACL, not its group ACL."""
    model = model_with_groups(s1=1, s2=1)
    model.streams_groups = {"s1", "s2"}
    model.assignments = {"s1": {O0}, "s2": {O1}}
    cluster = FakeCluster(model)
    cluster.list_groups()
    model.group_errors[("StreamsGroupDescribe", "s1")] = ["TOPIC_AUTHORIZATION_FAILED"]
    result = cluster.group_assignments(["s1", "s2"])
    assert result.value == {"s2": frozenset({O1})}
    assert [(m.subject, m.acl) for m in result.missing] == [(Part("group s1"), "DESCRIBE on every Topic of Group s1")]


def commands(capsys, monkeypatch, kind: str) -> dict[str, tuple[int, object, str]]:
    """lso --groups, check --groups and diagnose on billing, whose commit sits at orders-0's LSO behind
    an open transaction and whose members are assigned orders-0 and orders-1 (no commit there): a
    classic consumer group, or a Streams application's group."""
    model, cluster = blocked_model()
    model.add_partition("orders", 1, leader=1, lso=4, hw=4)
    model.assignments = {"billing": {ORDERS, O1}}
    if kind == "streams":
        model.streams_groups = {"billing"}
    monkeypatch.setattr(CommandContext, "cluster", property(lambda self: cluster))
    out = {}
    for name, args in {"lso": ("lso", "--groups", "--min-lag", "0"), "check": ("check", "--groups"),
                       "diagnose": ("diagnose",)}.items():
        result = run_cli(capsys, *args, "-b", "fake:9092", "-o", "json")
        out[name] = (result.code, without_times(json.loads(result.stdout)), result.stderr)
    return out


def test_the_commands_report_a_held_streams_group_as_the_same_classic_group(capsys, monkeypatch):
    streams = commands(capsys, monkeypatch, "streams")
    classic = commands(capsys, monkeypatch, "classic")
    assert streams == classic, differences(streams, classic)
    code, rows, stderr = streams["lso"]
    assert code in (0, 1, 2) and "GROUP_ID_NOT_FOUND" not in stderr, (code, stderr)
    by_tp = {(r["group"], r["topic"], r["partition"]): r for r in rows}
    held = by_tp[("billing", "orders", 0)]
    assert (held["verdict"], held["transactional_id"], held["committed_offset"]) == ("waiting", "billing-tx", 3), held
    assert by_tp[("billing", "orders", 1)]["committed_offset"] is None  # its task reads it, no commit yet
    code, report, _ = streams["check"]
    assert code in (0, 1, 2) and report["status"] != "UNKNOWN" and report["groups_waiting"] == 1, report
    code, doc, _ = streams["diagnose"]
    assert code in (0, 1, 2) and "billing" in [g["group"] for g in doc["groups"]] and not doc["missing"], doc
