"""KIP-848 consumer groups (ListGroups v5+ types them ``consumer``) on the fake wire: described with
ConsumerGroupDescribe (API 69), as Kafka's kafka-consumer-groups.sh describes them, since
DescribeGroups answers them GROUP_ID_NOT_FOUND; and the commands report such a group exactly as they
report the same group of the classic protocol (they exited 3, "incomplete answer: group g:
GROUP_ID_NOT_FOUND").
"""

from __future__ import annotations

import json

import pytest

from kafkatxn.cli.common import CommandContext
from kafkatxn.kafka import protocol as p
from kafkatxn.model import Part
from tests.support.blocked_group import ORDERS, blocked_model
from tests.support.cli_helpers import run_cli
from tests.support.fake_groups import O0, O1, P0, model_with_groups
from tests.support.fake_kafka import FakeCluster, KafkaModel
from tests.support.json_compare import differences, without_times


def sent(model: KafkaModel, kind: type) -> list[tuple[int | None, tuple[str, ...]]]:
    return sorted((node, r.group_ids) for node, r in model.sent if type(r) is kind)


def listed(model: KafkaModel) -> FakeCluster:
    cluster = FakeCluster(model)
    cluster.list_groups_partial()
    return cluster


def test_consumer_groups_are_described_with_consumer_group_describe_and_classic_ones_with_describe_groups():
    """Each coordinator's groups of each kind in one request of each API, in the same round; Stable
    groups' assignments as for classic groups. Reconciling (KIP-848's rebalancing: members moving to
    a new target) is left out as the classic protocol's rebalancing states are."""
    model = model_with_groups(consumer=("k1", "k2", "k3"), a=1, k1=1, k2=2, k3=2, b=2)
    model.assignments = {"a": {O0}, "k1": {O0, O1}, "k2": {P0}, "k3": {O1}, "b": {P0}}
    model.group_states = {"k3": "Reconciling"}
    cluster = listed(model)
    result = cluster.group_assignments(["a", "b", "k1", "k2", "k3"])
    assert result.value == {"a": frozenset({O0}), "b": frozenset({P0}), "k1": frozenset({O0, O1}), "k2": frozenset({P0})}
    assert not result.missing
    assert sent(model, p.DescribeGroups) == [(1, ("a",)), (2, ("b",))]
    assert sent(model, p.ConsumerGroupDescribe) == [(1, ("k1",)), (2, ("k2", "k3"))]


def test_a_consumer_group_listed_empty_is_not_described():
    """An Empty consumer group has no member, as an Empty classic group: no assignment to ask for."""
    model = model_with_groups(consumer=("k1", "k2"), k1=1, k2=2)
    model.assignments = {"k2": {P0}}
    assert listed(model).group_assignments(["k1", "k2"]).value == {"k2": frozenset({P0})}
    assert sent(model, p.ConsumerGroupDescribe) == [(2, ("k2",))] and sent(model, p.DescribeGroups) == []


def test_the_requests_sent_ahead_are_the_calls_own():
    model = model_with_groups(consumer=("k1",), brokers=(1, 2), a=2, k1=2)
    model.assignments = {"a": {O0}, "k1": {P0}}
    cluster = listed(model)
    with cluster.one_run():
        cluster.group_assignments_ahead(["a", "k1"])
        cluster.group_offsets(["a", "k1"])
        assert cluster.group_assignments(["a", "k1"]).value == {"a": frozenset({O0}), "k1": frozenset({P0})}
    # Sent once, with the OffsetFetch round, and taken by the call.
    assert sent(model, p.DescribeGroups) == [(2, ("a",))] and sent(model, p.ConsumerGroupDescribe) == [(2, ("k1",))]


def test_consumer_group_describe_errors_follow_the_one_rule():
    """A refusal is the group's missing part naming the ACL (the group's, or its topics'); a loading
    or moved coordinator is asked again as DescribeGroups' are; one that does not answer leaves its
    groups missing, never empty."""
    model = model_with_groups(consumer=("k1", "k2", "k3", "k4", "k5"), brokers=(1, 2, 3), k1=1, k2=1, k3=2, k4=3, k5=1)
    model.assignments = {g: {O0} for g in ("k1", "k2", "k3", "k4", "k5")}
    cluster = listed(model)
    model.denied_groups = {"k1"}
    model.group_errors[("ConsumerGroupDescribe", "k2")] = ["TOPIC_AUTHORIZATION_FAILED"]
    model.group_errors[("ConsumerGroupDescribe", "k3")] = ["COORDINATOR_LOAD_IN_PROGRESS"]
    model.group_errors[("ConsumerGroupDescribe", "k5")] = ["NOT_COORDINATOR"]
    model.timeouts[3] = {"ConsumerGroupDescribe"}
    result = cluster.group_assignments(["k1", "k2", "k3", "k4", "k5"])
    assert result.value == {"k3": frozenset({O0}), "k5": frozenset({O0})}
    assert [(m.subject, m.acl) for m in result.missing] == [
        (Part("group k1"), "DESCRIBE on Group k1"), (Part("group k2"), "DESCRIBE on every Topic of Group k2"), (Part("group k4"), ""),
    ]
    assert "timed out" in result.missing[2].reason
    assert any(type(r) is p.FindGroupCoordinators and "k5" in r.group_ids for _, r in model.sent)  # k5 placed again


def test_a_group_gone_between_list_and_describe_is_dead_and_one_that_changed_protocol_is_described_by_the_other_api():
    """GROUP_ID_NOT_FOUND: the group is not of the API's kind (it moved between the protocols since it
    was listed, KIP-848's online upgrade or downgrade) or is gone. Asked once with the other API; one
    neither finds is Dead, left out as DescribeGroups before v6 answers a gone group: not missing."""
    model = model_with_groups(consumer=("gone", "down"), a=1, gone=1, down=2, up=2)
    model.assignments = {g: {O0} for g in ("a", "gone", "down", "up")}
    cluster = listed(model)
    del model.groups["gone"], model.assignments["gone"]  # deleted
    model.consumer_groups = {"up"}  # down: a classic group now; up: a consumer group now
    result = cluster.group_assignments(["a", "gone", "down", "up"])
    assert result.value == {"a": frozenset({O0}), "down": frozenset({O0}), "up": frozenset({O0})} and not result.missing
    assert sent(model, p.ConsumerGroupDescribe) == [(1, ("gone",)), (2, ("down",)), (2, ("up",))]
    assert sent(model, p.DescribeGroups) == [(1, ("a",)), (1, ("gone",)), (2, ("down",)), (2, ("up",))]


def test_a_classic_group_gone_on_a_broker_without_consumer_group_describe_is_dead():
    model = model_with_groups(a=1, b=1)
    model.assignments = {"a": {O0}}
    del model.api_versions["ConsumerGroupDescribe"]
    model.group_errors[("DescribeGroups", "b")] = ["GROUP_ID_NOT_FOUND"]  # DescribeGroups v6's answer for a gone group
    result = FakeCluster(model).group_assignments(["a", "b"])
    assert result.value == {"a": frozenset({O0})} and not result.missing
    assert sent(model, p.ConsumerGroupDescribe) == []


# -- the commands: a KIP-848 group reported as the same classic group ----------------------------


def commands(capsys, monkeypatch, consumer: bool) -> dict[str, tuple[int, object]]:
    """lso --groups, check --groups and diagnose on the blocked group (its commit at orders-0's LSO
    behind an open transaction), whose members are assigned orders-0 and orders-1 (no commit there)."""
    model, cluster = blocked_model()
    model.add_partition("orders", 1, leader=1, lso=4, hw=4)
    model.assignments = {"billing": {ORDERS, O1}}
    if consumer:
        model.consumer_groups = {"billing"}
    monkeypatch.setattr(CommandContext, "cluster", property(lambda self: cluster))
    out = {}
    for name, args in {"lso": ("lso", "--groups", "--min-lag", "0"), "check": ("check", "--groups"),
                       "diagnose": ("diagnose", "--group", "billing")}.items():
        result = run_cli(capsys, *args, "-b", "fake:9092", "-o", "json")
        out[name] = (result.code, without_times(json.loads(result.stdout)), result.stderr)
    return out


def test_the_commands_report_a_kip848_group_as_the_same_classic_group(capsys, monkeypatch):
    classic = commands(capsys, monkeypatch, consumer=False)
    kip848 = commands(capsys, monkeypatch, consumer=True)
    assert kip848 == classic, differences(kip848, classic)
    code, rows, stderr = kip848["lso"]
    assert code in (0, 1, 2) and "GROUP_ID_NOT_FOUND" not in stderr
    by_tp = {(r["group"], r["topic"], r["partition"]): r for r in rows}
    assert by_tp[("billing", "orders", 0)]["verdict"] == "waiting" and by_tp[("billing", "orders", 0)]["transactional_id"] == "billing-tx"
    assert by_tp[("billing", "orders", 1)]["committed_offset"] is None  # assigned, no commit: from ConsumerGroupDescribe
    code, report, _ = kip848["check"]
    assert code in (0, 1, 2) and report["status"] != "UNKNOWN" and report["groups_waiting"] == 1
    code, doc, _ = kip848["diagnose"]
    assert code in (0, 1, 2) and [g["group"] for g in doc["groups"]] == ["billing"] and not doc["missing"]


@pytest.mark.parametrize("args", [("lso", "--groups"), ("check", "--groups")])
def test_a_kip848_group_describe_groups_cannot_describe_no_longer_makes_the_answer_incomplete(capsys, monkeypatch, args):
    _, cluster = blocked_model()
    cluster.model.consumer_groups = {"billing"}
    cluster.model.assignments = {"billing": {ORDERS}}
    monkeypatch.setattr(CommandContext, "cluster", property(lambda self: cluster))
    result = run_cli(capsys, *args, "-b", "fake:9092")
    assert result.code != 3, (result.stdout, result.stderr)
    assert "GROUP_ID_NOT_FOUND" not in result.stdout + result.stderr
