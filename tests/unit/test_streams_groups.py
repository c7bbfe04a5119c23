"""Kafka Streams applications on the streams rebalance protocol (KIP-1071, ``group.protocol=streams``;
on by default from Kafka 4.2): ListGroups lists their groups with protocol type "streams", and the
group commands left them out as they leave out Connect's, so an exactly-once Streams application held
behind an open transaction was never reported (``check --groups`` said OK). Now they are read by their
committed offsets as consumer groups are, and not described: DescribeGroups and ConsumerGroupDescribe
both answer them GROUP_ID_NOT_FOUND (their members' tasks are StreamsGroupDescribe's)."""

from __future__ import annotations

import json

from kafkatxn.cli.common import CommandContext
from kafkatxn.kafka import protocol as p
from tests.support.blocked_group import blocked_model
from tests.support.cli_helpers import run_cli
from tests.support.fake_groups import O0, model_with_groups
from tests.support.fake_kafka import FakeCluster
from tests.unit.test_consumer_groups_kip848 import differences, without_times


def test_streams_groups_are_listed_and_connect_groups_are_not():
    model = model_with_groups(a=1, s=2, c=2)
    model.streams_groups = {"s"}
    model.group_protocol_types["c"] = "connect"
    assert FakeCluster(model).list_groups() == ["a", "s"]


def test_a_streams_group_is_read_by_its_commits_and_not_described():
    """Neither describe API knows a streams group: asking them is two requests for GROUP_ID_NOT_FOUND."""
    model = model_with_groups(a=1, s=2)
    model.streams_groups = {"s"}
    model.assignments = {"a": {O0}, "s": {O0}}  # both Stable with members
    cluster = FakeCluster(model)
    assert cluster.list_groups() == ["a", "s"]
    assert cluster.group_offsets(["a", "s"]).value == {"a": {O0: 3}, "s": {O0: 3}}
    result = cluster.group_assignments(["a", "s"])
    assert result.value == {"a": frozenset({O0})} and not result.missing
    described = [(type(r).__name__, r.group_ids) for _, r in model.sent if isinstance(r, (p.DescribeGroups, p.ConsumerGroupDescribe))]
    assert described == [("DescribeGroups", ("a",))]


def commands(capsys, monkeypatch, streams: bool) -> dict[str, tuple[int, object, str]]:
    """lso --groups, check --groups and diagnose on billing, whose commit sits at orders-0's LSO behind
    an open transaction: a Streams application's group, or a group that only commits offsets."""
    model, cluster = blocked_model()
    if streams:
        model.streams_groups = {"billing"}
        model.assignments = {"billing": {ORDERS_1}}  # members hold tasks: a Stable group, still not described
        model.add_partition("orders", 1, leader=1, lso=4, hw=4)
    else:
        model.add_partition("orders", 1, leader=1, lso=4, hw=4)
    monkeypatch.setattr(CommandContext, "cluster", property(lambda self: cluster))
    out = {}
    for name, args in {"lso": ("lso", "--groups", "--min-lag", "0"), "check": ("check", "--groups"),
                       "diagnose": ("diagnose",)}.items():
        result = run_cli(capsys, *args, "-b", "fake:9092", "-o", "json")
        out[name] = (result.code, without_times(json.loads(result.stdout)), result.stderr)
    return out


ORDERS_1 = O0._replace(partition=1)


def test_the_commands_report_a_held_streams_group_as_a_group_that_commits_offsets(capsys, monkeypatch):
    streams = commands(capsys, monkeypatch, streams=True)
    committing = commands(capsys, monkeypatch, streams=False)
    assert streams == committing, differences(streams, committing)
    code, rows, stderr = streams["lso"]
    assert code in (0, 1, 2) and "GROUP_ID_NOT_FOUND" not in stderr, (code, stderr)
    held = {(r["group"], r["topic"], r["partition"]): r for r in rows}[("billing", "orders", 0)]
    assert (held["verdict"], held["transactional_id"], held["committed_offset"]) == ("waiting", "billing-tx", 3), held
    code, report, _ = streams["check"]
    assert code in (0, 1, 2) and report["status"] != "UNKNOWN" and report["groups_waiting"] == 1, report
    code, doc, _ = streams["diagnose"]
    assert code in (0, 1, 2) and "billing" in [g["group"] for g in doc["groups"]] and not doc["missing"], doc
