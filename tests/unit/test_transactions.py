"""Transaction filters and rows over hand-made listings and descriptions (no broker), and the exit codes."""

from __future__ import annotations

import pytest

from kafkatxn import transaction_listing as tx
from kafkatxn.cli.app import main
from kafkatxn.model import Missing, TransactionalId, ListTransactionsSupport, TopicPartition, TransactionDescription, TransactionListing
from kafkatxn.errors import UsageError
from kafkatxn.kafka.transactions import PROBE_ID_PREFIX
from tests.support.fake_kafka import FakeCluster, KafkaModel

NOW = 1_700_000_000_000
CLIENT = ListTransactionsSupport(duration_on_broker=False, pattern_on_broker=False)
BROKER = ListTransactionsSupport(duration_on_broker=True, pattern_on_broker=True)


def listing(tid, state="Ongoing", pid=1, coordinator=1):
    return TransactionListing(tid, pid, state, coordinator)


def description(tid, state="Ongoing", start=NOW - 60_000, pid=1, epoch=0, timeout=60_000, parts=(), coordinator=1):
    return TransactionDescription(tid, coordinator, state, pid, epoch, timeout, start, frozenset(parts))


# -- states and patterns ------------------------------------------------------------------------


def test_states_are_case_insensitive_and_spelt_as_the_api_does():
    assert tx.normalize_states(["ongoing", "COMPLETECOMMIT", "Ongoing"]) == ["Ongoing", "CompleteCommit"]


def test_unknown_state_is_a_usage_error_naming_the_valid_ones():
    with pytest.raises(UsageError, match="unknown transaction state 'Running'.*Ongoing"):
        tx.normalize_states(["Running"])


def test_bad_regex_is_a_usage_error():
    with pytest.raises(UsageError, match="bad --pattern regex"):
        tx.compile_pattern("app-(")


def test_duration_filter_asks_brokers_for_open_states_only():
    assert tx.states_to_request([], None) == []
    assert tx.states_to_request(["Empty"], None) == ["Empty"]
    assert tx.states_to_request([], 1000) == list(tx.OPEN_STATES)
    assert tx.states_to_request(["Ongoing", "CompleteAbort"], 1000) == ["Ongoing"]
    with pytest.raises(UsageError, match="--min-duration selects open transactions only"):
        tx.states_to_request(["CompleteCommit"], 1000)


# -- durations ----------------------------------------------------------------------------------


def test_running_duration_only_for_open_transactions_with_a_start():
    assert tx.running_duration_ms(description("a", "Ongoing", start=NOW - 5000), NOW) == 5000
    assert tx.running_duration_ms(description("a", "PrepareCommit", start=NOW - 5000), NOW) == 5000
    # A completed transaction keeps its last start time; it has no running duration.
    assert tx.running_duration_ms(description("a", "CompleteCommit", start=NOW - 5000), NOW) is None
    assert tx.running_duration_ms(description("a", "Ongoing", start=-1), NOW) is None


# -- filters applied on the client ----------------------------------------------------------------


def test_client_side_pattern_matches_the_whole_id_like_the_broker():
    listings = [listing("app-1"), listing("my-app-1"), listing("app-10")]
    kept = tx.select_listings(listings, CLIENT, pattern="app-\\d")
    assert [t.transactional_id for t in kept] == ["app-1"]


def test_pattern_applied_by_the_broker_is_not_applied_again():
    # The broker speaks Java regex; its answer stands.
    listings = [listing("app-1"), listing("other")]
    assert tx.select_listings(listings, BROKER, pattern="app-\\d") == listings


def test_client_side_duration_keeps_open_transactions_running_strictly_longer():
    listings = [listing("long"), listing("exact"), listing("short"), listing("done", "CompleteCommit"), listing("gone")]
    descriptions = {
        "long": description("long", start=NOW - 600_001),
        "exact": description("exact", start=NOW - 600_000),
        "short": description("short", start=NOW - 1000),
        "done": description("done", "CompleteCommit", start=NOW - 3_600_000),
    }
    kept = tx.select_listings(listings, CLIENT, min_duration_ms=600_000, descriptions=descriptions, now_ms=NOW)
    assert [t.transactional_id for t in kept] == ["long"]


def test_broker_side_duration_drops_completed_transactions_the_broker_still_returns():
    listings = [listing("open"), listing("done", "CompleteAbort"), listing("idle", "Empty")]
    kept = tx.select_listings(listings, BROKER, min_duration_ms=1000, now_ms=NOW)
    assert [t.transactional_id for t in kept] == ["open"]


# -- rows -----------------------------------------------------------------------------------------


def test_detail_row_carries_kafka_transactions_describe_columns():
    d = description(
        "app-1", "Ongoing", start=NOW - 125_000, pid=42, epoch=7, timeout=900_000, coordinator=3,
        parts=[TopicPartition("b", 0), TopicPartition("a", 10), TopicPartition("a", 2)],
    )
    row = tx.detail_row(d, NOW)
    assert row == tx.TransactionDetailRow(
        transactional_id="app-1", status="found", coordinator_id=3, state="Ongoing", producer_id=42,
        producer_epoch=7, timeout_ms=900_000, two_phase_commit=False, start_time_ms=NOW - 125_000, duration_ms=125_000,
        partitions=("a-2", "a-10", "b-0"), error=None,
    )


def test_detail_row_says_two_phase_commit_by_the_timeout_its_coordinator_records():
    row = tx.detail_row(description("xa-1", "Ongoing", start=NOW - 125_000, timeout=2_147_483_647), NOW)
    assert row.two_phase_commit is True and row.duration_ms == 125_000
    assert tx.missing_row("xa-2", "unknown", "no coordinator").two_phase_commit is None


def test_detail_row_of_an_idle_id_has_no_start_or_duration():
    row = tx.detail_row(description("app-1", "Empty", start=-1), NOW)
    assert (row.start_time_ms, row.duration_ms, row.partitions) == (None, None, ())
    assert not hasattr(row, "duration")  # no human-formatted duration in machine output


def test_detail_rows_keep_the_order_asked_and_say_what_was_not_found_or_not_answered():
    found = {"b": description("b")}
    rows = tx.detail_rows(
        ["c", "b", "a", "b"], found, {"a": "TRANSACTIONAL_ID_NOT_FOUND"},
        [Missing(TransactionalId("c1"), "NOT_COORDINATOR"), Missing(TransactionalId("c"), "COORDINATOR_NOT_AVAILABLE")], NOW,
    )
    assert [(r.transactional_id, r.status, r.error) for r in rows] == [
        ("c", "unknown", "transactional id 'c': COORDINATOR_NOT_AVAILABLE"),
        ("b", "found", None),
        ("a", "not_found", "TRANSACTIONAL_ID_NOT_FOUND"),
    ]


def test_listing_rows_sorted_by_id():
    rows = tx.listing_rows([listing("b", pid=2), listing("a", "Empty", pid=1, coordinator=2)])
    assert rows == [tx.TransactionRow("a", 2, 1, "Empty"), tx.TransactionRow("b", 1, 2, "Ongoing")]


# -- the library calls, with a fake facade --------------------------------------------------------


def fake_cluster(listings, descriptions=None, support=CLIENT, not_found=()):
    """Brokers 1 and 2 list ``listings`` and describe ``descriptions``; ``support`` says whether they
    take the duration and pattern filters (ListTransactions v2) or not (v0); ids in ``not_found``
    are listed but unknown to their coordinator (expired in between)."""
    model = KafkaModel(brokers=(1, 2))
    model.api_versions["ListTransactions"] = (0, 2 if support.pattern_on_broker else 0)
    model.listings = [(t.transactional_id, t.producer_id, t.state) for t in listings]
    model.transactions = {t: d for t, d in (descriptions or {}).items() if t not in not_found}
    return FakeCluster(model)


def facade_calls(cluster):
    return [c for c in cluster.calls if c[0] in ("list_transactions", "describe_transactions")]


def test_client_side_duration_describes_only_open_candidates_and_says_so():
    listings = [listing("app-old"), listing("app-new"), listing("app-done", "CompleteCommit"), listing("x-old")]
    descriptions = {
        "app-old": description("app-old", start=0),  # decades ago
        "app-new": description("app-new", start=2**62),  # in the future: not running long
        "x-old": description("x-old", start=0),
    }
    cluster = fake_cluster(listings, descriptions)
    result = tx.list_transactions(cluster, min_duration_ms=600_000, pattern="app-.*")
    assert [r.transactional_id for r in result.rows] == ["app-old"]
    assert isinstance(result.rows[0], tx.TransactionRow)
    calls = facade_calls(cluster)
    assert calls[0] == ("list_transactions", list(tx.OPEN_STATES), [], 600_000, "app-.*")
    # The brokers (v0) took neither filter: both ran on the client.
    assert {(r.min_duration_ms, r.pattern) for _n, r in cluster.model.sent if type(r).__name__ == "ListTransactions"} == {(None, None)}
    # x-old fails the pattern and app-done is closed: neither is worth a DescribeTransactions.
    # (asked with the visibility probe, in the same DescribeTransactions)
    described = [t for _n, r in cluster.model.sent if type(r).__name__ == "DescribeTransactions" for t in r.transactional_ids]
    assert sorted(t for t in described if not t.startswith(PROBE_ID_PREFIX)) == ["app-new", "app-old"]
    assert len(described) == 3
    assert any("on the client" in n and "--min-duration" in n for n in result.notes)


def test_broker_side_filters_need_no_describe():
    cluster = fake_cluster([listing("app-1")], support=BROKER)
    result = tx.list_transactions(cluster, min_duration_ms=1000, pattern="app-.*")
    assert [c[0] for c in facade_calls(cluster)] == ["list_transactions"]
    assert {(r.min_duration_ms, r.pattern) for _n, r in cluster.model.sent if type(r).__name__ == "ListTransactions"} == {(1000, "app-.*")}
    assert [r.transactional_id for r in result.rows] == ["app-1"]
    assert any("by the brokers" in n and "--min-duration" in n for n in result.notes)
    assert any("by the brokers" in n and "--pattern" in n for n in result.notes)


def test_list_with_describe_drops_ids_gone_in_between():
    listings = [listing("a", "Empty"), listing("b")]
    cluster = fake_cluster(listings, {"b": description("b")}, not_found={"a"})
    result = tx.list_transactions(cluster, describe=True)
    assert [(r.transactional_id, r.status) for r in result.rows] == [("b", "found")]
    assert any("gone between" in n for n in result.notes)


def test_usage_errors_come_before_anything_is_sent():
    cluster = fake_cluster([])
    with pytest.raises(UsageError):
        tx.list_transactions(cluster, pattern="(")
    with pytest.raises(UsageError):
        tx.list_transactions(cluster, states=["nope"])
    with pytest.raises(UsageError):
        tx.describe_transactions(cluster, ["ok", ""])
    assert cluster.calls == [] and cluster.model.sent == []


# -- exit codes of `transactions describe` ------------------------------------------------------


@pytest.mark.parametrize(
    "rows_status, missing, expected",
    [
        (["found", "found"], [], 0),
        (["found", "not_found"], [], 1),
        (["not_found"], [], 1),
        (["found", "unknown"], ["coordinator 2: timed out"], 3),
    ],
)
def test_describe_exit_code(monkeypatch, capsys, rows_status, missing, expected):
    rows = [tx.missing_row(f"id-{i}", status, None) for i, status in enumerate(rows_status)]
    monkeypatch.setattr(tx, "describe_transactions", lambda cluster, ids: tx.TransactionsResult(rows, list(missing)))
    with pytest.raises(SystemExit) as exit_info:
        main(["transactions", "describe", "-b", "127.0.0.1:1", "-o", "json", "id-0"])
    out, err = capsys.readouterr()
    assert exit_info.value.code == expected
    assert out.count('"transactional_id"') == len(rows)  # every row is shown whatever the exit code
    if expected == 1:
        assert "not found: " in err


def test_list_with_a_silent_broker_is_exit_3_after_the_rows_that_arrived(monkeypatch, capsys):
    rows = [tx.TransactionRow("a", 1, 5, "Ongoing")]
    monkeypatch.setattr(tx, "list_transactions", lambda *a, **k: tx.TransactionsResult(rows, ["broker 2: timed out"]))
    with pytest.raises(SystemExit) as exit_info:
        main(["transactions", "list", "-b", "127.0.0.1:1", "-o", "csv"])
    out, err = capsys.readouterr()
    assert exit_info.value.code == 3
    assert out.splitlines() == ["transactional_id,coordinator_id,producer_id,state", "a,1,5,Ongoing"]
    assert "incomplete transaction list: broker 2: timed out" in err
