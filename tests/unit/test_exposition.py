"""kafkatxn.exposition writes what prometheus_client writes, byte for byte, in every format it negotiates.

The exporter's /metrics at 30,000 partitions is encoded by kafkatxn.exposition instead of
prometheus_client (5x faster, bench/bench_scale.py); these tests compare both over the families
the exporter makes and over ones the fast path does not cover (counters, units, timestamps, odd
label values), which must come out as prometheus_client writes them.
"""

from __future__ import annotations

import gc
import gzip
import io

import pytest
from prometheus_client import CollectorRegistry, generate_latest, make_wsgi_app as library_app
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, InfoMetricFamily
from prometheus_client.openmetrics.exposition import generate_latest as openmetrics_latest

from kafkatxn import exposition, exposition_tables
from kafkatxn.exporter import _StaticCollector
from kafkatxn.exporter_metrics import ExportOptions, metric_families
from kafkatxn.snapshot import ClusterSnapshot, GroupSample, PartitionSample, UndeterminedSample

ODD_VALUES = ['plain', 'quo"te', 'back\\slash', 'new\nline', 'ünïcödé', '', 'a,b=c}{']
NUMBERS = [0, 1, -1, 999_999, 1_000_000, 1_234_567, 2**53 - 1, 2**53, 2**62, -(2**53), -(2**60), 0.5, -0.25, 1e-9,
           123456.789, 1e21, float("inf"), float("-inf"), float("nan"), True, False]


def odd_registry() -> CollectorRegistry:
    families = []
    g = GaugeMetricFamily("kafkatxn_test_gauge", 'help with \\ and\nnewline and "quotes"', labels=["topic", "partition"])
    for i, v in enumerate(ODD_VALUES):
        g.add_metric([v, str(i)], NUMBERS[i])
    families.append(g)
    plain = GaugeMetricFamily("kafkatxn_test_numbers", "numbers", labels=["n"])
    for i, n in enumerate(NUMBERS):
        plain.add_metric([str(i)], n)
    families.append(plain)
    families.append(GaugeMetricFamily("kafkatxn_test_scalar", "no labels", value=3))
    unlabelled = GaugeMetricFamily("kafkatxn_test_empty", "no samples at all", labels=["x"])
    families.append(unlabelled)
    # Labels given in another order than sorted, and label sets that differ between samples.
    mixed = GaugeMetricFamily("kafkatxn_test_order", "label order", labels=["zeta", "alpha"])
    mixed.add_metric(["z", "a"], 1)
    mixed.samples.append(mixed.samples[0]._replace(labels={"beta": "b"}, value=2))
    families.append(mixed)
    # Not covered by the fast path: prometheus_client writes them.
    c = CounterMetricFamily("kafkatxn_test_events", "a counter", labels=["kind"])
    c.add_metric(["x"], 5, timestamp=1_700_000_000.5)
    c.add_metric(["y"], 6, created=1_600_000_000)
    families.append(c)
    families.append(GaugeMetricFamily("kafkatxn_test_bytes", "with a unit", value=2, unit="bytes"))
    stamped = GaugeMetricFamily("kafkatxn_test_stamped", "a timestamped sample", labels=["k"])
    stamped.add_metric(["v"], 1, timestamp=1_700_000_000)
    families.append(stamped)
    info = InfoMetricFamily("kafkatxn_test_build", "info", value={"version": "1.0"})
    families.append(info)
    # Table families (kafkatxn.exposition.TableGauge): every kind of number, rows without a series,
    # and an all-int family whose values repeat (the texts made once per distinct value); -0.0 beside 0.
    rows = exposition.LabelRows(["topic", "partition"])
    rows.extend((v, str(i)) for i, v in enumerate(ODD_VALUES * 3))
    numbers = exposition.TableGauge("kafkatxn_test_table_numbers", "every number", rows)
    numbers.values = [(NUMBERS + [-0.0, None])[i % (len(NUMBERS) + 2)] for i in range(len(rows.values))]
    ints = exposition.TableGauge("kafkatxn_test_table_ints", "repeating ints", rows)
    ints.values = [[0, 1, 3, None, 2**53, 1_000_000, -7][i % 7] for i in range(len(rows.values))]
    equal = exposition.TableGauge("kafkatxn_test_table_equal", "values equal as keys, written apart", rows)
    equal.values = [[0, -0.0, 1, 1.0, True, 2.5][i % 6] for i in range(len(rows.values))]
    # Every row a series, every value an int: sized from the bytes its rows' label pieces hold (LabelRows.piece_bytes).
    every = exposition.TableGauge("kafkatxn_test_table_every_row", "an int on every row", rows)
    every.values = [i % 3 for i in range(len(rows.values))]
    families += [numbers, ints, equal, every]
    registry = CollectorRegistry(auto_describe=False)
    registry.register(_StaticCollector(families))
    return registry


def exporter_registry() -> CollectorRegistry:
    partitions = tuple(
        PartitionSample(f"topic-{t}", p, 1 + p % 3, 10 * p + 5, 10 * p + (0 if p % 4 else 5)) for t in range(3) for p in range(40)
    ) + (PartitionSample("gone", 0, 2, None, None),)
    snap = ClusterSnapshot(
        1_700_000_000_000, duration_s=0.5, cluster_id="c", brokers=(1, 2), replica_brokers=(1, 2, 3), partitions=partitions,
        transaction_states={"Ongoing": 1}, active_producer_ids={1: 3}, max_transaction_timeout_ms=900_000,
        # Escaped label values, and a blocked group whose stuck series is left out (its verdict is undetermined).
        groups=(GroupSample('gr"oup', "topic-0", 1, 5, 3, 7, True), GroupSample("back\\slash\nline", "topic-0", 2, 0, 0, 4, False),
                GroupSample("unsure", "topic-1", 0, 1, 1, 1, True)),
        undetermined=(UndeterminedSample("topic-1", 0, 9, 0, None, "coordinator did not answer"),), missing=(),
    )
    registry = CollectorRegistry(auto_describe=False)
    registry.register(_StaticCollector(metric_families(snap, ExportOptions())))
    return registry


@pytest.mark.parametrize("make", [odd_registry, exporter_registry], ids=["odd", "exporter"])
def test_text_and_openmetrics_are_prometheus_clients_byte_for_byte(make):
    registry = make()
    if make is exporter_registry:  # the group series take the table path (kafkatxn.exposition.TableGauge)
        tables = {m.name for m in registry.collect() if isinstance(m, exposition.TableGauge)}
        assert {"kafkatxn_group_stuck", "kafkatxn_group_summed_lag_messages", "kafkatxn_partition_lso_lag_messages",
                "kafkatxn_group_waiting_partitions"} <= tables
        assert len(tables) == 13 and b'kafkatxn_group_stuck{group="unsure"' not in exposition.encode(registry)
    assert exposition.encode(registry) == generate_latest(registry)
    assert exposition.encode(registry, openmetrics=True) == openmetrics_latest(registry)
    for escaping in ("allow-utf-8", "dots", "values"):
        assert exposition.encode(registry, escaping=escaping) == generate_latest(registry, escaping=escaping)
        assert exposition.encode(registry, openmetrics=True, escaping=escaping) == openmetrics_latest(registry, escaping=escaping)


def call(app, accept=None, encoding=None, query="", method="GET"):
    environ = {"REQUEST_METHOD": method, "PATH_INFO": "/metrics", "QUERY_STRING": query, "wsgi.input": io.BytesIO()}
    if accept is not None:
        environ["HTTP_ACCEPT"] = accept
    if encoding is not None:
        environ["HTTP_ACCEPT_ENCODING"] = encoding
    seen = {}

    def start_response(status, headers):
        seen["status"], seen["headers"] = status, dict(headers)

    result = app(environ, start_response)
    body = b"".join(result)
    if hasattr(result, "close"):
        result.close()  # as a WSGI server does once the body is written
    # A WSGI server sets Content-Length for a body of one part; ours, in parts, sets it itself.
    length = seen["headers"].pop("Content-Length", None)
    assert length is None or int(length) == len(body)
    if seen["headers"].get("Content-Encoding") == "gzip":
        body = gzip.decompress(body)
    return seen["status"], seen["headers"], body


ACCEPTS = [
    None,
    "text/plain;version=0.0.4",
    "text/plain;version=1.0.0;escaping=allow-utf-8",
    "application/openmetrics-text;version=1.0.0;q=0.5,application/openmetrics-text;version=0.0.1;q=0.4,text/plain;version=0.0.4;q=0.3",
    "application/openmetrics-text;version=1.0.0;escaping=allow-utf-8",
    "application/openmetrics-text",
    "application/openmetrics-text;version=1.0.0;escaping=dots",
]


@pytest.mark.parametrize("accept", ACCEPTS)
@pytest.mark.parametrize("encoding", [None, "gzip"])
def test_the_wsgi_app_negotiates_as_prometheus_client_does(accept, encoding):
    registry = odd_registry()
    ours, theirs = exposition.make_wsgi_app(registry), library_app(registry)
    assert call(ours, accept, encoding) == call(theirs, accept, encoding)


@pytest.mark.parametrize("encoding", [None, "gzip"])
def test_a_body_of_many_series_is_sent_in_parts_with_its_length(encoding):
    """A family of many series is a part of its own (not joined again into one body): the app names
    the length, which a WSGI server sets only for a body of one part."""
    rows = exposition.LabelRows(["group", "topic", "partition"])
    rows.extend((f"group-{i % 500}", "orders", str(i)) for i in range(20_000))
    family = exposition.TableGauge("kafkatxn_test_lag", "Lag.", rows)
    family.values = list(range(20_000))
    registry = CollectorRegistry(auto_describe=False)
    registry.register(exposition._One(family))
    environ = {"REQUEST_METHOD": "GET", "PATH_INFO": "/metrics", "QUERY_STRING": "", "wsgi.input": io.BytesIO()}
    if encoding:
        environ["HTTP_ACCEPT_ENCODING"] = encoding
    seen = {}
    result = exposition.make_wsgi_app(registry)(environ, lambda status, headers: seen.update(headers))
    parts = list(result)
    result.close()
    body = b"".join(parts)
    assert len(parts) > 1 and int(seen["Content-Length"]) == len(body)
    assert (gzip.decompress(body) if encoding else body) == generate_latest(registry)


def test_gzip_is_the_fastest_level():
    registry = odd_registry()
    environ = {"REQUEST_METHOD": "GET", "PATH_INFO": "/metrics", "QUERY_STRING": "", "wsgi.input": io.BytesIO(),
               "HTTP_ACCEPT_ENCODING": "gzip"}
    result = exposition.make_wsgi_app(registry)(environ, lambda status, headers: None)
    body = b"".join(result)
    result.close()
    # gzip's header byte 8 (XFL): 4 when the compressor used its fastest algorithm (level 1), 0 for 2-8
    assert body[:2] == b"\x1f\x8b" and body[8] == 4


@pytest.mark.parametrize("query", ["name[]=kafkatxn_test_scalar", "name[]=kafkatxn_test_numbers&name[]=kafkatxn_test_events"])
def test_name_filters_and_methods_are_prometheus_clients(query):
    registry = odd_registry()
    ours, theirs = exposition.make_wsgi_app(registry), library_app(registry)
    assert call(ours, query=query) == call(theirs, query=query)
    for method in ("OPTIONS", "POST"):
        assert call(ours, method=method) == call(theirs, method=method)


def test_collection_waits_while_a_scrape_runs_and_a_full_collection_follows_each_body(monkeypatch):
    collected = []
    monkeypatch.setattr(exposition.gc, "collect", lambda *a: collected.append(a) or 0)
    seen = []

    class Probe(CollectorRegistry):
        def collect(self):
            seen.append(gc.isenabled())
            return iter(())

    app = exposition.make_wsgi_app(Probe(auto_describe=False))
    environ = {"REQUEST_METHOD": "GET", "PATH_INFO": "/metrics", "QUERY_STRING": "", "wsgi.input": io.BytesIO()}
    first = app(environ, lambda status, headers: None)
    second = app(environ, lambda status, headers: None)  # overlapping scrapes
    assert seen == [False, False] and not gc.isenabled()
    first.close()
    # Still paused for the other scrape, but its garbage is collected now: scrapes that keep
    # overlapping must not keep cyclic garbage forever.
    assert not gc.isenabled() and len(collected) == 1
    second.close()
    second.close()  # closing twice ends one pause only
    assert gc.isenabled() and len(collected) == 2


def test_a_scrape_that_fails_does_not_leave_collection_off():
    class Broken(CollectorRegistry):
        def collect(self):
            raise RuntimeError("gather failed")

    app = exposition.make_wsgi_app(Broken(auto_describe=False))
    environ = {"REQUEST_METHOD": "GET", "PATH_INFO": "/metrics", "QUERY_STRING": "", "wsgi.input": io.BytesIO()}
    with pytest.raises(RuntimeError):
        app(environ, lambda status, headers: None)
    assert gc.isenabled()


def test_a_table_family_is_written_a_slice_of_rows_at_a_time(monkeypatch):
    """No text of a whole table family is made (50 MB a family at 20,000 groups x 20): its lines come
    _CHUNK_ROWS rows at a time, and the body is prometheus_client's all the same."""
    monkeypatch.setattr(exposition_tables, "_CHUNK_ROWS", 2)
    registry = odd_registry()
    assert exposition.encode(registry) == generate_latest(registry)
    assert exposition.encode(registry, openmetrics=True) == openmetrics_latest(registry)
    rows = exposition.LabelRows(["group", "partition"], [["a", "b", "c"], ["0", "1", "2"]])
    for values in ([1, 2, 3], [1.5, 2, 3]):  # ints, and a family written line by line
        family = exposition.TableGauge("kafkatxn_test_lag", "Lag.", rows)
        family.values = values
        pieces = list(exposition._fast_lines(family, False))
        assert len(pieces) == 3  # its head, then two slices of rows
        assert "".join(pieces).encode() == generate_latest(_StaticCollector([family]))


def test_label_rows_are_columns():
    """A column per label name, not a tuple per row (400,000 tuples held for nothing at 20,000
    groups); a row's tuple is made only when asked for."""
    rows = exposition.LabelRows(["topic", "partition"], [["a", 'q"uote'], ["0", "1"]])
    assert len(rows) == 2 and rows.values == [("a", "0"), ('q"uote', "1")]
    assert rows.text() == ['{partition="0",topic="a"}', '{partition="1",topic="q\\"uote"}']
    rows.append(("b", "2"))
    assert rows.text()[-1] == '{partition="2",topic="b"}'
    with pytest.raises(ValueError):
        exposition.LabelRows(["topic", "partition"], [["a"], ["0", "1"]])


@pytest.mark.parametrize("openmetrics", [False, True])
def test_a_body_written_as_it_is_made_is_as_long_as_it_said(openmetrics):
    """sized_parts counts a body's bytes before writing it (its Content-Length): escaped and UTF-8
    label values, rows without a series, floats beside ints; the body is encode's."""
    registry = odd_registry()
    parts, length = exposition.sized_parts(list(registry.collect()), openmetrics)
    body = b"".join(parts)
    assert len(body) == length
    assert body == exposition.encode(registry, openmetrics=openmetrics)


def test_label_texts_are_held_in_pieces_shared_by_their_rows():
    """At 20,000 groups x 20 partitions a whole label text per row (400,000) was held through the
    exposition: each distinct value of a label makes its piece once (a group, a partition number, a topic)."""
    groups = [f"group-{g}" for g in range(50) for _ in range(20)]
    topics = [f"topic-{g % 7}" for g in range(50) for _ in range(20)]
    partitions = [str(p) for _ in range(50) for p in range(20)]
    rows = exposition.LabelRows(["group", "topic", "partition"], [groups, topics, partitions])
    by_group, by_partition, by_topic = rows.pieces()  # a piece per label, names sorted
    assert len({id(p) for p in by_group}) == 50 and len({id(p) for p in by_partition}) == 20 and len({id(p) for p in by_topic}) == 7
    assert rows.text()[21] == '{group="group-1",partition="1",topic="topic-1"}' == by_group[21] + by_partition[21] + by_topic[21]


def test_label_pieces_are_made_once_per_value_whatever_the_values_hold():
    """LabelRows.pieces makes a piece on its value's first row from a template: a % in a label's name or
    value is text, a value that must be escaped is, and rows repeating a value share its piece."""
    rows = exposition.LabelRows(["b%d", "a%s", "c"], [["1", "2", "1"], ["x", 'y%s"', "x"], ["q\n", "w", "q\n"]])
    assert rows.text() == ['{a%s="x",b%d="1",c="q\\n"}', '{a%s="y%s\\"",b%d="2",c="w"}', '{a%s="x",b%d="1",c="q\\n"}']
    assert all(column[0] is column[2] for column in rows.pieces())
    one = exposition.LabelRows(["p%"], [["x%s", "y", "x%s"]])
    assert one.text() == ['{p%="x%s"}', '{p%="y"}', '{p%="x%s"}']


@pytest.mark.parametrize("values", [
    [0, 1, None, 0, 0, 1],  # flags: few distinct values, each counted
    [0, 0, 0, 0],  # one value
    [None, None],  # no series at all
    [i * 7919 % 5003 - 40 for i in range(3000)] + [None, 2**53, 2**53 + 1, -(2**53) - 3, 999_999, 1_000_000, 10**20],  # many: looked up
    [3, None, 1_000_000, -1, 2**60],  # few, of every text form
])
def test_an_int_tables_size_is_that_of_its_lines_however_its_values_are_counted(values):
    """_table_size sizes an int family from each distinct value's text: counted per value where there are
    few (exposition_tables._COUNTED), looked up per row otherwise; either way the bytes its lines are,
    rows without a series left out."""
    rows = exposition.LabelRows(["group", "partition"], [[f"g{i % 13}" for i in range(len(values))], [str(i % 5) for i in range(len(values))]])
    family = exposition.TableGauge("kafkatxn_test_sized", "sized", rows)
    family.values = values
    parts, length = exposition.sized_parts([family])
    body = b"".join(parts)
    assert len(body) == length and body == generate_latest(_registry_of([family]))


def _registry_of(families: list) -> CollectorRegistry:
    registry = CollectorRegistry(auto_describe=False)
    registry.register(_StaticCollector(families))
    return registry


def test_utf8_length_of_label_pieces_is_that_of_each_encoded():
    """exposition_tables._utf8_len (LabelRows.piece_bytes): the UTF-8 bytes of texts, ASCII or not."""
    from kafkatxn.exposition_tables import _utf8_len

    for texts in ([], [""], ["abc", "d"], ["é", "a", "中文", "\U0001F600", 'q"uote'], ["x"] * 1000 + ["ü"]):
        assert _utf8_len(texts) == sum(len(t.encode("utf-8")) for t in texts)
