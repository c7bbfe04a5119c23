"""Selecting partitions is decided above the Kafka layer, over metadata, and its errors name inputs,
not flags: the CLI words them with its own options."""

from __future__ import annotations

import pytest

from kafkatxn import selection
from kafkatxn.errors import InputError, NotFoundError, UsageError
from kafkatxn.model import ClusterMetadata, PartitionInfo, TopicPartition


def metadata(*topics: tuple[str, int]) -> ClusterMetadata:
    parts = tuple(PartitionInfo(t, p, 1, (1,), (1,), t.startswith("__")) for t, n in topics for p in range(n))
    return ClusterMetadata("c", 1, (), parts)


def test_a_partition_without_exactly_one_topic_is_an_input_error_worded_by_the_caller():
    with pytest.raises(InputError) as raised:
        selection.select_partitions(metadata(("a", 2)), partition=0)
    assert isinstance(raised.value, UsageError)
    assert str(raised.value) == "partition needs exactly one topic"
    assert raised.value.worded({"partition": "--partition", "topic": "--topic"}) == "--partition needs exactly one --topic"


def test_topics_partition_and_pattern_select_from_the_metadata():
    md = metadata(("orders", 3), ("payments", 2), ("__transaction_state", 2))
    assert [p.tp for p in selection.select_partitions(md, ["orders"], 1)] == [("orders", 1)]
    assert {p.topic for p in selection.select_partitions(md)} == {"orders", "payments"}
    assert {p.topic for p in selection.select_partitions(md, include_internal=True)} == {"orders", "payments", "__transaction_state"}
    assert {p.topic for p in selection.select_partitions(md, topic_pattern="^pay")} == {"payments"}


def test_unknown_topics_and_partitions_are_not_found():
    md = metadata(("orders", 3))
    with pytest.raises(NotFoundError, match="unknown topic 'nope'"):
        selection.select_partitions(md, ["nope"])
    with pytest.raises(NotFoundError, match=r"has no partition 7 \(it has 3: 0-2\)"):
        selection.select_partitions(md, ["orders"], 7)


def test_the_cli_words_an_input_error_with_its_flags(capsys):
    from tests.support.cli_helpers import run_cli

    result = run_cli(capsys, "producers", "-b", "127.0.0.1:1", "--partition", "0")
    assert result.code == 64
    assert "--partition needs exactly one --topic" in result.stderr


def test_the_partitions_lso_measures_are_the_metadatas_own_with_their_leaders_in_partition_order():
    a0, a1, b0 = TopicPartition("a", 0), TopicPartition("a", 1), TopicPartition("b", 0)

    def led(*parts: tuple[str, int, int]) -> ClusterMetadata:
        return ClusterMetadata("c", 1, (), tuple(PartitionInfo(t, p, leader, (1,), (1,), t.startswith("__")) for t, p, leader in parts))

    md = led(("__transaction_state", 0, 1), ("a", 0, 2), ("a", 1, 1), ("b", 0, 3))
    tps, leaders = selection.select_in_partition_order(md)
    assert tps == [a0, a1, b0] and leaders == [2, 1, 3]
    assert all(tp is md.tps[i + 1] for i, tp in enumerate(tps))  # the metadata's, not made again
    assert selection.select_in_partition_order(md, ["b", "a"]) == ([a0, a1, b0], None)  # put in order: leaders looked up
    # A metadata not in partition order (never as the session keeps it) is put in order, each once.
    assert selection.select_in_partition_order(led(("b", 0, 3), ("a", 1, 1), ("a", 0, 2), ("a", 0, 2))) == ([a0, a1, b0], None)


def test_the_partitions_of_metadata_read_in_order_are_chosen_as_they_are():
    """Partitions the wire read in topic and partition order (InTopicOrder) are not compared again: the
    choice is the same as of the same partitions in a plain tuple."""
    from kafkatxn.model import InTopicOrder, topic_partitions

    parts = tuple(PartitionInfo(t, p, leader, (1,), (1,), t.startswith("__")) for t, p, leader in
                  (("__transaction_state", 0, 1), ("a", 0, 2), ("a", 1, 1), ("b", 0, 3)))
    read = ClusterMetadata("c", 1, (), InTopicOrder(parts, topic_partitions(parts)))
    assert selection.select_in_partition_order(read) == selection.select_in_partition_order(ClusterMetadata("c", 1, (), parts))
    assert selection.select_in_partition_order(read)[0][0] is read.tps[1]
