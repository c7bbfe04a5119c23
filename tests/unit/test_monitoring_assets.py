"""The example alert rules, their rule tests, the Prometheus configuration and the Grafana dashboard.

Every expression parses and names only metrics the exporter really emits (taken from a real
collect() over fake snapshots, not from a list). Prometheus' own promtool (Debian's prometheus
package, installed by scripts/test) checks the rules, runs monitoring/prometheus-alerts.test.yml,
shows those tests fail when an alert is broken, checks the example configuration, and lints the
exposition the exporter and --textfile write."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
import yaml

from kafkatxn.model import QueryReader
from kafkatxn.snapshot import ClusterSnapshot, GroupSample, HangingSample, PartitionSample, TransactionSample
from kafkatxn.exporter import SnapshotCollector, render_text, write_textfile
from kafkatxn.exporter_metrics import ExportOptions
from tests.support.prometheus import ALERTS_TEST, SCRAPE_EXAMPLE, promtool

ROOT = Path(__file__).resolve().parents[2]
ALERTS = ROOT / "monitoring" / "prometheus-alerts.yml"
DASHBOARD = ROOT / "monitoring" / "grafana-dashboard.json"

# Series Prometheus makes itself, which rules may use besides the exporter's.
PROMETHEUS_SERIES = {"up"}

# Grafana's built-in interval variables stand for durations; the others are used inside label regexes.
GRAFANA_DURATIONS = {"$__rate_interval": "5m", "$__interval": "1m", "$__range": "1h"}

KEYWORDS = {"and", "or", "unless", "by", "without", "on", "ignoring", "group_left", "group_right", "offset", "bool",
            "atan2", "inf", "nan", "Inf", "NaN", "start", "end"}
GROUPING = re.compile(r"\b(by|without|on|ignoring|group_left|group_right)\s*\(([^()]*)\)")
IDENT = re.compile(r"(?<![\w.:])([a-zA-Z_:][a-zA-Z0-9_:]*)")
DURATION = re.compile(r"^(\d+(ms|s|m|h|d|w|y))+$")


class PromQLSyntaxError(ValueError):
    pass


def metric_names(expr: str) -> set[str]:
    """Metric names a PromQL expression selects; raises :class:`PromQLSyntaxError` on what cannot parse.

    Small on purpose: strings, label matchers, ranges and grouping lists are removed; what is left
    are names, functions (followed by ``(``), keywords, numbers and operators.
    """
    text = expr
    for var, value in GRAFANA_DURATIONS.items():
        text = text.replace(var, value)
    # Strings first, so braces or quotes inside regexes do not confuse the rest.
    text = re.sub(r'"(?:[^"\\]|\\.)*"|\'(?:[^\'\\]|\\.)*\'|`[^`]*`', '""', text)
    if re.search(r"[\"'`]", text.replace('""', "")):
        raise PromQLSyntaxError(f"unterminated string in {expr!r}")
    _check_balanced(text, expr)
    for match in re.finditer(r"\{([^{}]*)\}", text):
        _check_matchers(match.group(1), expr)
    text = re.sub(r"\{[^{}]*\}", " ", text)
    for match in re.finditer(r"\[([^\[\]]*)\]", text):
        parts = match.group(1).split(":")
        if len(parts) > 2 or not all(DURATION.match(p.strip()) or p.strip() == "" and i == 1 for i, p in enumerate(parts)):
            raise PromQLSyntaxError(f"bad range [{match.group(1)}] in {expr!r}")
    text = re.sub(r"\[[^\[\]]*\]", " ", text)
    text = GROUPING.sub(" ", text)  # so `sum by (x) (…)` reads as the call `sum (…)`
    if re.search(r"\$\w", text):
        raise PromQLSyntaxError(f"unresolved variable in {expr!r}")
    leftover = re.sub(r"[\w:.\s()+\-*/%^<>=!,]", "", text)
    if leftover:
        raise PromQLSyntaxError(f"unexpected {leftover!r} in {expr!r}")
    names = set()
    for match in IDENT.finditer(text):
        word = match.group(1)
        following = text[match.end():].lstrip()
        if word in KEYWORDS or following.startswith("("):
            continue
        names.add(word)
    if not names and "vector(" not in text:
        raise PromQLSyntaxError(f"no metric selected in {expr!r}")
    return names


def _check_balanced(text: str, expr: str) -> None:
    pairs = {")": "(", "]": "[", "}": "{"}
    stack: list[str] = []
    for ch in text:
        if ch in "([{":
            stack.append(ch)
        elif ch in pairs:
            if not stack or stack.pop() != pairs[ch]:
                raise PromQLSyntaxError(f"unbalanced {ch!r} in {expr!r}")
    if stack:
        raise PromQLSyntaxError(f"unclosed {stack[-1]!r} in {expr!r}")


def _check_matchers(body: str, expr: str) -> None:
    for matcher in filter(None, (m.strip() for m in body.split(","))):
        if not re.fullmatch(r'[a-zA-Z_]\w*\s*(=~|!~|!=|=)\s*""', matcher):
            raise PromQLSyntaxError(f"bad label matcher {matcher!r} in {expr!r}")


# -- the extractor itself must be able to fail --------------------------------------------------


@pytest.mark.parametrize(
    "expr, names",
    [
        ("kafkatxn_up == 0", {"kafkatxn_up"}),
        ('sum by (topic) (rate(a_total{job="x", topic=~"o.*"}[5m])) > 1e3', {"a_total"}),
        ("a > on (instance, job) group_left (topic) b", {"a", "b"}),
        ("max_over_time(x[15m:1m]) offset 5m", {"x"}),
        ('topk(10, y{topic=~"$topic"})', {"y"}),
        ("absent(z)", {"z"}),
    ],
)
def test_extractor_finds_metric_names(expr, names):
    assert metric_names(expr) == names


@pytest.mark.parametrize(
    "expr",
    ["sum(kafkatxn_up", "kafkatxn_up{job=\"x\"", "rate(x[5 minutes])", 'x{job="a}', "x{job=a}", "x @@ y",
     "x[$unknown]", "1 + 2"],
)
def test_extractor_rejects_what_prometheus_would_not_parse(expr):
    with pytest.raises(PromQLSyntaxError):
        metric_names(expr)


# -- the assets ---------------------------------------------------------------------------------


def alert_expressions() -> list[tuple[str, str]]:
    doc = yaml.safe_load(ALERTS.read_text())
    out = []
    for group in doc["groups"]:
        for rule in group["rules"]:
            out.append((rule.get("alert") or rule.get("record"), rule["expr"]))
    return out


def dashboard_expressions() -> list[tuple[str, str]]:
    doc = json.loads(DASHBOARD.read_text())
    out = []
    for panel in doc["panels"]:
        for target in panel.get("targets", []):
            out.append((f"panel {panel['title']!r} {target['refId']}", target["expr"]))
    for var in doc.get("templating", {}).get("list", []):
        query = var.get("query")
        if isinstance(query, dict):
            query = query.get("query")
        if var.get("type") == "query" and query:
            match = re.fullmatch(r"label_values\((.+),\s*(\w+)\)", query.strip())
            assert match, f"variable {var['name']}: only label_values(selector, label) is checked: {query!r}"
            out.append((f"variable {var['name']}", match.group(1)))
    return out


ALL_OPTIONS = (ExportOptions(), ExportOptions(per_topic=True), ExportOptions(only_lagging=True), ExportOptions(per_group=True))


def busy_snapshot() -> ClusterSnapshot:
    """A snapshot with something in every family: lag, a missing partition, a hanging transaction."""
    now = 1_700_000_000_000
    return ClusterSnapshot(
        now, 0.1, cluster_id="c", brokers=(1,), replica_brokers=(1, 2),
        partitions=(PartitionSample("t", 0, 1, 10, 5), PartitionSample("t", 1, 1, 4, 4), PartitionSample("u", 0, 1, None, None)),
        transaction_states={"Ongoing": 1},
        open_transactions=(TransactionSample("a", "Ongoing", 1, 1, now - 1000, 60_000, ("orders",)),),
        active_producer_ids={1: 1},
        hanging=(HangingSample("t", 0, 1, 5, "a", "why"),),
        max_transaction_timeout_ms=900_000,
        missing=("u-0: no leader",),
        groups=(GroupSample("g", "t", 0, 0, 0, 5, True), GroupSample(QueryReader("etl", "id", "/ck"), "t", 0, 0, 0, 5, True)),
    )


def emitted_metric_names() -> set[str]:
    """What the exporter's collect() really yields, in every cardinality mode."""
    snap = busy_snapshot()
    names: set[str] = set()
    for options in ALL_OPTIONS:
        collector = SnapshotCollector(lambda: snap, options, cache_ttl_s=0)
        names |= {s.name for family in collector.collect() for s in family.samples}
    return names


def test_the_assets_have_expressions_to_check():
    assert len(alert_expressions()) >= 5
    assert len(dashboard_expressions()) >= 10


@pytest.mark.parametrize("where, expr", alert_expressions() + dashboard_expressions())
def test_every_expression_parses_and_names_only_emitted_metrics(where, expr):
    names = metric_names(expr)
    unknown = names - emitted_metric_names() - PROMETHEUS_SERIES
    assert not unknown, f"{where}: {expr!r} uses metrics the exporter does not emit: {sorted(unknown)}"


def test_the_alerts_cover_the_findings_check_treats_as_critical():
    used = set().union(*(metric_names(e) for _, e in alert_expressions()))
    assert {"kafkatxn_hanging_transactions", "kafkatxn_up", "kafkatxn_partition_lso_lag_messages", "kafkatxn_group_blocked"} <= used


def test_the_real_parser_agrees_when_installed():
    """Cross-check with promql-parser (Prometheus' grammar, in Rust) where it is installed."""
    promql_parser = pytest.importorskip("promql_parser")

    def selectors(node) -> set[str]:
        kind = type(node).__name__
        if kind == "VectorSelector":
            return {node.name} if node.name else set()
        found: set[str] = set()
        for attr in ("expr", "lhs", "rhs", "vector_selector", "param"):
            child = getattr(node, attr, None)
            if child is not None and not isinstance(child, (str, int, float)):
                found |= selectors(child)
        for child in getattr(node, "args", None) or []:
            found |= selectors(child)
        return found

    for where, expr in alert_expressions() + dashboard_expressions():
        text = expr
        for var, value in GRAFANA_DURATIONS.items():
            text = text.replace(var, value)
        tree = promql_parser.parse(text)
        assert selectors(tree) == metric_names(expr), where


# -- Prometheus' own tools -----------------------------------------------------------------------


def test_promtool_accepts_the_rules():
    result = promtool("check", "rules", str(ALERTS))
    assert result.returncode == 0, result.stdout + result.stderr
    assert f"{len(alert_expressions())} rules found" in result.stdout


def test_the_rule_tests_pass():
    result = promtool("test", "rules", ALERTS_TEST.name, cwd=ALERTS_TEST.parent)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "SUCCESS" in result.stdout


def test_the_quiet_cluster_test_names_every_alert():
    doc = yaml.safe_load(ALERTS_TEST.read_text())
    quiet = next(t for t in doc["tests"] if "quiet" in t["name"])
    checked = {case["alertname"] for case in quiet["alert_rule_test"] if case["exp_alerts"] == []}
    alerts = {name for name, _ in alert_expressions()}
    assert checked == alerts
    tested_firing = {case["alertname"] for t in doc["tests"] for case in t["alert_rule_test"] if case["exp_alerts"]}
    assert {"KafkatxnHangingTransaction", "KafkatxnExporterDown", "KafkatxnClusterUnreachable",
            "KafkatxnConsumerGroupBlocked", "KafkatxnConsumerGroupBlockedPerGroup",
            "KafkatxnConsumerGroupStuck", "KafkatxnGroupsStuck", "KafkatxnSparkQueryStuck", "KafkatxnSparkQueryStuckPerQuery"} <= tested_firing


def copy_of_the_rules(tmp_path: Path, edit) -> Path:
    """The rules and their tests in a temporary directory, the rules changed by ``edit(doc)``."""
    doc = yaml.safe_load(ALERTS.read_text())
    edit(doc)
    (tmp_path / ALERTS.name).write_text(yaml.safe_dump(doc, sort_keys=False))
    (tmp_path / ALERTS_TEST.name).write_text(ALERTS_TEST.read_text())
    return tmp_path


def rule(doc: dict, name: str) -> dict:
    return next(r for g in doc["groups"] for r in g["rules"] if r.get("alert") == name)


@pytest.mark.parametrize("alert, broken", [
    ("KafkatxnHangingTransaction", "kafkatxn_hanging_transactions > 1"),  # misses a single hanging transaction
    ("KafkatxnExporterDown", 'up{job="kafkatxn-typo"} == 0'),  # matches no job
    ("KafkatxnClusterUnreachable", "kafkatxn_up == 1"),  # fires on every healthy cluster
    ("KafkatxnConsumerGroupBlocked", "max by (instance, job, group) (kafkatxn_group_blocked) == 1"),  # loses the partition
    # Pages on a group merely waiting for a healthy open transaction: the false page this split removed.
    ("KafkatxnConsumerGroupStuck", "max by (instance, job, group, topic, partition) (kafkatxn_group_blocked) == 1"),
    ("KafkatxnGroupsStuck", "kafkatxn_groups_stuck > 0"),  # pages twice in the default mode
])
def test_the_rule_tests_fail_when_an_alert_expression_is_broken(tmp_path, alert, broken):
    directory = copy_of_the_rules(tmp_path, lambda doc: rule(doc, alert).update(expr=broken))
    assert promtool("check", "rules", ALERTS.name, cwd=directory).returncode == 0  # still valid PromQL
    result = promtool("test", "rules", ALERTS_TEST.name, cwd=directory)
    assert result.returncode != 0
    assert f"alertname: {alert}" in result.stdout + result.stderr


def test_promtool_refuses_rules_that_do_not_parse(tmp_path):
    directory = copy_of_the_rules(tmp_path, lambda doc: rule(doc, "KafkatxnHangingTransaction").update(
        expr="kafkatxn_hanging_transactions >"))
    result = promtool("check", "rules", ALERTS.name, cwd=directory)
    assert result.returncode != 0 and "parse error" in result.stdout + result.stderr


def test_the_example_prometheus_configuration_is_valid():
    result = promtool("check", "config", "--syntax-only", str(SCRAPE_EXAMPLE))
    assert result.returncode == 0, result.stdout + result.stderr
    doc = yaml.safe_load(SCRAPE_EXAMPLE.read_text())
    assert doc["rule_files"] == [ALERTS.name]
    jobs = {job["job_name"]: job for job in doc["scrape_configs"]}
    assert jobs["kafkatxn-clusters"]["metrics_path"] == "/probe"
    assert jobs["kafkatxn-tls"]["scheme"] == "https"


@pytest.mark.parametrize("options", ALL_OPTIONS, ids=["per-partition", "per-topic", "only-lagging", "per-group"])
def test_promtool_finds_no_problem_in_the_exposition(options):
    text = render_text(busy_snapshot(), options).decode()
    result = promtool("check", "metrics", stdin=text)
    assert result.returncode == 0, result.stdout + result.stderr


def test_promtool_finds_no_problem_in_the_textfile(tmp_path):
    target = tmp_path / "kafkatxn.prom"
    write_textfile(target, busy_snapshot())
    result = promtool("check", "metrics", stdin=target.read_text())
    assert result.returncode == 0, result.stdout + result.stderr
