"""No dead code in kafkatxn/: vulture finds no unused function, class, method, property, import or
module constant there but the ones listed here, each with why it stays.

Fields and enum members are left out of the check (row dataclasses' fields are output keys, read by
name); a name used only by a test counts as unused, so a test-only helper is listed, not hidden.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

# (module, name): why it stays though nothing in kafkatxn/ calls it.
USED_FROM_OUTSIDE = {
    ("kafkatxn/audit/rules.py", "comparable"): "the audit tests compare the local and Spark results with it",
    ("kafkatxn/audit/rules.py", "audit_local"): "the audit in one process, the reference the Spark job is tested against",
    ("kafkatxn/audit/source.py", "initialOffset"): "PySpark's DataSourceStreamReader calls it",
    ("kafkatxn/audit/source.py", "latestOffset"): "PySpark's DataSourceStreamReader calls it",
    ("kafkatxn/audit/source.py", "streamReader"): "PySpark's DataSource calls it",
    ("kafkatxn/cli/app.py", "resolve_command"): "click calls it (TyperGroup override)",
    ("kafkatxn/cli/app.py", "format_commands"): "click calls it (TyperGroup override)",
    ("kafkatxn/cli/helptext.py", "format_options"): "click calls it (command override)",
    ("kafkatxn/cli/reference.py", "cli_reference"): "scripts/gen-cli-reference and test_cli_reference call it",
    ("kafkatxn/config/kerberos.py", "LIBRDKAFKA_HAS_NO_GSSAPI"): "the GSSAPI tests expect this refusal",
    ("kafkatxn/exporter.py", "render_text"): "a snapshot's whole body for the tests and bench_groups' profile (the textfile "
                                              "is written from render_parts, a part at a time)",
    ("kafkatxn/exporter_server.py", "log_message"): "http.server calls it (override: the access log at debug level)",
    ("kafkatxn/exporter_server.py", "readinto"): "io.BufferedReader calls it (a RawIOBase)",
    ("kafkatxn/exporter_server.py", "get_app"): "wsgiref's handler calls it",
    ("kafkatxn/kafka/wire/describe_codec.py", "expect_response"): "kafka-python's connection and parser call it "
                                                                         "(its request interface: ConsumerGroupDescribeRequest)",
    ("kafkatxn/kafka/wire/describe_codec.py", "with_header"): "kafka-python's parser calls it (its request interface)",
    ("kafkatxn/kafka/wire/receiving.py", "_sock_recv"): "kafka-python's transport calls it (override: reads in bulk)",
    ("kafkatxn/kafka/wire/receiving.py", "get_key"): "kafka-python's selector calls it (override: no socket repr)",
    ("kafkatxn/kafka/groups.py", "list_groups"): "no caller: kafka/groups.py is rewritten by the retry consolidation, which removes it",
    ("kafkatxn/lso.py", "DEFAULT_CRITICAL_AGE"): "lso's own default; the CLI shows kafkatxn.defaults.LSO_CRITICAL_AGE, checked "
                                                  "equal to it (test_connect_ahead), not to import lso before its offsets are sent",
    ("kafkatxn/model.py", "complete"): "Partial's API, read by the integration tests",
    ("kafkatxn/plain.py", "json_text"): "write_json's text as one string, what test_output compares with json.dumps",
    ("kafkatxn/spark.py", "foreach_batch_writer"): "API for Spark jobs (the README's exactly-once writer)",
    ("kafkatxn/spark_eos.py", "ExactlyOnceWriter"): "API for Spark jobs (the exactly-once foreachBatch writer)",
}

KINDS = re.compile(r"^(?P<path>[^:]+):\d+: unused (?P<kind>function|class|method|property|import|variable) '(?P<name>[^']+)'")


def test_kafkatxn_has_no_dead_code():
    proc = subprocess.run(
        [sys.executable, "-m", "vulture", "kafkatxn", "--min-confidence", "60", "--ignore-decorators", "@*command*"],
        cwd=ROOT, capture_output=True, text=True, timeout=120,
    )
    assert proc.returncode in (0, 3), proc.stderr  # 3: vulture found something
    found = set()
    for line in proc.stdout.splitlines():
        m = KINDS.match(line)
        # A variable counts when it is a module constant (UPPER_CASE); fields and enum members do not.
        if m and (m["kind"] != "variable" or re.fullmatch(r"[A-Z][A-Z0-9_]*", m["name"])):
            found.add((m["path"], m["name"]))
    assert sorted(found - set(USED_FROM_OUTSIDE)) == [], "dead code: remove it, or list it here with why it stays"
    assert sorted(set(USED_FROM_OUTSIDE) - found) == [], "now used in kafkatxn/ (or gone): drop it from the list"
