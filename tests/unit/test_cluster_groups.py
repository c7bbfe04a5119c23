"""The consumer groups over the wire (kafka/groups.py) on the fake wire: ListGroups on every broker,
OffsetFetch and DescribeGroups batched per coordinator, coordinators that move, load, refuse or
do not answer, and a broker's group list that is missing named, never an empty answer."""

from __future__ import annotations

import time

import pytest

from kafkatxn.errors import ClusterError, DeadlineExceeded
from kafkatxn.kafka import protocol as p
from kafkatxn.model import Part
from tests.support.fake_groups import O0, O1, P0, model_with_groups
from tests.support.fake_kafka import FakeCluster, KafkaModel

def sent(model: KafkaModel, kind: type) -> list[tuple[int | None, object]]:
    return [(node, r) for node, r in model.sent if type(r) is kind]


# -- ListGroups --------------------------------------------------------------------------------


def test_every_broker_lists_its_own_groups_and_only_consumer_groups_are_listed():
    model = model_with_groups(a=1, b=2, c=2)
    model.group_protocol_types["c"] = "connect"
    model.groups["simple"] = {O1: 1}
    model.group_coordinators["simple"] = 1
    model.group_protocol_types["simple"] = ""  # commits offsets only, joins no group: listed as Kafka's tools do
    assert FakeCluster(model).list_groups() == ["a", "b", "simple"]
    assert sorted(node for node, _ in sent(model, p.ListGroups)) == [1, 2]


def test_errors_are_asked_again_until_every_broker_answers():
    model = model_with_groups(a=1, b=2)
    model.group_listing_errors[2] = ["COORDINATOR_LOAD_IN_PROGRESS"]
    assert FakeCluster(model).list_groups() == ["a", "b"]
    assert [node for node, _ in sent(model, p.ListGroups)] == [1, 2, 2]  # only the broker that answered with an error


def test_errors_that_persist_are_an_error_not_a_short_list():
    model = model_with_groups(a=1, b=2)
    model.group_listing_errors[2] = ["COORDINATOR_NOT_AVAILABLE"] * 1000
    with pytest.raises(ClusterError, match="COORDINATOR_NOT_AVAILABLE"):
        FakeCluster(model, timeout_s=1.2).list_groups()


def test_a_broker_that_never_lists_its_groups_is_a_named_missing_part_not_the_end_of_the_command():
    """The nemesis: one broker killed made `lso --groups` fail whole ("cannot reach any broker")
    although the others had listed their groups."""
    model = model_with_groups(a=1, b=2)
    model.group_listing_errors[2] = ["COORDINATOR_NOT_AVAILABLE"] * 1000
    started = time.monotonic()
    listed = FakeCluster(model, timeout_s=1.2).list_groups_partial()
    assert time.monotonic() - started < 1.2  # half the time left, not the deadline
    assert listed.value == ["a"]
    (missing,) = listed.missing
    assert missing.subject == Part("consumer groups") and "COORDINATOR_NOT_AVAILABLE" in missing.reason


def test_the_brokers_whose_groups_are_missing_are_named():
    """CI's nemesis: with broker 2 killed, `lso --groups` said only "some brokers did not list
    theirs: Local: Timed out"; the reader (and the nemesis) could not tell whose groups were left out."""
    model = model_with_groups(brokers=(1, 2, 3), a=1, b=2, c=3)
    model.down.add(2)
    listed = FakeCluster(model).list_groups_partial()
    assert listed.value == ["a", "c"]
    (missing,) = listed.missing
    assert "broker 2" in missing.reason and "timed out" in missing.reason
    assert "broker 1" not in missing.reason and "broker 3" not in missing.reason


def test_when_no_broker_answers_the_command_ends_as_for_every_other_request():
    model = model_with_groups(a=1, b=2)
    model.timeouts = {1: {"ListGroups"}, 2: {"ListGroups"}}
    with pytest.raises(DeadlineExceeded, match="listing consumer groups"):
        FakeCluster(model).list_groups_partial()


# -- OffsetFetch: batched per coordinator ------------------------------------------------------


def test_listed_groups_are_asked_at_the_broker_that_listed_them_all_in_one_request():
    model = model_with_groups(a=1, b=2, c=2)
    model.groups["c"] = {O1: 7, P0: 2}
    cluster = FakeCluster(model)
    offsets = cluster.group_offsets(cluster.list_groups())
    assert offsets.value == {"a": {O0: 3}, "b": {O0: 3}, "c": {O1: 7, P0: 2}} and not offsets.missing
    assert sorted((node, r.group_ids) for node, r in sent(model, p.OffsetFetch)) == [(1, ("a",)), (2, ("b", "c"))]
    assert sent(model, p.FindGroupCoordinators) == []  # ListGroups told where each group is


def test_kept_read_only_commits_are_handed_on_as_each_groups_own_dict_copied_whole(monkeypatch):
    """The wire's reader hands a group's commits as the read-only mapping it keeps between scrapes
    (group_answers.MEMO): group_offsets gives each group a dict of its own (the group pass adds the partitions
    assigned without a commit to it), copied whole, not read key by key through the mapping (dict() of a
    mapping proxy: 14-20 ms of CPU at 5,000 groups x 20 before the offsets' round)."""
    from types import MappingProxyType

    from tests.support import fake_kafka

    class Kept(dict):
        reads = 0

        def __getitem__(self, key):
            Kept.reads += 1
            return super().__getitem__(key)

    kept: dict[str, Kept] = {}
    fake_offset_fetch = fake_kafka.FakeWire._OffsetFetch

    def as_the_wire_reads_them(self, node, request):
        answer = fake_offset_fetch(self, node, request)
        return p.OffsetFetchResponse(tuple(
            g._replace(offsets=MappingProxyType(kept.setdefault(g.group_id, Kept(g.offsets)))) for g in answer.groups))

    monkeypatch.setattr(fake_kafka.FakeWire, "_OffsetFetch", as_the_wire_reads_them)
    model = model_with_groups(a=1, b=2)
    cluster = FakeCluster(model)
    offsets = cluster.group_offsets(cluster.list_groups())
    assert offsets.value == {"a": {O0: 3}, "b": {O0: 3}} and all(type(o) is dict for o in offsets.value.values())
    offsets.value["a"][O1] = -1  # the group's own: the kept mapping is not changed
    assert dict(kept["a"]) == {O0: 3} and Kept.reads == 0


def test_named_groups_find_their_coordinators_in_one_request():
    model = model_with_groups(a=1, b=2, c=2)
    offsets = FakeCluster(model).group_offsets(["c", "a", "b", "unknown"])
    assert offsets.value == {"a": {O0: 3}, "b": {O0: 3}, "c": {O0: 3}, "unknown": {}}
    ((_node, find),) = sent(model, p.FindGroupCoordinators)
    assert find.group_ids == ("c", "a", "b", "unknown") and find.batched
    assert len(sent(model, p.OffsetFetch)) == len(set(model.brokers))


def test_brokers_before_v8_get_one_offset_fetch_per_group_and_before_v4_one_find_coordinator_per_group():
    model = model_with_groups(a=1, b=2, c=2)
    model.api_versions["OffsetFetch"] = (1, 7)
    model.api_versions["FindCoordinator"] = (0, 3)
    offsets = FakeCluster(model).group_offsets(["a", "b", "c"])
    assert offsets.value == {"a": {O0: 3}, "b": {O0: 3}, "c": {O0: 3}}
    assert sorted(r.group_ids for _, r in sent(model, p.OffsetFetch)) == [("a",), ("b",), ("c",)]
    assert all(not r.batched for _, r in sent(model, p.OffsetFetch))
    assert sorted(r.group_ids for _, r in sent(model, p.FindGroupCoordinators)) == [("a",), ("b",), ("c",)]


def test_a_coordinator_that_moved_is_found_again_once():
    model = model_with_groups(a=1, b=1)
    cluster = FakeCluster(model)
    cluster.list_groups()
    model.group_coordinators["a"] = 2  # moved after the listing: broker 1 answers NOT_COORDINATOR
    offsets = cluster.group_offsets(["a", "b"])
    assert offsets.value == {"a": {O0: 3}, "b": {O0: 3}} and not offsets.missing
    assert [(node, r.group_ids) for node, r in sent(model, p.OffsetFetch)] == [(1, ("a", "b")), (2, ("a",))]
    assert [r.group_ids for _, r in sent(model, p.FindGroupCoordinators)] == [("a",)]


def test_a_coordinator_that_keeps_moving_is_a_missing_part_found_again_before_each_ask_until_the_pauses_run_out():
    model = model_with_groups(a=1, b=2)
    model.group_errors[("OffsetFetch", "a")] = ["NOT_COORDINATOR"] * 1000
    cluster = FakeCluster(model, timeout_s=2)
    offsets = cluster.group_offsets(["a", "b"])
    assert offsets.value == {"b": {O0: 3}}
    (missing,) = offsets.missing
    assert missing.subject == Part("group a") and missing.reason == "NOT_COORDINATOR"
    asks = len([r for _, r in sent(model, p.OffsetFetch) if "a" in r.group_ids])
    assert asks >= 2
    assert len(sent(model, p.FindGroupCoordinators)) == asks  # the first lookup, then one before each ask again
    assert cluster.deadline - time.monotonic() > 0.5  # the retries took at most half the time


def test_a_coordinator_loading_its_log_is_asked_again_within_the_deadline():
    model = model_with_groups(a=1, b=2)
    model.group_errors[("OffsetFetch", "a")] = ["COORDINATOR_LOAD_IN_PROGRESS"] * 3
    offsets = FakeCluster(model).group_offsets(["a", "b"])
    assert offsets.value == {"a": {O0: 3}, "b": {O0: 3}} and not offsets.missing
    assert len([r for _, r in sent(model, p.OffsetFetch) if "a" in r.group_ids]) == 4


def test_a_coordinator_that_stays_loading_is_a_missing_part_before_the_deadline():
    model = model_with_groups(a=1, b=2)
    model.group_errors[("OffsetFetch", "a")] = ["COORDINATOR_LOAD_IN_PROGRESS"] * 1000
    cluster = FakeCluster(model, timeout_s=1.5)
    offsets = cluster.group_offsets(["a", "b"])
    assert offsets.value == {"b": {O0: 3}}
    assert [(m.subject, m.reason) for m in offsets.missing] == [(Part("group a"), "COORDINATOR_LOAD_IN_PROGRESS")]
    assert cluster.deadline - time.monotonic() > 0


def test_a_group_the_principal_may_not_describe_is_a_missing_part_naming_the_acl():
    model = model_with_groups(a=1, b=2)
    model.denied_groups = {"a"}
    offsets = FakeCluster(model).group_offsets(["a", "b"])
    assert offsets.value == {"b": {O0: 3}}
    (missing,) = offsets.missing
    assert missing.subject == Part("group a") and missing.not_authorized
    assert missing.reason == "not authorized: needs DESCRIBE on Group a" and missing.acl == "DESCRIBE on Group a"


def test_refused_at_the_coordinator_after_a_lookup_that_passed_names_the_acl_too():
    model = model_with_groups(a=1)
    model.group_errors[("OffsetFetch", "a")] = ["GROUP_AUTHORIZATION_FAILED"]
    (missing,) = FakeCluster(model).group_offsets(["a"]).missing
    assert missing.acl == "DESCRIBE on Group a"


@pytest.mark.parametrize("fault", ["down", "offset_fetch_times_out"])
def test_a_silent_coordinator_makes_each_of_its_groups_a_missing_part_never_an_empty_answer(fault):
    model = model_with_groups(brokers=(1, 2, 3), a=1, b=2, c=2, d=3)
    cluster = FakeCluster(model)
    if fault == "down":
        model.down.add(2)
    else:
        cluster.list_groups()
        model.timeouts[2] = {"OffsetFetch"}
    offsets = cluster.group_offsets(["a", "b", "c", "d"])
    assert offsets.value == {"a": {O0: 3}, "d": {O0: 3}}
    assert [m.subject for m in offsets.missing] == [Part("group b"), Part("group c")]
    assert all("timed out" in m.reason for m in offsets.missing)


# -- DescribeGroups ------------------------------------------------------------------------------


def test_assignments_of_stable_groups_in_one_describe_groups_per_coordinator():
    model = model_with_groups(a=1, b=2, c=2)
    model.assignments = {"a": {O0, O1}, "c": {P0}}  # b has commits and no members: Empty
    result = FakeCluster(model).group_assignments(["a", "b", "c"])
    assert result.value == {"a": frozenset({O0, O1}), "c": frozenset({P0})} and not result.missing
    assert sorted((node, r.group_ids) for node, r in sent(model, p.DescribeGroups)) == [(1, ("a",)), (2, ("b", "c"))]


def test_describe_groups_errors_are_handled_as_offset_fetch_errors():
    model = model_with_groups(brokers=(1, 2, 3), a=1, b=2, c=3)
    model.assignments = {"a": {O0}, "b": {O1}, "c": {P0}}
    model.denied_groups = {"a"}
    model.group_errors[("DescribeGroups", "c")] = ["COORDINATOR_LOAD_IN_PROGRESS"]
    model.timeouts[2] = {"DescribeGroups"}
    result = FakeCluster(model).group_assignments(["a", "b", "c"])
    assert result.value == {"c": frozenset({P0})}
    assert [(m.subject, m.acl) for m in result.missing] == [(Part("group a"), "DESCRIBE on Group a"), (Part("group b"), "")]


def test_a_classic_group_listed_empty_is_not_described_and_its_answer_is_the_same():
    """ListGroups v4+ says each group's state: an Empty classic group has no member, so DescribeGroups
    could only say Empty with no assignment (5,000 groups that only commit offsets: the group pass's
    largest answer). A group listed with no state (a broker before v4), or of another type, or not
    listed at all (named: FindCoordinator placed it), is described as before."""
    def assignments(listed: bool, **changes):
        model = model_with_groups(brokers=(1, 2), a=1, b=2, c=2, d=1)
        model.assignments = {"a": {O0, O1}}  # b, c and d have commits and no members: Empty
        for name, value in changes.items():
            setattr(model, name, value)
        cluster = FakeCluster(model)
        if listed:
            cluster.list_groups_partial()
        result = cluster.group_assignments(["a", "b", "c", "d", "unlisted"])
        return result.value, result.missing, sorted(g for _, r in sent(model, p.DescribeGroups) for g in r.group_ids)

    before = assignments(False)
    assert before[:2] == ({"a": frozenset({O0, O1})}, [])
    assert before[2] == ["a", "b", "c", "d", "unlisted"]  # nothing listed: every group described
    listed = assignments(True)
    assert listed[:2] == before[:2] and listed[2] == ["a", "unlisted"]
    stateless = assignments(True, listed_stateless={"c"})
    assert stateless[:2] == before[:2] and stateless[2] == ["a", "c", "unlisted"]


def test_the_describe_groups_sent_ahead_are_the_calls_own_without_the_groups_listed_empty():
    model = model_with_groups(brokers=(1, 2), a=1, b=2, c=2)
    model.assignments = {"c": {P0}}
    cluster = FakeCluster(model)
    with cluster.one_run():
        cluster.list_groups_partial()
        cluster.group_assignments_ahead(["a", "b", "c"])
        cluster.group_offsets(["a", "b", "c"])
        assert cluster.group_assignments(["a", "b", "c"]).value == {"c": frozenset({P0})}
    assert [(node, r.group_ids) for node, r in sent(model, p.DescribeGroups)] == [(2, ("c",))]


def test_a_group_listed_empty_is_described_again_in_the_next_command():
    """What the listing said holds for the command that listed (its deadline), not for the next."""
    model = model_with_groups(a=1)
    cluster = FakeCluster(model)
    cluster.list_groups_partial()
    assert cluster.group_assignments(["a"]).value == {}
    assert sent(model, p.DescribeGroups) == []
    with cluster.deadline_within(5.0):
        model.assignments = {"a": {O0}}
        assert cluster.group_assignments(["a"]).value == {"a": frozenset({O0})}


# -- log start offsets ---------------------------------------------------------------------------


def test_log_start_offsets_are_listoffsets_earliest_at_each_leader():
    model = model_with_groups()
    model.log_starts = {O0: 4, O1: 2}
    starts = FakeCluster(model).log_start_offsets([O0, O1, P0])
    assert starts.value == {O0: 4, O1: 2, P0: 0} and not starts.missing
    asked = sent(model, p.ListOffsets)
    assert sorted((node, r.partitions) for node, r in asked) == [(1, (O0, P0)), (2, (O1,))]
    assert all(r.earliest and not r.read_committed for _, r in asked)
