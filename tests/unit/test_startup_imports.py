"""Start-up pays only for what the command uses: cron and Nagios start `check` every minute."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

HEAVY = ("confluent_kafka", "kafka", "pyspark", "pyarrow", "prometheus_client", "tabulate")
# `lso` against a refused address, with a deadline of seconds: on a loaded machine a 200 ms deadline
# can pass before the wire is reached, and the command ends without importing the network layer
# the tests below look for (the refused address is tried again for ~1 s, then the command ends).
LSO_REACHING_THE_WIRE = ("lso", "-b", "127.0.0.1:1", "--timeout", "5s", "-o", "json")


def modules_loaded_by(*args: str) -> set[str]:
    code = (
        "import sys, json\n"
        "from kafkatxn.cli.app import main\n"
        "try:\n"
        f"    main({list(args)!r})\n"
        "except SystemExit:\n"
        "    pass\n"
        "print(json.dumps(sorted({m.split('.')[0] for m in sys.modules} | set(sys.modules))), file=sys.stderr)\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    return set(json.loads(proc.stderr.strip().splitlines()[-1]))


def test_help_imports_no_kafka_client_nor_output_library():
    loaded = modules_loaded_by("--help")
    assert not loaded & set(HEAVY), sorted(loaded & set(HEAVY))


def test_config_show_imports_no_kafka_client():
    loaded = modules_loaded_by("config", "show", "-b", "h:1", "-o", "json")
    assert not loaded & {"confluent_kafka", "kafka", "pyspark", "prometheus_client"}


def test_parsing_a_command_line_imports_no_validation_framework():
    """typer 0.29 validates every parameter through pydantic (+45-90 ms per start); pyproject keeps
    typer below it, and this fails when an upgrade brings that cost back."""
    loaded = modules_loaded_by("config", "show", "-b", "h:1", "--timeout", "5s", "-o", "json")
    assert "pydantic" not in loaded and "pydantic_core" not in loaded


def test_config_show_builds_no_model_and_no_logging():
    """Without --debug nothing logs; the dataclasses of the model are for commands that ask Kafka."""
    loaded = modules_loaded_by("config", "show", "-b", "h:1")
    assert not loaded & {"logging", "kafkatxn.model", "tomllib"}, sorted(loaded & {"logging", "kafkatxn.model", "tomllib"})


def test_a_table_reads_no_package_metadata():
    """A table of printable cells that fits is written without tabulate; tables that wrap use it, and
    tabulate 0.10 imports importlib.metadata to find its own version (+10-15 ms per table)."""
    loaded = modules_loaded_by("config", "show", "-b", "h:1")
    assert "tabulate" not in loaded and "importlib.metadata" not in loaded, sorted(loaded & {"tabulate", "importlib.metadata"})
    code = "import sys, tabulate; print('importlib.metadata' in sys.modules)"
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert proc.stdout.strip() == "False", proc.stderr


def test_a_table_that_fits_once_its_commands_are_lifted_out_imports_no_tabulate():
    """``hanging``'s rows name their next step (``kafkatxn abort ...``) in a cell: lifted out to a numbered
    line below, the table fits and is written without tabulate, whose import cost every such run ~18 ms."""
    code = (
        "import sys\n"
        "from kafkatxn import output\n"
        "rows = [{'topic': 't', 'partition': p, 'verdict': 'hanging',\n"
        "         'reason': f'not tracked by its coordinator; run kafkatxn abort --topic t --partition {p}'} for p in range(3)]\n"
        "text = ''.join(output.table_pieces(list(rows[0]), rows))\n"
        "print('[3]:' in text and 'kafkatxn abort --topic t --partition 2' in text, 'tabulate' in sys.modules)\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert proc.stdout.split() == ["True", "False"], proc.stderr


def test_the_help_line_of_every_command_is_its_own():
    """--help lists commands from a table so it imports none of them: the table must say what each
    command's own help says."""
    from kafkatxn.cli import app as app_module

    for name, (module, line) in app_module.COMMANDS.items():
        command = app_module.load_commands(module)[name]
        assert command.get_short_help_str(limit=1000) == line, name


def test_help_loads_no_command_module():
    loaded = modules_loaded_by("--help")
    assert not {m for m in loaded if m.endswith("_cmd")}, "a command module was imported for --help"


def test_lso_imports_kafka_python_only():
    """`lso` is served by kafka-python alone (metadata, ListOffsets, DescribeProducers, ...): it
    imports, bootstraps and pays for that client only. The cluster is unreachable here, so the
    command ends after its bootstrap attempt: the client it tried is the one it uses."""
    loaded = modules_loaded_by("lso", "-b", "127.0.0.1:1", "--timeout", "200ms", "-o", "json")
    assert "kafka" in loaded and "kafkatxn.kafka.wire" in loaded
    assert "confluent_kafka" not in loaded, "lso imported confluent-kafka"
    # Spark checkpoints are read beside groups (lso --groups) only.
    assert not loaded & {"kafkatxn.spark_readers", "kafkatxn.spark_checkpoint"}, "lso imported the Spark checkpoint readers"


def test_lso_does_not_run_kafka_pythons_package_init():
    """kafka-python's package __init__ imports its admin client, consumer and producer (~40 ms a
    start); the wire needs none of them (kafkatxn.kafka.wire.client_package defers that __init__)."""
    loaded = modules_loaded_by(*LSO_REACHING_THE_WIRE)
    assert "kafka.net.manager" in loaded, "the wire did not reach kafka-python's network layer"
    assert not loaded & {"kafka.admin", "kafka.consumer", "kafka.producer"}, sorted(loaded & {"kafka.admin", "kafka.consumer", "kafka.producer"})


def test_a_command_freezes_what_the_imports_built_once_per_process():
    """gc.freeze after the imports: collections during the command and at exit skip the modules."""
    code = (
        "import gc, sys\n"
        "from kafkatxn.cli.app import main\n"
        "before = gc.get_freeze_count()\n"
        "for _ in range(2):\n"
        "    try:\n"
        "        main(['config', 'show', '-b', 'h:1', '-o', 'json'])\n"
        "    except SystemExit:\n"
        "        pass\n"
        "import kafkatxn.cli.common as common\n"
        "print(before, gc.get_freeze_count(), common._HEAP_SETTLED, file=sys.stderr)\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    before, after, settled = proc.stderr.strip().splitlines()[-1].split()
    assert int(before) == 0 and int(after) > 10_000 and settled == "True", proc.stderr


def test_lso_builds_no_protocol_class_of_an_api_it_does_not_send():
    """kafka-python's protocol packages (admin, consumer, producer) import every API module of their
    family, and each module builds its classes from Kafka's JSON schemas (~35 ms of lso's start);
    client_package defers those __init__s, so a command builds the APIs it sends (and the two
    kafka-python's network layer names)."""
    loaded = modules_loaded_by(*LSO_REACHING_THE_WIRE)
    assert "kafka.net.manager" in loaded, "the wire did not reach kafka-python's network layer"
    unsent = {"kafka.protocol.admin.topics", "kafka.protocol.admin.acl", "kafka.protocol.admin.cluster",
              "kafka.protocol.admin.client_quotas", "kafka.protocol.admin.users", "kafka.protocol.consumer.metadata",
              "kafka.protocol.producer.produce"}
    assert not loaded & unsent, sorted(loaded & unsent)


def test_check_without_groups_imports_no_spark_checkpoint_reader():
    """check's group findings name Spark queries, which only a group pass (--groups,
    --spark-checkpoint) finds: check without one reads no checkpoint and imports no reader of them."""
    loaded = modules_loaded_by("check", "-b", "127.0.0.1:1", "--timeout", "200ms", "-o", "json")
    assert "kafkatxn.check" in loaded
    assert not loaded & {"kafkatxn.spark_readers", "kafkatxn.spark_checkpoint"}, sorted(loaded & {"kafkatxn.spark_readers", "kafkatxn.spark_checkpoint"})


def test_no_cyclic_collection_while_a_command_starts_and_it_runs_again_after():
    """The command's imports and set-up are long-lived and acyclic: main pauses the collector until
    the heap is frozen (common.settle_heap), which resumes it, and pauses it again while the Kafka
    client's modules import (ctx.cluster); a command line that runs no command (--help) resumes it as
    main ends; each main of a process does the same."""
    code = (
        "import gc, sys\n"
        "collections = []\n"
        "gc.callbacks.append(lambda phase, info: phase == 'start' and collections.append(info['generation']))\n"
        "from kafkatxn.cli import common\n"
        "from kafkatxn.cli.app import main\n"
        "seen = []\n"
        "settle = common.settle_heap\n"
        "def settle_heap():\n"
        "    seen.append((gc.isenabled(), len(collections)))\n"
        "    settle()\n"
        "    seen.append((gc.isenabled(), None))\n"
        "common.settle_heap = settle_heap\n"
        "class Facade:  # whether the collector is on as the Kafka client's facade imports (ctx.cluster)\n"
        "    def find_spec(self, name, path=None, target=None):\n"
        "        if name == 'kafkatxn.kafka.facade':\n"
        "            seen.append(('facade', gc.isenabled()))\n"
        "sys.meta_path.insert(0, Facade())\n"
        "for argv in (['lso', '-b', '127.0.0.1:1', '--timeout', '200ms', '-o', 'json'], ['--help'], ['config', 'show', '-b', 'h:1']):\n"
        "    try:\n"
        "        main(argv)\n"
        "    except SystemExit:\n"
        "        pass\n"
        "    seen.append(('after', gc.isenabled()))\n"
        "print(seen, file=sys.stderr)\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], check=False, capture_output=True, text=True, timeout=60)
    seen = eval(proc.stderr.strip().splitlines()[-1])  # noqa: S307 - our own repr of bools and ints
    lso_start, lso_settled, facade, lso_after, help_after, show_start, show_settled, show_after = seen
    assert lso_start[0] is False and lso_settled == (True, None) and lso_after == ("after", True), seen
    assert facade == ("facade", False), seen
    assert help_after == ("after", True) and show_start[0] is False and show_after == ("after", True), seen


def test_lso_without_groups_builds_no_group_rows():
    """`lso` alone makes partition rows: the group rows' module (kafkatxn.group_positions, its big row
    dataclasses) is imported where group rows are made (`lso --groups`, check, the exporter, diagnose)."""
    code = "import sys, kafkatxn.lso, kafkatxn.facts_lso, kafkatxn.cli.lso_cmd; print('kafkatxn.group_positions' in sys.modules)"
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert proc.stdout.strip() == "False", proc.stderr


def test_lso_imports_no_thread_pool_module():
    """The facade's timeouts are the builtin TimeoutError (concurrent.futures' one since Python 3.11):
    nothing on lso's path imports concurrent.futures (~1.3 ms of every Kafka command's start)."""
    loaded = modules_loaded_by(*LSO_REACHING_THE_WIRE)
    assert "kafka.net.manager" in loaded, "the wire did not reach kafka-python's network layer"
    assert "concurrent.futures" not in loaded


def test_only_oauthbearer_imports_the_token_provider():
    """kafkatxn's OAUTHBEARER token provider (kafkatxn.config.sasl_oauth) is imported where kafka-python's
    settings name that mechanism, not at every start."""
    loaded = modules_loaded_by(*LSO_REACHING_THE_WIRE)
    assert "kafka.net.manager" in loaded, "the wire did not reach kafka-python's network layer"
    assert "kafkatxn.config.sasl_oauth" not in loaded  # made under OAUTHBEARER: tests/unit/test_sasl_oauth.py


def modules_as_the_bootstrap_begins(*args: str) -> tuple[set[str], set[str]]:
    """The modules imported when the command starts the wire's IO thread (its bootstrap begins: the
    main thread is there, nothing else imports), and when the IO thread first connects (what the
    connection itself imported on the way), for a command line run to its first connection."""
    code = (
        "import sys, json, threading\n"
        "seen = {}\n"
        "start = threading.Thread.start\n"
        "def started(self):\n"
        "    if self.name.startswith('kafka-io') and 'begun' not in seen:\n"
        "        seen['begun'] = sorted(sys.modules)\n"
        "    return start(self)\n"
        "threading.Thread.start = started\n"
        "def hook(event, args):\n"
        "    if event == 'socket.connect' and threading.current_thread().name.startswith('kafka-io') and 'connect' not in seen:\n"
        "        seen['connect'] = sorted(sys.modules)\n"
        "sys.addaudithook(hook)\n"
        "from kafkatxn.cli.app import main\n"
        "try:\n"
        f"    main({list(args)!r})\n"
        "except SystemExit:\n"
        "    pass\n"
        "print(json.dumps(seen), file=sys.stderr)\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    seen = json.loads(proc.stderr.strip().splitlines()[-1])
    assert "begun" in seen and "connect" in seen, proc.stderr
    return set(seen["begun"]), set(seen["connect"])


# What reads the answers, not what sends the first request: imported while the bootstrap is in flight.
# The wire's own too: a Fetch's body (.fetch_body, .fetch, .fetch_records) and a round's windows (.windows)
# are none of the bootstrap's (ApiVersions, Metadata), imported with the first request that needs them.
READ_AFTER_THE_BOOTSTRAP = {"kafkatxn.kafka.facade", "kafkatxn.kafka.session", "kafkatxn.kafka.offsets",
                            "kafkatxn.kafka.producer_state", "kafkatxn.kafka.transactions", "kafkatxn.kafka.groups",
                            "kafkatxn.kafka.wire.fetch_body", "kafkatxn.kafka.wire.fetch", "kafkatxn.kafka.wire.fetch_records",
                            "kafkatxn.kafka.wire.windows"}


@pytest.mark.parametrize("command", [LSO_REACHING_THE_WIRE[:1], ("hanging",), ("producers",), ("cluster",)], ids=lambda c: c[0])
def test_a_command_begins_its_bootstrap_before_importing_the_facade(command):
    """A command's first request (ApiVersions, then Metadata) needs the wire and kafka-python's network
    layer alone: the facade and its API modules, the fact layer and the verdicts import while the broker
    answers (CommandContext.connect_ahead, kafkatxn.kafka.bootstrap_ahead)."""
    begun, _ = modules_as_the_bootstrap_begins(*command, *LSO_REACHING_THE_WIRE[1:])
    early = begun & (READ_AFTER_THE_BOOTSTRAP | {"kafkatxn.lso", "kafkatxn.facts_lso", "kafkatxn.verdicts", "kafkatxn.facts_scan",
                                                 "kafkatxn.hanging", "kafkatxn.clusterinfo"})
    assert not early, sorted(early)


def test_check_begins_its_bootstrap_before_importing_the_facade_and_the_check():
    """`check` parses its thresholds (a usage error sends nothing) without importing kafkatxn.check (the
    snapshot, the verdicts, the group positions): those and the facade import while the broker answers."""
    begun, _ = modules_as_the_bootstrap_begins("check", "-b", "127.0.0.1:1", "--timeout", "5s", "-o", "json")
    early = begun & (READ_AFTER_THE_BOOTSTRAP | {"kafkatxn.check", "kafkatxn.snapshot", "kafkatxn.verdicts",
                                                 "kafkatxn.facts_cluster", "kafkatxn.group_positions"})
    assert not early, sorted(early)


def test_a_plaintext_connection_imports_no_idna_codec():
    """socket.getaddrinfo encodes a str host with the IDNA codec (encodings.idna, stringprep, unicodedata:
    ~5 M instructions on the IO thread before the first request): an ASCII host is looked up as bytes."""
    _, connecting = modules_as_the_bootstrap_begins(*LSO_REACHING_THE_WIRE)
    assert not connecting & {"encodings.idna", "stringprep"}, sorted(connecting & {"encodings.idna", "stringprep"})
