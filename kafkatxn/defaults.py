"""Defaults that the library uses and the CLI shows in --help, in one light module: reading a
default must not import the exporter, the Kafka clients or tabulate at start-up."""

# check: monitoring-plugins ranges (messages; durations or seconds).
CHECK_LSO_LAG_WARN = "1000"
CHECK_LSO_LAG_CRIT = "10000"
CHECK_TXN_AGE_WARN = "5m"
CHECK_TXN_AGE_CRIT = "15m"

# exporter
EXPORTER_LISTEN = "0.0.0.0:9799"
EXPORTER_CACHE_TTL = "10s"
EXPORTER_SCRAPE_TIMEOUT = "8s"  # below Prometheus' default scrape_timeout of 10s

# lso (the library's own constants are checked equal to these: tests/unit/test_connect_ahead.py)
LSO_CRITICAL_AGE = "5m"  # kafkatxn.lso.DEFAULT_CRITICAL_AGE
PROBE_MAX_GAP = 1000  # kafkatxn.facts_lso.DEFAULT_PROBE_MAX_GAP
LAG_THRESHOLD = 1000  # kafkatxn.verdicts_groups.DEFAULT_LAG_THRESHOLD
