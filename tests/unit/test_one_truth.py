"""One question, one answer: ``lso``, ``hanging``, ``check``, ``diagnose``, ``abort``'s plan and the
exporter, run on one cluster at one moment, agree on how many transactions are open, which hang,
how old each is, and whether a group is blocked (and how badly).

Each takes what its verdicts decide on from one sequence, :func:`kafkatxn.facts.pins` (classify,
ask again the untracked, settle by the coordinator's log, date), and nothing else does those steps:
:func:`test_every_command_takes_its_pins_from_the_one_sequence` checks it. Each gathers through the
fact layer (``kafkatxn/facts*.py``) and never through another command's library (``abort``'s plan is
the scan ``hanging`` lists, ``diagnose``'s rows the group rows ``lso --groups`` shows):
:func:`test_no_command_library_gathers_through_another_commands` and
:func:`test_commands_that_share_a_question_ask_the_one_fact` check it.

They used to gather and decide each their own way: ``check`` counted the coordinators' open
transactions across the whole cluster while ``hanging`` counted those on the partitions it scanned;
``diagnose`` dated a transaction from a coordinator that no longer tracked it on that partition
while ``lso`` did not; a hanging transaction had no age at all; and ``check --groups`` called any
group at the LSO critical, even behind a transaction committed 100 ms later. Every command now
asks :mod:`kafkatxn.verdicts` (over the real facade, on the shared fake cluster).

The cluster (MAX = transaction.max.timeout.ms = 15 min):

- orders-0: app-a (producer 7) started 3*MAX ago, timeout MAX, idle 2*MAX: **long-running** (its
  coordinator tracks it) and **overdue**; group ``g`` is blocked behind it;
- orders-1: producer 8, no coordinator knows it: **hanging**, first record 2.5*MAX ago;
  group ``done`` is caught up there;
- orders-2: producer 12, whose coordinator (app-d) has a transaction open elsewhere: **hanging**,
  first record 2.2*MAX ago (never dated by app-d's start); group ``h`` is blocked behind it;
- orders-3: app-e (producer 13) started 5 min ago with a 1 min timeout: **overdue**, not long-running
  (written within MAX); group ``late`` is blocked behind it;
- payments-0: app-b (producer 9) **in flight**, 1 s old; group ``keeping`` keeps up, at its LSO.
"""

from __future__ import annotations

import ast
import dataclasses
import json
import pathlib
import time

import pytest
from prometheus_client.parser import text_string_to_metric_families

from kafkatxn import facts, facts_lso, facts_scan, gather, verdicts, verdicts_age, verdicts_groups
from kafkatxn.txnlog_records import TxnLogRecord
from kafkatxn.cli.common import CommandContext
from kafkatxn.exporter import render_text
from kafkatxn.exporter_metrics import ExportOptions
from kafkatxn.model import ProducerState, TopicPartition, TransactionDescription
from kafkatxn.facts_cluster import gather_snapshot
from tests.support.cli_helpers import run_cli
from tests.support.fake_kafka import FakeCluster, KafkaModel

MAX = 900_000
ORDERS0, ORDERS1, ORDERS2, ORDERS3 = (TopicPartition("orders", p) for p in range(4))
PAYMENTS = TopicPartition("payments", 0)
TOLERANCE_MS = 5_000  # each command reads the clock when it gathers
CRIT = "15m"  # the critical age every command is given

AGES = {  # expected age and where it comes from
    "orders-0": (3 * MAX, "coordinator"),
    "orders-1": (int(2.5 * MAX), "first_record"),
    "orders-2": (int(2.2 * MAX), "first_record"),
    "orders-3": (300_000, "coordinator"),
    "payments-0": (1_000, "coordinator"),
}
HANGING = {"orders-1", "orders-2"}
BLOCKED = {"g": "critical", "h": "critical", "late": "critical", "keeping": "not critical"}


def build() -> KafkaModel:
    now = int(time.time() * 1000)
    m = KafkaModel(brokers=(1, 2, 3))
    m.add_transaction_log([1, 2, 3])
    m.add_partition("orders", 0, leader=1, lso=10, hw=20)
    m.add_partition("orders", 1, leader=2, lso=4, hw=9)
    m.add_partition("orders", 2, leader=3, lso=6, hw=8)
    m.add_partition("orders", 3, leader=1, lso=2, hw=5)
    m.add_partition("payments", 0, leader=3, lso=5, hw=9)
    m.producers[ORDERS0] = [ProducerState(7, 0, 3, now - 2 * MAX, 1, 10)]
    m.transactions["app-a"] = TransactionDescription("app-a", 1, "Ongoing", 7, 0, MAX, now - 3 * MAX, frozenset([ORDERS0]))
    m.producers[ORDERS1] = [ProducerState(8, 0, 3, now - 2 * MAX, 1, 4)]
    m.record_timestamps[ORDERS1] = {4: now - int(2.5 * MAX)}
    m.producers[ORDERS2] = [ProducerState(12, 0, 3, now - 2 * MAX, 1, 6)]
    m.record_timestamps[ORDERS2] = {6: now - int(2.2 * MAX)}
    m.transactions["app-d"] = TransactionDescription("app-d", 2, "Ongoing", 12, 0, MAX, now - 10_000, frozenset([PAYMENTS]))
    m.producers[ORDERS3] = [ProducerState(13, 0, 3, now - 240_000, 1, 2)]
    m.transactions["app-e"] = TransactionDescription("app-e", 1, "Ongoing", 13, 0, 60_000, now - 300_000, frozenset([ORDERS3]))
    m.producers[PAYMENTS] = [ProducerState(9, 0, 3, now - 500, 1, 5)]
    m.transactions["app-b"] = TransactionDescription("app-b", 3, "Ongoing", 9, 0, MAX, now - 1_000, frozenset([PAYMENTS]))
    m.groups.update({"g": {ORDERS0: 10}, "h": {ORDERS2: 6}, "late": {ORDERS3: 2}, "keeping": {PAYMENTS: 5}, "done": {ORDERS1: 9}})
    return m


@pytest.fixture
def fake(monkeypatch):
    cluster = FakeCluster(build())
    monkeypatch.setattr(CommandContext, "cluster", property(lambda self: cluster))
    return cluster


def cli(capsys, *args: str, codes=(0, 1, 2)):
    timed = args[0] in ("hanging", "check", "diagnose") or "--all-hanging" in args  # a targeted abort reads the brokers'
    timeout = ["--max-transaction-timeout", "15m"] if timed else []
    result = run_cli(capsys, *args, *timeout, "-b", "fake:9092", "-o", "json")
    assert result.code in codes, (args, result.code, result.stderr)
    return json.loads(result.stdout), result.code


def metrics(snapshot) -> dict[str, float]:
    text = render_text(snapshot, ExportOptions()).decode()
    out = {}
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            out[s.name + "".join(f"{{{k}={v}}}" for k, v in sorted(s.labels.items()))] = s.value
    return out


def close(a: int | None, b: int | None) -> bool:
    return a is not None and b is not None and abs(a - b) <= TOLERANCE_MS


def test_every_command_counts_the_same_open_transactions(capsys, fake):
    found, _ = cli(capsys, "hanging")
    checked, _ = cli(capsys, "check", "--txn-age-warn", "none", "--txn-age-crit", "none")
    lagging, _ = cli(capsys, "lso")
    exported = metrics(gather_snapshot(fake, max_transaction_timeout_ms=MAX))
    counts = {
        "hanging": found["open_transactions"],
        "check": checked["open_transactions"],
        "lso": sum(r["open_transactions"] for r in lagging),  # an open transaction always makes LSO lag
        "exporter": exported["kafkatxn_open_transactions"],
    }
    assert set(counts.values()) == {5}, counts  # producers 7, 8, 12, 13 and 9


def test_every_command_finds_the_same_hanging_transactions(capsys, fake):
    found, _ = cli(capsys, "hanging")
    checked, _ = cli(capsys, "check", "--txn-age-warn", "none", "--txn-age-crit", "none")
    lagging, _ = cli(capsys, "lso")
    planned, _ = cli(capsys, "abort", "--all-hanging", "--dry-run")
    exported = metrics(gather_snapshot(fake, max_transaction_timeout_ms=MAX))
    where = {
        "hanging": {f"{r['topic']}-{r['partition']}" for r in found["hanging"]},
        "check": {f["subject"] for f in checked["findings"] if f["kind"] == "hanging_transaction"},
        "lso": {f"{r['topic']}-{r['partition']}" for r in lagging if r["txn_hanging"]},
        "abort": {f"{r['topic']}-{r['partition']}" for r in planned if r["outcome"] == "would abort"},
    }
    assert all(v == HANGING for v in where.values()), where
    assert checked["hanging_transactions"] == found["hanging_count"] == exported["kafkatxn_hanging_transactions"] == 2
    # The groups behind them: diagnose's verdict is hanging's.
    held = {t["partitions"][0].split("@")[0]: t["verdict"] for g in BLOCKED for t in cli(capsys, "diagnose", "--group", g)[0]["transactions"]}
    assert {tp for tp, v in held.items() if v == "hanging"} == HANGING & set(held), held
    # Written within the maximum timeout, no coordinator lists it: untracked, not hanging yet, so
    # abort writes nothing and says from when it would.
    fake.model.producers[ORDERS1] = [ProducerState(8, 0, 3, int(time.time() * 1000) - 1_000, 1, 4)]
    found = cli(capsys, "hanging", "-t", "orders", "-p", "1")[0]
    assert not found["hanging"] and [r["producer_id"] for r in found["untracked"]] == [8]
    (row,) = cli(capsys, "abort", "-t", "orders", "-p", "1", "--start-offset", "4", "--dry-run", codes=(0, 1, 2, 3))[0]
    assert row["outcome"] == "not hanging yet" and "hanging from" in row["reason"], row


def test_every_command_gives_each_transaction_the_same_age(capsys, fake):
    now = int(time.time() * 1000)
    lagging, _ = cli(capsys, "lso", "--sort", "age")
    found, _ = cli(capsys, "hanging")
    diagnosed = [t for g in BLOCKED for t in cli(capsys, "diagnose", "--group", g)[0]["transactions"]]
    ages = {
        "lso": {f"{r['topic']}-{r['partition']}": (r["txn_age_ms"], r["txn_age_source"]) for r in lagging},
        "hanging": {f"{r['topic']}-{r['partition']}": (r["transaction_age_ms"], r["transaction_age_source"]) for r in found["hanging"]},
        "long_running": {f"{r['topic']}-{r['partition']}": (r["transaction_age_ms"], "coordinator") for r in found["long_running"]},
        "diagnose": {t["partitions"][0].split("@")[0]: (t["age_ms"], t["age_source"]) for t in diagnosed},
    }
    for command, seen in ages.items():
        assert seen, command
        for tp, (age, source) in seen.items():
            expected, expected_source = AGES[tp]
            assert close(age, expected) and source == expected_source, (command, tp, age, source, expected)
    # The oldest first, the hanging ones among them (they used to have no age and sort last).
    assert [f"{r['topic']}-{r['partition']}" for r in lagging] == sorted(AGES, key=lambda tp: -AGES[tp][0])
    # The oldest: check and the exporter count the hanging ones too.
    checked, _ = cli(capsys, "check", "--txn-age-warn", "none", "--txn-age-crit", "none")
    exported = metrics(gather_snapshot(fake, max_transaction_timeout_ms=MAX))
    oldest = {
        "check": checked["transaction_age_max_ms"],
        "exporter": int(exported["kafkatxn_transaction_oldest_age_seconds"] * 1000),
        "lso": lagging[0]["txn_age_ms"],
    }
    assert all(close(v, max(a for a, _ in AGES.values())) for v in oldest.values()), (oldest, now)
    # With no other open transaction, the hanging one is the oldest (it used to count 0).
    for tid in ("app-a", "app-b", "app-c", "app-d", "app-e"):
        fake.model.transactions.pop(tid, None)
    alone = gather_snapshot(fake, topic_regex="^orders$", max_transaction_timeout_ms=MAX)
    assert close(int(alone.oldest_transaction_age_s() * 1000), AGES["orders-1"][0]), alone.hanging


def test_every_command_rates_each_group_the_same(capsys, fake):
    exported = metrics(gather_snapshot(fake, max_transaction_timeout_ms=MAX, groups=True))
    answers: dict[str, dict[str, str]] = {}
    for group in [*BLOCKED, "done"]:
        (row,), lso_code = cli(capsys, "lso", "--groups", group, "--critical-age", CRIT)
        checked, _ = cli(capsys, "check", "--groups", "--group-regex", f"^{group}$", "--txn-age-crit", CRIT,
                         "--txn-age-warn", "none", "--lso-lag-warn", "none", "--lso-lag-crit", "none", codes=(0, 1, 2, 3))
        diagnosed, diagnose_code = cli(capsys, "diagnose", "--group", group)
        (summary,) = diagnosed["groups"]
        series = f"{{group={group}}}{{partition={row['partition']}}}{{topic={row['topic']}}}"
        # Held by its transaction: blocked, or waiting on one in flight (check counts both, in two figures).
        blocked = {
            "lso": row["verdict"] in ("blocked", "waiting"),
            "check": checked["groups_blocked"] + checked["groups_waiting"] == 1,
            "diagnose": summary["status"] in ("blocked", "waiting"),
            "exporter": exported["kafkatxn_group_blocked" + series] == 1
            or exported[f"kafkatxn_group_waiting_partitions{{group={group}}}"] == 1,
        }
        # Which of the two, where it is told apart.
        assert summary["status"] == row["verdict"] or row["verdict"] not in ("blocked", "waiting"), (group, summary, row)
        assert (exported["kafkatxn_group_blocked" + series] == 1) == (row["verdict"] == "blocked"), (group, row)
        critical = {
            "lso": lso_code == 2,
            "check": any(f["kind"] == "group_blocked" and f["subject"] == group for f in checked["findings"]),
            "diagnose": diagnose_code == 2,
            "exporter": exported["kafkatxn_group_stuck" + series] == 1,  # hanging or overdue: all of them here
        }
        answers[group] = {"blocked": blocked, "critical": critical}
        assert len(set(blocked.values())) == 1 and blocked["lso"] == (group in BLOCKED), (group, blocked)
        assert len(set(critical.values())) == 1 and critical["lso"] == (BLOCKED.get(group) == "critical"), (group, critical)
    assert answers["keeping"]["critical"]["check"] is False



def test_every_command_calls_a_recent_untracked_pin_untracked(capsys, fake):
    """No coordinator tracks orders-1's transaction, but its producer wrote 1 s ago: hanging's rule
    decides only after the maximum timeout of silence (no coordinator reports its own), so it is
    not hanging yet, and every command says untracked: never calm, never a page, never undetermined."""
    now = int(time.time() * 1000)
    fake.model.producers[ORDERS1] = [ProducerState(8, 0, 3, now - 1_000, 1, 4)]
    fake.model.record_timestamps[ORDERS1] = {4: now - 2_000}  # it began 2 s ago
    fake.model.groups["behind"] = {ORDERS1: 4}
    found, _ = cli(capsys, "hanging", "-t", "orders", "-p", "1")
    (row,), lso_code = cli(capsys, "lso", "--groups", "behind", "--critical-age", "1000d")
    checked, _ = cli(capsys, "check", "--groups", "--group-regex", "^behind$", "--txn-age-crit", "none",
                              "--txn-age-warn", "none", "--lso-lag-warn", "none", "--lso-lag-crit", "none", codes=(0, 1, 2, 3))
    diagnosed, diagnose_code = cli(capsys, "diagnose", "--group", "behind", codes=(0, 1, 2, 3))
    (txn,) = diagnosed["transactions"]
    assert found["hanging"] == [] and [r["producer_id"] for r in found["untracked"]] == [8]
    assert row["txn_hanging"] is False and row["txn_verdict"] == "untracked"
    assert txn["verdict"] == "untracked" and txn["action"] == "abort", txn
    assert txn["until_ms"] == fake.model.producers[ORDERS1][0].last_timestamp_ms + MAX + 1
    # check: the group waits on it (a warning naming it), never blocked (critical) nor undetermined.
    assert (checked["groups_waiting"], checked["groups_blocked"]) == (1, 0)
    (waits,) = [f for f in checked["findings"] if f["subject"] == "behind"]
    assert waits["kind"] == "group_waiting" and waits["status"] == "warning" and "untracked" in waits["message"]
    assert (row["verdict"], diagnosed["groups"][0]["status"]) == ("blocked", "blocked")
    assert lso_code == diagnose_code == 1, (lso_code, diagnose_code)  # (check's 2 is orders-2, hanging elsewhere)


ORDERS4 = TopicPartition("orders", 4)


def add_lost_commit(m: KafkaModel) -> None:
    """orders-4: app-f (producer 14) committed by its coordinator (its log shows PrepareCommit with
    orders-4), but the partition never got the COMMIT marker: a **lost commit**, idle 2*MAX, first
    record 2.4*MAX ago; group ``restore`` is blocked behind it."""
    now = int(time.time() * 1000)
    first, last = now - int(2.4 * MAX), now - 2 * MAX
    m.add_partition("orders", 4, leader=2, lso=3, hw=8)
    m.producers[ORDERS4] = [ProducerState(14, 0, 3, last, 1, 3)]
    m.record_timestamps[ORDERS4] = {3: first}
    m.transactions["app-f"] = TransactionDescription("app-f", 2, "CompleteCommit", 14, 0, MAX, -1, frozenset())
    m.transaction_log_by_id["app-f"] = [
        TxnLogRecord("app-f", 14, 0, "Empty", (), MAX, -1, first - 5_000),
        TxnLogRecord("app-f", 14, 0, "Ongoing", ("orders-4",), MAX, first - 50, first - 40),
        TxnLogRecord("app-f", 14, 0, "PrepareCommit", ("orders-4",), MAX, first - 50, last + 100),
        TxnLogRecord("app-f", 14, 0, "CompleteCommit", (), MAX, first - 50, last + 105),
    ]
    m.groups["restore"] = {ORDERS4: 3}


def test_every_command_calls_a_lost_commit_what_hanging_calls_it(capsys, fake):
    """``hanging`` settles its verdicts by the coordinator's log: a transaction its coordinator
    committed is a lost COMMIT marker, not hanging (an abort would drop committed records). ``lso``
    and ``lso --groups`` used to decide hanging without the log and called it hanging."""
    add_lost_commit(fake.model)
    found, _ = cli(capsys, "hanging")
    checked, _ = cli(capsys, "check", "--txn-age-warn", "none", "--txn-age-crit", "none")
    lagging, _ = cli(capsys, "lso")
    planned, _ = cli(capsys, "abort", "--all-hanging", "--dry-run", codes=(0, 1, 2, 3))  # 3: the lost commit is refused
    exported = metrics(gather_snapshot(fake, max_transaction_timeout_ms=MAX, groups=True))
    (refused,) = [r for r in planned if r["partition"] == 4]
    assert refused["outcome"] == "refused" and "restore-commit" in refused["reason"], refused
    rows = {f"{r['topic']}-{r['partition']}": r for r in lagging}
    hung = {
        "hanging": {f"{r['topic']}-{r['partition']}" for r in found["hanging"]},
        "check": {f["subject"] for f in checked["findings"] if f["kind"] == "hanging_transaction"},
        "lso": {tp for tp, r in rows.items() if r["txn_hanging"]},
        "abort": {f"{r['topic']}-{r['partition']}" for r in planned if r["outcome"] == "would abort"},
    }
    assert all(v == HANGING for v in hung.values()), hung
    lost = {
        "hanging": {f"{r['topic']}-{r['partition']}" for r in found.get("lost_commit", [])},
        "check": {f["subject"] for f in checked["findings"] if f["kind"] == "lost_commit_marker"},
        "lso": {tp for tp, r in rows.items() if r["txn_lost_commit"]},
    }
    assert all(v == {"orders-4"} for v in lost.values()), lost
    assert rows["orders-4"]["txn_hanging"] is False  # known: not hanging, never null
    assert (exported["kafkatxn_lost_commit_markers"], exported["kafkatxn_hanging_transactions"]) == (1, 2)
    # The group behind it: stuck (critical whatever the age threshold), and told to restore, never to abort.
    (row,), lso_code = cli(capsys, "lso", "--groups", "restore", "--critical-age", "1000d")
    checked, _ = cli(capsys, "check", "--groups", "--group-regex", "^restore$", "--txn-age-crit", "none",
                     "--txn-age-warn", "none", "--lso-lag-warn", "none", "--lso-lag-crit", "none")
    diagnosed, diagnose_code = cli(capsys, "diagnose", "--group", "restore")
    (txn,) = diagnosed["transactions"]
    assert (row["verdict"], row["txn_hanging"], row["txn_lost_commit"], lso_code) == ("blocked", False, True, 2), (row, lso_code)
    assert any(f["kind"] == "group_blocked" and f["subject"] == "restore" for f in checked["findings"]), checked["findings"]
    assert (txn["verdict"], txn["action"], diagnose_code) == ("lost_commit", "restore_commit", 2), txn
    assert txn["command"].startswith("kafkatxn restore-commit --topic orders --partition 4 --start-offset 3"), txn
    assert exported["kafkatxn_group_stuck{group=restore}{partition=4}{topic=orders}"] == 1


def test_blocked_means_stuck():
    """The one definition: critical only for hanging, overdue or too old."""
    assert verdicts_groups.blocked_severity(False, False, False) is verdicts_groups.Severity.warning
    assert verdicts_groups.blocked_severity(False, False, False, old=False) is verdicts_groups.Severity.ok
    for hanging, overdue, too_old in ((True, False, False), (False, True, False), (False, False, True)):
        assert verdicts_groups.blocked_severity(hanging, overdue, too_old, old=False) is verdicts_groups.Severity.critical


def open_txn(start_ms: int | None = None, timeout_ms: int = MAX, last_ms: int = 1_000, first_ms: int | None = None,
             producer_id: int = 7) -> verdicts.OpenTransaction:
    d = None if start_ms is None else TransactionDescription("t", 1, "Ongoing", 7, 0, timeout_ms, start_ms, frozenset([ORDERS0]))
    return verdicts.OpenTransaction(ORDERS0, ProducerState(producer_id, 0, 3, last_ms, 1, 10), "t" if d else None, d, first_ms)


def test_a_transactions_age_is_its_coordinators_else_its_first_records_else_its_last_write():
    now = 100_000
    assert verdicts_age.transaction_age(open_txn(start_ms=10_000, first_ms=5_000), now) == verdicts_age.TransactionAge(90_000, "coordinator")
    # The coordinator's transaction is another producer's: not this one's start.
    other = open_txn(start_ms=10_000, first_ms=5_000, producer_id=8)
    assert verdicts_age.transaction_age(other, now) == verdicts_age.TransactionAge(95_000, "first_record")
    assert verdicts_age.transaction_age(open_txn(last_ms=60_000), now) == verdicts_age.TransactionAge(40_000, "last_write")
    assert verdicts_age.transaction_age(open_txn(last_ms=-1), now) is None
    assert verdicts_age.needs_first_record(open_txn()) and not verdicts_age.needs_first_record(open_txn(start_ms=1))


def test_overdue_is_past_its_own_timeout_and_its_coordinators_abort_as_its_coordinator_dates_it():
    assert verdicts_age.is_past_timeout(open_txn(start_ms=0, timeout_ms=60_000), 60_001)
    assert not verdicts_age.is_past_timeout(open_txn(start_ms=0, timeout_ms=60_000), 60_000)
    grace = verdicts_age.overdue_grace_ms()
    assert not verdicts_age.is_overdue(open_txn(start_ms=0, timeout_ms=60_000), 60_000 + grace)
    assert verdicts_age.is_overdue(open_txn(start_ms=0, timeout_ms=60_000), 60_001 + grace)
    assert not verdicts_age.is_overdue(open_txn(first_ms=0), 10 * MAX)  # no coordinator: hanging decides, not overdue


def test_hanging_needs_the_whole_rule():
    view = verdicts.CoordinatorView()  # every log partition answered, no id maps the producer
    young, idle = open_txn(last_ms=MAX), open_txn(last_ms=0)
    assert verdicts.classify(young, view).verdict is verdicts.Verdict.HANGING  # the coordinator side alone
    V = verdicts.PinVerdict
    # No coordinator has its producer id: untracked (never calm) until the maximum has passed.
    assert verdicts.pin_verdict(verdicts.classify(young, view), MAX + 1, MAX) is V.UNTRACKED
    assert verdicts.pin_verdict(verdicts.classify(idle, view), MAX + 1, MAX) is V.HANGING
    assert verdicts.pin_verdict(verdicts.classify(idle, view), MAX + 1, None) is V.UNDETERMINED  # never a guess


def test_an_unreadable_first_record_keeps_the_lower_bound_and_says_why(fake):
    fake.model.record_timestamps.clear()
    fake.model.producers[ORDERS1] = [ProducerState(8, 0, 3, 1_000, 1, 4)]
    missing = []
    gone = ProducerState(12, 0, 3, 1_000, 1, 99)  # the fake has no record at 99 on orders-2
    one, two = gather.with_first_records(fake, [verdicts.OpenTransaction(ORDERS1, fake.model.producers[ORDERS1][0]),
                                                verdicts.OpenTransaction(ORDERS2, gone)], missing)
    assert one.first_record_timestamp_ms == 1_000 and two.first_record_timestamp_ms is None
    assert [str(m.subject) for m in missing] == ["orders-2"] and "lower bound" in str(missing[0]), missing
    assert verdicts_age.transaction_age(two, 2_000).source == "last_write"
    assert [c[0] for c in fake.calls].count("first_record_timestamps") == 1  # one read for both partitions


def test_a_pins_verdict_is_the_whole_rule_settled_by_the_log():
    """verdicts.pin_verdict: what lso says of the transaction pinning an LSO, as hanging says it."""
    view = verdicts.CoordinatorView()  # every log partition answered, no id maps the producer
    young, idle = verdicts.classify(open_txn(last_ms=MAX), view), verdicts.classify(open_txn(last_ms=0), view)
    now = MAX + 1
    V = verdicts.PinVerdict
    assert verdicts.pin_verdict(idle, now, MAX) is V.HANGING
    assert verdicts.pin_verdict(young, now, MAX) is V.UNTRACKED  # within the maximum timeout: untracked, not hanging yet
    lost = dataclasses.replace(idle, verdict=verdicts.Verdict.LOST_COMMIT)
    unsure = dataclasses.replace(idle, verdict=verdicts.Verdict.UNDETERMINED)
    tracked = dataclasses.replace(idle, verdict=verdicts.Verdict.LONG_RUNNING)
    assert [verdicts.pin_verdict(c, now, MAX) for c in (lost, unsure, tracked)] == [V.LOST_COMMIT, V.UNDETERMINED, V.NOT_HANGING]
    # Without the maximum timeout only a tracked one is known; without a classification nothing is.
    assert [verdicts.pin_verdict(c, now, None) for c in (idle, tracked)] == [V.UNDETERMINED, V.NOT_HANGING]
    assert verdicts.pin_verdict(None, now, MAX) is V.UNDETERMINED
    # The rows' (txn_hanging, txn_lost_commit): unknown is None, never a reassuring False.
    assert [verdicts.pin_flags(v) for v in (V.HANGING, V.LOST_COMMIT, V.NOT_HANGING, V.UNDETERMINED, None)] == [
        (True, False), (False, True), (False, False), (None, None), (None, None)]


# The steps of the one pins sequence: outside facts.pins no command takes any of them.
PIN_STEPS = ((gather, "fetch_ahead"), (gather, "with_first_records"), (gather, "settle_by_transaction_log"),
             (gather, "transaction_logs"), (facts, "still_open"), (verdicts, "classify_all"))


def test_every_command_takes_its_pins_from_the_one_sequence(capsys, fake, monkeypatch):
    """Every command's verdicts on open transactions come from facts.pins, and no command takes one
    of its steps on its own path (which is how they used to disagree: a second sequence settled
    by the log, or dated, or asked again, differently)."""
    add_lost_commit(fake.model)
    inside, outside, asked = [0], [], []
    real_pins = facts.pins

    def pins(*args, **kwargs):
        asked.append(1)
        inside[0] += 1
        try:
            return real_pins(*args, **kwargs)
        finally:
            inside[0] -= 1

    def spied(module, name):
        real = getattr(module, name)

        def step(*args, **kwargs):
            if not inside[0]:
                outside.append(name)
            return real(*args, **kwargs)
        return step

    monkeypatch.setattr(facts, "pins", pins)
    for module, name in PIN_STEPS:
        monkeypatch.setattr(module, name, spied(module, name))
    quiet = ("--txn-age-warn", "none", "--txn-age-crit", "none")
    for command in (("hanging",), ("check", *quiet), ("check", "--groups", *quiet), ("lso",),
                    ("lso", "--groups", "g", "h", "late", "restore"), ("diagnose", "--group", "g", "--group", "restore")):
        asked.clear()
        cli(capsys, *command, codes=(0, 1, 2, 3))
        assert asked, f"{command}: its verdicts did not come from facts.pins"
        assert outside == [], f"{command} took {outside} outside facts.pins"
    exported = metrics(gather_snapshot(fake, max_transaction_timeout_ms=MAX, groups=True))
    assert exported["kafkatxn_lost_commit_markers"] == 1 and outside == []


# Each command's library (the modules only it uses); the fact layer is what they share.
COMMAND_LIBRARIES = {
    "lso": {"kafkatxn.lso"},
    "hanging": {"kafkatxn.hanging"},
    "diagnose": {"kafkatxn.diagnose", "kafkatxn.diagnose_rows", "kafkatxn.gaps"},
    "check": {"kafkatxn.check", "kafkatxn.monitoring_plugin"},
    "producers": {"kafkatxn.producers"},
    "transactions": {"kafkatxn.transaction_listing"},
    "remedies": {"kafkatxn.remedy.abort", "kafkatxn.remedy.fence", "kafkatxn.remedy.restore", "kafkatxn.remedy.driver",
                 "kafkatxn.remedy.decide"},
    "exporter": {"kafkatxn.exporter", "kafkatxn.exporter_metrics", "kafkatxn.exporter_http", "kafkatxn.exporter_server",
                 "kafkatxn.exposition", "kafkatxn.exposition_shared", "kafkatxn.spark_exposition"},
    "cluster": {"kafkatxn.clusterinfo"},
}
FACT_LAYER = {"kafkatxn.facts", "kafkatxn.facts_scan", "kafkatxn.facts_cluster", "kafkatxn.facts_lso", "kafkatxn.facts_history",
              "kafkatxn.gather", "kafkatxn.snapshot", "kafkatxn.group_positions"}
PACKAGE = pathlib.Path(facts.__file__).parent


def _imported(module: str) -> set[str]:
    """The kafkatxn modules ``module`` imports at run time (function-local imports too; not those
    under ``if TYPE_CHECKING:``)."""
    path = PACKAGE.parent.joinpath(*module.split(".")).with_suffix(".py")
    found: set[str] = set()

    def visit(node: ast.AST) -> None:
        if isinstance(node, ast.If) and getattr(node.test, "id", None) == "TYPE_CHECKING":
            for child in node.orelse:
                visit(child)
            return
        if isinstance(node, ast.Import):
            found.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            found.add(node.module)
            found.update(f"{node.module}.{a.name}" for a in node.names)
        for child in ast.iter_child_nodes(node):
            visit(child)

    visit(ast.parse(path.read_text(), str(path)))
    return {m for m in found if m.startswith("kafkatxn")}


def test_the_scan_and_the_lso_snapshot_hold_the_one_pins_fact(fake, monkeypatch):
    """hanging's scan and lso's snapshot keep what facts.pins returned, not copies of its parts:
    where both hold a transaction, it is the one classification."""
    add_lost_commit(fake.model)
    returned = []
    real_pins = facts.pins

    def pins(*args, **kwargs):
        returned.append(real_pins(*args, **kwargs))
        return returned[-1]

    monkeypatch.setattr(facts, "pins", pins)
    scan = facts_scan.take_scan(fake, max_transaction_timeout_ms=MAX)
    lso = facts_lso.take_snapshot(fake, scan.partitions, max_transaction_timeout_ms=MAX)
    assert isinstance(lso.pins, facts.Pins) and any(lso.pins is r for r in returned)
    assert any(scan.pins is r for r in returned)
    shared = lso.classifications.keys() & scan.pins.classifications.keys()
    assert shared, "the world has a transaction that pins an LSO"
    assert {k: lso.classifications[k].verdict for k in shared} == {k: scan.pins.classifications[k].verdict for k in shared}
    assert lso.max_transaction_timeout_ms == scan.max_transaction_timeout_ms == MAX


def test_no_command_library_gathers_through_another_commands():
    """A command's library asks the fact layer, never another command's library, and the fact layer
    asks no command's: what two commands share is a fact, gathered one way."""
    every = set().union(*COMMAND_LIBRARIES.values())
    assert all(PACKAGE.parent.joinpath(*m.split(".")).with_suffix(".py").exists() for m in every | FACT_LAYER)
    crossing = {m: sorted(_imported(m) & (every - own)) for own in COMMAND_LIBRARIES.values() for m in own}
    assert {m: found for m, found in crossing.items() if found} == {}
    from_facts = {m: sorted(_imported(m) & every) for m in FACT_LAYER}
    assert {m: found for m, found in from_facts.items() if found} == {}


def test_commands_that_share_a_question_ask_the_one_fact(capsys, fake, monkeypatch):
    """``hanging`` and ``abort --all-hanging`` take the one scan (facts_scan.take_scan); ``check``,
    its ``--groups`` and the exporter make the same scan from the producer states their offsets round
    trip brought (facts_scan.scan_of, through the one pins sequence, facts.scan), and take the group
    pass ``lso --groups`` and ``diagnose`` take (facts_lso.finish_group_snapshot)."""
    asked: list[str] = []

    def spy(module, name):
        real = getattr(module, name)

        def fact(*args, **kwargs):
            asked.append(name)
            return real(*args, **kwargs)
        monkeypatch.setattr(module, name, fact)

    spy(facts_scan, "take_scan")
    spy(facts_scan, "scan_of")
    spy(facts, "scan")
    spy(facts_lso, "finish_group_snapshot")
    quiet = ("--txn-age-warn", "none", "--txn-age-crit", "none")
    expected = {
        ("hanging",): ["take_scan", "scan_of", "scan"],
        ("abort", "--all-hanging", "--dry-run"): ["take_scan", "scan_of", "scan"],
        ("check", *quiet): ["scan_of", "scan"],
        ("check", "--groups", *quiet): ["scan_of", "scan", "finish_group_snapshot"],
        ("lso", "--groups", "g", "h"): ["finish_group_snapshot"],
        ("diagnose", "--group", "g"): ["finish_group_snapshot"],
    }
    for command, facts_asked in expected.items():
        asked.clear()
        cli(capsys, *command, codes=(0, 1, 2, 3))
        assert asked == facts_asked, command
    asked.clear()
    gather_snapshot(fake, max_transaction_timeout_ms=MAX, groups=True)
    assert asked == ["scan_of", "scan", "finish_group_snapshot"]
