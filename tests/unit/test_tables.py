"""Tables fit a terminal: the columns to act on within 120 characters, --wide for the rest, human
ages and local times in tables only; structured formats keep every key and raw milliseconds."""

from __future__ import annotations

import json
import time
from dataclasses import dataclass

from kafkatxn import cells, output
from kafkatxn.output import render_to_string


@dataclass(frozen=True)
class Row:
    topic: str
    partition: int
    producer_id: int
    producer_epoch: int
    last_sequence: int
    coordinator_epoch: int
    last_timestamp_ms: int
    txn_age_ms: int | None
    transaction_timeout_ms: int
    transactional_id: str
    reason: str


NOW = int(time.time() * 1000)


def rows(n=3, name_length=20):
    return [
        Row("orders-" + "x" * name_length, i, 1000 + i, 0, 41, 7, NOW - 5_000, 192_000 + i, 60_000,
            f"payments-writer-{i:04d}-" + "y" * name_length, "coordinator does not track this partition")
        for i in range(n)
    ]


def widths(text: str) -> int:
    return max(len(line) for line in text.splitlines())


def test_narrow_table_fits_120_columns_and_keeps_what_to_act_on():
    text = render_to_string(rows(), "table")
    assert widths(text) <= 120
    header = text.splitlines()[0].split()
    assert {"topic", "partition", "producer_id", "transactional_id", "reason"} <= set(header)
    assert "last_sequence" not in header and "coordinator_epoch" not in header  # secondary columns go first


def test_long_names_keep_the_reason_wrapped_rather_than_dropped():
    text = render_to_string(rows(1, name_length=30), "table").split("\n\n")[0]  # the table, not the note under it
    assert "reason" in text.splitlines()[0].split()
    assert " ".join(line.split("  ")[-1].strip() for line in text.splitlines()[2:]).endswith("coordinator does not track this partition")
    lines = text.splitlines()
    assert len(lines) > 3  # header, rule, and the row's reason on more than one line
    assert widths(text) < len(render_to_string(rows(1, name_length=30), "table", wide=True).splitlines()[0])


def test_wide_table_shows_every_column():
    header = render_to_string(rows(), "table", wide=True).splitlines()[0].split()
    assert header == ["topic", "partition", "producer_id", "producer_epoch", "last_sequence", "coordinator_epoch",
                      "last_timestamp", "txn_age", "txn_timeout", "transactional_id", "reason"]


def test_ages_and_timestamps_are_human_in_tables_only():
    wide = render_to_string(rows(1), "table", wide=True)
    assert "3m12s" in wide and "1m00s" in wide
    assert time.strftime("%H:%M:", time.localtime((NOW - 5_000) / 1000)) in wide
    assert str(NOW - 5_000) not in wide
    doc = json.loads(render_to_string(rows(1), "json"))
    assert doc[0]["txn_age_ms"] == 192_000 and doc[0]["last_timestamp_ms"] == NOW - 5_000
    csv = render_to_string(rows(1), "csv").splitlines()
    assert csv[0].split(",")[6:9] == ["last_timestamp_ms", "txn_age_ms", "transaction_timeout_ms"]
    assert "192000" in csv[1]


def test_local_time_shows_the_date_on_another_day():
    assert len(cells.format_local_time(NOW - 3 * 86_400_000, NOW)) == len("2026-01-01 00:00:00")
    assert len(cells.format_local_time(NOW, NOW)) == len("00:00:00")


def test_raw_twin_of_a_human_column_is_left_out_of_narrow_tables():
    @dataclass(frozen=True)
    class WithTwin:
        transactional_id: str
        age_ms: int
        age: str

    header = render_to_string([WithTwin("a", 1000, "1s")], "table").splitlines()[0].split()
    assert header == ["transactional_id", "age"]


def test_headers_are_short_in_tables_and_keys_unchanged_elsewhere():
    @dataclass(frozen=True)
    class Lag:
        topic: str
        high_watermark: int
        last_stable_offset: int
        lag_to_hw_messages: int

    assert render_to_string([Lag("t", 9, 7, 2)], "table").splitlines()[0].split() == ["topic", "hw", "lso", "lag_to_hw"]
    assert list(json.loads(render_to_string([Lag("t", 9, 7, 2)], "json"))[0]) == ["topic", "high_watermark", "last_stable_offset", "lag_to_hw_messages"]


def test_missing_values_and_negative_durations_stay_readable():
    @dataclass(frozen=True)
    class Sparse:
        topic: str
        age_ms: int | None
        start_time_ms: int

    text = render_to_string([Sparse("t", None, -1)], "table", wide=True)
    assert text.splitlines()[2].split() == ["t"]
