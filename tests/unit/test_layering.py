"""The layout CONTRIBUTING.md describes, checked: one package talks to Kafka, one module touches
kafka-python's internals, and the modules that decide do not import the facade."""

from __future__ import annotations

import ast
import json
import subprocess
import sys
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[2] / "kafkatxn"
KAFKA_CLIENTS = ("confluent_kafka", "kafka")
# Deciding modules: pure functions over gathered values.
PURE = ("kafkatxn.model", "kafkatxn.hanging", "kafkatxn.lso", "kafkatxn.check", "kafkatxn.remedy", "kafkatxn.audit.rules")


def imported_modules(path: Path) -> set[str]:
    names = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module)
    return names


def test_only_the_kafka_package_imports_a_kafka_client():
    offenders = {
        str(path.relative_to(PACKAGE.parent)): sorted(m for m in imported_modules(path) if m.split(".")[0] in KAFKA_CLIENTS)
        for path in PACKAGE.rglob("*.py")
        if "kafka" not in path.relative_to(PACKAGE).parts[:1]
    }
    assert {k: v for k, v in offenders.items() if v} == {}


def test_only_the_wire_touches_kafka_python_internals():
    users = sorted(
        str(path.relative_to(PACKAGE.parent))
        for path in PACKAGE.rglob("*.py")
        if "_manager" in path.read_text() or any(m.split(".")[0] == "kafka" for m in imported_modules(path))
    )
    assert users == ["kafkatxn/kafka/wire.py"]


def test_deciding_modules_do_not_import_the_facade_or_a_client():
    code = (
        "import sys, json\n"
        f"for m in {list(PURE)!r}: __import__(m)\n"
        "print(json.dumps(sorted(m for m in sys.modules if m.split('.')[0] in ('confluent_kafka', 'kafka') or m.startswith('kafkatxn.kafka'))))\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True)
    assert json.loads(proc.stdout) == []
