"""The layout CONTRIBUTING.md describes, checked: one package talks to Kafka, one module touches
kafka-python's internals, and the modules that decide do not import the facade."""

from __future__ import annotations

import ast
import json
import re
import subprocess
import sys
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[2] / "kafkatxn"
KAFKA_CLIENTS = ("confluent_kafka", "kafka")
# Where each question has its one answer: only the model, each other and the standard library below them.
VERDICT_MODULES = ("kafkatxn.verdicts", "kafkatxn.verdicts_age", "kafkatxn.verdicts_groups")
# Deciding modules: pure functions over gathered values.
PURE = (
    "kafkatxn.model", *VERDICT_MODULES, "kafkatxn.hanging", "kafkatxn.lso", "kafkatxn.check", "kafkatxn.remedy",
    # the auditor's rules (families, the per-id state machine, findings, inventory, the result) and its decoder
    "kafkatxn.audit.rules", "kafkatxn.audit.history", "kafkatxn.audit.findings", "kafkatxn.audit.inventory",
    "kafkatxn.audit.families", "kafkatxn.txnlog_records",  # the log decoder is kafkatxn.kafka.txnlog, beside the wire
    "kafkatxn.timeline",  # the events of transactions history
    "kafkatxn.lost_commit",  # how the log says a transaction ended (a lost COMMIT marker)
    "kafkatxn.spark_checkpoint", "kafkatxn.spark_readers",  # a Spark query's checkpoint (pyarrow only for remote paths)
)


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


# confluent-kafka's admin calls whose librdkafka response handler kills the process: a group
# coordinator that moved answers NOT_COORDINATOR, and rd_kafka_handle_OffsetFetch queries the
# coordinator through a consumer-group handle an admin client does not have (a NULL dereference in
# rd_kafka_cgrp_op, librdkafka #5040, open; seen in librdkafka 2.16.0 by bench/soak_exporter.py
# against the exporter that used it, during a broker restart). Committed offsets go through the wire.
LIBRDKAFKA_CALLS_THAT_CRASH = ("list_consumer_group_offsets", "alter_consumer_group_offsets")


def test_no_module_asks_librdkafka_for_committed_offsets():
    used = [f"{path.relative_to(PACKAGE.parent)}: {call}" for path in PACKAGE.rglob("*.py")
            for call in LIBRDKAFKA_CALLS_THAT_CRASH if re.search(rf"\.{call}\(", path.read_text())]
    assert not used, used


def test_only_the_wire_touches_kafka_python_internals():
    # kafka-python is imported only inside the wire package (one module per API family builds and
    # reads its protocol objects); its connection manager and IO loop (kafka.net) and its admin
    # client only by the wire's client, whose private names test_wire_contract.py lists and scans.
    users = sorted(
        str(path.relative_to(PACKAGE.parent))
        for path in PACKAGE.rglob("*.py")
        if any(m.split(".")[0] == "kafka" for m in imported_modules(path))
    )
    assert users and all(u.startswith("kafkatxn/kafka/wire/") for u in users), users
    internals = sorted(
        str(path.relative_to(PACKAGE.parent))
        for path in PACKAGE.rglob("*.py")
        if any(m.startswith(("kafka.net", "kafka.admin", "kafka.cluster", "kafka.future")) for m in imported_modules(path))
    )
    # receiving.py: the client's connection manager and selector, reading with fewer system calls
    assert internals == ["kafkatxn/kafka/wire/client.py", "kafkatxn/kafka/wire/receiving.py"]


def test_deciding_modules_do_not_import_the_facade_or_a_client():
    code = (
        "import sys, json\n"
        f"for m in {list(PURE)!r}: __import__(m)\n"
        "print(json.dumps(sorted(m for m in sys.modules if m.split('.')[0] in ('confluent_kafka', 'kafka') or m.startswith('kafkatxn.kafka') or m.split('.')[0] in ('pyspark', 'pyarrow'))))\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True)
    assert json.loads(proc.stdout) == []


# -- issue 22: the rooms ---------------------------------------------------------------------------


def _module_name(path: Path) -> str:
    rel = path.relative_to(PACKAGE.parent).with_suffix("")
    parts = rel.parts[:-1] if rel.name == "__init__" else rel.parts
    return ".".join(parts)


def _imports_with_relative(path: Path) -> set[str]:
    """Absolute names of every module ``path`` imports, relative imports resolved."""
    package = _module_name(path).split(".")
    if path.name != "__init__.py":
        package = package[:-1]
    names = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = package[: len(package) - node.level + 1] if node.level else []
            module = ".".join([*base, *(node.module.split(".") if node.module else [])])
            names.add(module)
            names.update(f"{module}.{alias.name}" for alias in node.names)
    return names


def test_verdict_modules_import_only_the_model_and_the_standard_library():
    for name in VERDICT_MODULES:
        path = PACKAGE.parent / (name.replace(".", "/") + ".py")
        ours = {m for m in _imports_with_relative(path) if m.split(".")[0] == "kafkatxn"}
        others = {m for m in ours if not m.startswith("kafkatxn.model")
                  and not any(m == v or m.startswith(v + ".") for v in VERDICT_MODULES)}
        assert others == set(), name
        foreign = {m.split(".")[0] for m in imported_modules(path)} - set(sys.stdlib_module_names) - {"kafkatxn", "__future__"}
        assert foreign == set(), name


def test_only_the_cli_imports_the_cli():
    offenders = {
        _module_name(path): sorted(m for m in _imports_with_relative(path) if m == "kafkatxn.cli" or m.startswith("kafkatxn.cli."))
        for path in PACKAGE.rglob("*.py")
        if path.relative_to(PACKAGE).parts[0] not in ("cli", "__main__.py")
    }
    assert {k: v for k, v in offenders.items() if v} == {}


# What the live exporter may use of the auditor's package: the id families and its churn metric over them.
EXPORTER_AUDIT = ("kafkatxn.audit.churn", "kafkatxn.audit.families")


def test_the_exporter_imports_only_families_of_the_auditor():
    """exporter.py imports churn.py, churn.py imports families.py; nothing else of kafkatxn.audit (statically,
    lazy imports inside functions included)."""
    allowed = {"kafkatxn.exporter": {"kafkatxn.audit", *EXPORTER_AUDIT}, "kafkatxn.audit.churn": {"kafkatxn.audit", EXPORTER_AUDIT[1]}}
    for name, ok in allowed.items():
        path = PACKAGE.parent / (name.replace(".", "/") + ".py")
        audit = {m for m in _imports_with_relative(path) if m == "kafkatxn.audit" or m.startswith("kafkatxn.audit.")}
        # ``from kafkatxn.audit.churn import IdChurn`` also names kafkatxn.audit.churn.IdChurn: keep modules only.
        audit = {m for m in audit if m.count(".") <= 2}
        assert audit - ok == set(), name


def test_the_exporter_does_not_load_the_auditors_rules_or_spark():
    """A scrape needs id families for its churn metric, not the auditor (nor PySpark)."""
    code = (
        "import sys, json\n"
        "import kafkatxn.exporter, kafkatxn.exporter_http\n"
        f"print(json.dumps(sorted(m for m in sys.modules if (m.startswith('kafkatxn.audit.') and m not in {EXPORTER_AUDIT!r}) "
        "or m.split('.')[0] in ('pyspark', 'pyarrow'))))\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True)
    assert json.loads(proc.stdout) == []


def test_the_config_modules_form_no_cycle_and_properties_is_at_the_bottom():
    """kafkatxn.config's modules import each other one way only (the package re-exports them, so
    ``__init__`` is left out): a cycle among them fails here, naming the modules on it."""
    package = PACKAGE / "config"
    modules = {_module_name(path): path for path in package.glob("*.py") if path.name != "__init__.py"}
    assert "kafkatxn.config.properties" in modules and len(modules) > 3
    graph = {
        name: {m for m in modules if m != name and (m in imports or any(i.startswith(m + ".") for i in imports))}
        for name, imports in ((name, _imports_with_relative(path)) for name, path in modules.items())
    }
    assert graph["kafkatxn.config.properties"] == set(), "properties.py imports another config module"
    assert all("kafkatxn.config" not in _imports_with_relative(path) for path in modules.values()), "a module imports the package"
    done: set[str] = set()

    def visit(name: str, path: tuple[str, ...]) -> None:
        assert name not in path, f"import cycle: {' -> '.join(path[path.index(name):] + (name,))}"
        if name in done:
            return
        for imported in sorted(graph[name]):
            visit(imported, path + (name,))
        done.add(name)

    for name in sorted(graph):
        visit(name, ())


# -- issue 22, Deliver 7: the test tree's own layout -----------------------------------------------

ROOT = PACKAGE.parent
TESTS = ROOT / "tests"


def _python_files(directory: Path) -> list[Path]:
    return sorted(p for p in directory.rglob("*") if p.is_file() and (
        p.suffix == ".py" or (p.suffix == "" and p.read_bytes()[:64].startswith(b"#!") and b"python" in p.read_bytes()[:64])))


def _from_tests(names: set[str], allowed: tuple[str, ...] = ()) -> list[str]:
    """The names under tests/ (``from a import b`` names a.b) but the bare namespace and ``allowed``."""
    return sorted(n for n in names if n.split(".")[0] == "tests" and n != "tests"
                  and not any(n == a or n.startswith(a + ".") for a in allowed))


def test_no_test_module_imports_another_test_module():
    """What tests share lives in tests/support (or conftest.py), so moving or deleting a test breaks no other."""
    test_modules = {p.stem for p in TESTS.rglob("test_*.py")}
    offenders = {}
    for path in sorted(TESTS.rglob("test_*.py")):
        found = sorted(n for n in _imports_with_relative(path)
                       if (n.split(".")[0] == "tests" or n.split(".")[0] in test_modules)
                       and any(part in test_modules for part in n.split(".")))
        if found:
            offenders[str(path.relative_to(ROOT))] = found
    assert offenders == {}


def test_scripts_import_nothing_from_the_test_tree():
    """The demo (the README's main job) and the other scripts run from a clone without the tests."""
    offenders = {str(p.relative_to(ROOT)): _from_tests(_imports_with_relative(p)) for p in _python_files(ROOT / "scripts")}
    # Shell scripts that run a module of the test tree (`python -m tests.x`) import it too.
    for path in sorted((ROOT / "scripts").iterdir()):
        if path.is_file() and path.suffix != ".py":
            offenders.setdefault(str(path.relative_to(ROOT)), []).extend(
                sorted(set(re.findall(r"-m\s+(tests(?:\.\w+)*)", path.read_text()))))
    assert {k: v for k, v in offenders.items() if v} == {}


def test_benchmarks_import_only_the_support_package_of_the_test_tree():
    offenders = {str(p.relative_to(ROOT)): _from_tests(_imports_with_relative(p), allowed=("tests.support",))
                 for p in _python_files(ROOT / "bench")}
    assert {k: v for k, v in offenders.items() if v} == {}


# -- issue 35: a layout that shows the architecture -------------------------------------------------

MAX_MODULE_LINES = 500


def _runtime_imports(path: Path) -> set[str]:
    """The kafkatxn modules ``path`` imports when it runs: at module level and inside functions, not
    under ``if TYPE_CHECKING:``; ``from a import b`` names the module a.b where b is one."""
    package = _module_name(path).split(".")
    if path.name != "__init__.py":
        package = package[:-1]
    modules = {_module_name(p) for p in PACKAGE.rglob("*.py")}
    found: set[str] = set()

    def visit(node: ast.AST) -> None:
        if isinstance(node, ast.If) and (getattr(node.test, "id", None) == "TYPE_CHECKING" or getattr(node.test, "attr", None) == "TYPE_CHECKING"):
            for child in node.orelse:
                visit(child)
            return
        names: list[str] = []
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = package[: len(package) - node.level + 1] if node.level else []
            module = ".".join([*base, *(node.module.split(".") if node.module else [])])
            names = [f"{module}.{alias.name}" if f"{module}.{alias.name}" in modules else module for alias in node.names]
        for name in names:
            while name and name not in modules:
                name = name.rpartition(".")[0]
            if name:
                found.add(name)
        for child in ast.iter_child_nodes(node):
            visit(child)

    visit(ast.parse(path.read_text(), str(path)))
    return found - {_module_name(path)}


def test_kafkatxn_has_no_runtime_import_cycle():
    """No module imports (at run time, function-local imports included) one that imports it back,
    however long the way round; a cycle fails here, named."""
    graph = {_module_name(p): _runtime_imports(p) for p in PACKAGE.rglob("*.py")}
    done: set[str] = set()
    cycles: list[str] = []

    def visit(name: str, path: tuple[str, ...]) -> None:
        if name in path:
            cycles.append(" -> ".join(path[path.index(name):] + (name,)))
            return
        if name in done:
            return
        for imported in sorted(graph.get(name, ())):
            visit(imported, path + (name,))
        done.add(name)

    for name in sorted(graph):
        visit(name, ())
    assert cycles == []


def test_no_kafkatxn_module_is_over_500_lines():
    over = {str(p.relative_to(ROOT)): n for p in PACKAGE.rglob("*.py") if (n := len(p.read_text().splitlines())) > MAX_MODULE_LINES}
    assert over == {}


def test_module_names_are_unique():
    """A module's name says which one it is: an API family's module in kafka/ (what the facade asks)
    and its codec in kafka/wire/ (``*_codec.py``: kafka-python's protocol objects) are not both
    ``offsets.py``, nor the library's errors and how kafka/ words a client's (``client_errors.py``)."""
    by_name: dict[str, set[str]] = {}
    for p in PACKAGE.rglob("*.py"):
        if p.name != "__init__.py":
            by_name.setdefault(p.name, set()).add(str(p.relative_to(ROOT)))
    assert {name: paths for name, paths in by_name.items() if len(paths) > 1} == {}


def test_the_kafka_package_imports_nothing_of_the_auditor():
    """The transaction-log decoder is beside the wire (kafka/txnlog.py): kafka/ builds on nothing of audit/."""
    offenders = {
        _module_name(p): sorted(m for m in _imports_with_relative(p) if m == "kafkatxn.audit" or m.startswith("kafkatxn.audit."))
        for p in (PACKAGE / "kafka").rglob("*.py")
    }
    assert {k: v for k, v in offenders.items() if v} == {}


def test_every_module_contributing_names_exists():
    """CONTRIBUTING.md's paths (``kafkatxn/...py``, ``tests/...py``, ``harness/...py``) and the modules
    it names in the package's rooms (``kafka/log_reader.py``) are files of this tree."""
    text = (ROOT / "CONTRIBUTING.md").read_text()
    named = set(re.findall(r"(?<![\w/.])((?:kafkatxn|tests|harness|bench|scripts)/[\w/]+\.py)\b", text))
    assert named, "CONTRIBUTING.md names no module"
    assert sorted(p for p in named if not (ROOT / p).is_file()) == []
    # A bare `name.py` CONTRIBUTING mentions is some module's name in the tree.
    bare = set(re.findall(r"`(?:[\w]+/)*([\w]+\.py)`", text))
    files = {p.name for d in ("kafkatxn", "tests", "harness", "bench", "scripts") for p in (ROOT / d).rglob("*.py")}
    assert sorted(b for b in bare if b not in files) == []


# Modules outside kafka/ and cli/ that import the Kafka package at run time (every other one is handed
# the facade and imports it only under TYPE_CHECKING), each with what it takes from there.
KAFKA_AT_RUN_TIME = {
    "kafkatxn.exporter": "opens a Cluster per scrape target",
    "kafkatxn.audit.job": "the audit's driver opens a Cluster to plan",
    "kafkatxn.audit.source": "the Spark executors read the log (log_reader) or open a Cluster of their own",
    "kafkatxn.remedy.abort": "the facade's leadership errors, when it acts",
    "kafkatxn.facts_history": "kafka/client_errors.py's part_missing and the log's topic name",
    "kafkatxn.spark": "the exactly-once writer's producer, in the executors",
    "kafkatxn.spark_eos": "the exactly-once writer's ledger, in the executors",
}


def test_only_the_listed_capability_modules_import_the_kafka_package_at_run_time():
    """CONTRIBUTING: a capability module is handed the facade and imports it only under TYPE_CHECKING,
    but for the ones it names (the same as KAFKA_AT_RUN_TIME)."""
    importers = {
        _module_name(p) for p in PACKAGE.rglob("*.py")
        if p.relative_to(PACKAGE).parts[0] not in ("kafka", "cli")
        and any(m == "kafkatxn.kafka" or m.startswith("kafkatxn.kafka.") for m in _runtime_imports(p))
    }
    assert sorted(importers) == sorted(KAFKA_AT_RUN_TIME)
    text = (ROOT / "CONTRIBUTING.md").read_text()
    for name in KAFKA_AT_RUN_TIME:
        if name != "kafkatxn.exporter":  # "the exporter"
            assert f"`{name.rsplit('.', 1)[-1]}.py`" in text, f"CONTRIBUTING does not name {name} among them"


def test_no_module_is_a_re_export_shim():
    """A module (not a package's __init__) that only imports names from elsewhere is a shim: import
    from where the names live."""
    shims = []
    for path in PACKAGE.rglob("*.py"):
        if path.name == "__init__.py":
            continue
        body = ast.parse(path.read_text()).body
        doc = 1 if body and isinstance(body[0], ast.Expr) and isinstance(getattr(body[0], "value", None), ast.Constant) else 0
        rest = body[doc:]
        if rest and all(isinstance(n, (ast.Import, ast.ImportFrom)) or (
                isinstance(n, ast.Assign) and [getattr(t, "id", None) for t in n.targets] == ["__all__"]) for n in rest):
            shims.append(str(path.relative_to(ROOT)))
    assert sorted(shims) == []


LOGGER_NAMES = {"kafkatxn.librdkafka"}


def test_every_dotted_name_contributing_gives_resolves():
    """CONTRIBUTING's ``module.name`` references (``gather.coordinator_view``, ``retry.Backoff``) name
    attributes that exist, the module found by its dotted tail among kafkatxn's."""
    import importlib
    import importlib.util

    modules = {_module_name(p) for p in PACKAGE.rglob("*.py")}
    text = (ROOT / "CONTRIBUTING.md").read_text()
    checked, broken = 0, []
    for token in sorted(set(re.findall(r"`([A-Za-z_]\w*(?:\.[A-Za-z_]\w*)+)(?:\(\))?`", text))):
        parts = token.split(".")
        if parts[-1] == "py" or token in LOGGER_NAMES:
            continue  # a file (checked above) or a logger
        if parts[0] != "kafkatxn" and (parts[0] in sys.stdlib_module_names or importlib.util.find_spec(parts[0]) is not None):
            continue  # another package's name (kafka.net, ...)
        for i in range(len(parts) - 1, 0, -1):
            prefix = ".".join(parts[:i])
            candidates = sorted(m for m in modules if m == prefix or m.endswith("." + prefix))
            if candidates:
                break
        else:
            continue  # not a module's name (a logger's, a file's)
        checked += 1

        def resolves(module: str) -> bool:
            obj = importlib.import_module(module)
            for attr in parts[i:]:
                if not hasattr(obj, attr):
                    return False
                obj = getattr(obj, attr)
            return True

        if not any(resolves(m) for m in candidates):
            broken.append(token)
    assert checked > 20 and broken == []
