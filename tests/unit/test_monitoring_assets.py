"""The example alert rules and Grafana dashboard: every expression parses and names only metrics the
exporter really emits (taken from a real collect() over fake snapshots, not from a list)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
import yaml

from kafkatxn.snapshot import ClusterSnapshot, GroupSample, HangingSample, PartitionSample, TransactionSample
from kafkatxn.exporter import ExportOptions, SnapshotCollector

ROOT = Path(__file__).resolve().parents[2]
ALERTS = ROOT / "monitoring" / "prometheus-alerts.yml"
DASHBOARD = ROOT / "monitoring" / "grafana-dashboard.json"

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


def emitted_metric_names() -> set[str]:
    """What the exporter's collect() really yields, in every cardinality mode."""
    now = 1_700_000_000_000
    snap = ClusterSnapshot(
        now, 0.1, cluster_id="c", brokers=(1,), replica_brokers=(1, 2),
        partitions=(PartitionSample("t", 0, 1, 10, 5),),
        transaction_states={"Ongoing": 1},
        open_transactions=(TransactionSample("a", "Ongoing", 1, 1, now - 1000, 60_000, ("orders",)),),
        active_producer_ids={1: 1},
        hanging=(HangingSample("t", 0, 1, 5, "a", "why"),),
        max_transaction_timeout_ms=900_000,
        missing=("x",),
        groups=(GroupSample("g", "t", 0, 0, 0, 5, True),),
    )
    names: set[str] = set()
    for options in (ExportOptions(), ExportOptions(per_topic=True), ExportOptions(only_lagging=True), ExportOptions(per_group=True)):
        collector = SnapshotCollector(lambda: snap, options, cache_ttl_s=0)
        names |= {s.name for family in collector.collect() for s in family.samples}
    return names


def test_the_assets_have_expressions_to_check():
    assert len(alert_expressions()) >= 5
    assert len(dashboard_expressions()) >= 10


@pytest.mark.parametrize("where, expr", alert_expressions() + dashboard_expressions())
def test_every_expression_parses_and_names_only_emitted_metrics(where, expr):
    names = metric_names(expr)
    unknown = names - emitted_metric_names()
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
