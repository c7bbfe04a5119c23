"""Start-up pays only for what the command uses: cron and Nagios start `check` every minute."""

from __future__ import annotations

import json
import subprocess
import sys

HEAVY = ("confluent_kafka", "kafka", "pyspark", "pyarrow", "prometheus_client", "tabulate")


def modules_loaded_by(*args: str) -> set[str]:
    code = (
        "import sys, json\n"
        "from kafkatxn.cli.app import main\n"
        "try:\n"
        f"    main({list(args)!r})\n"
        "except SystemExit:\n"
        "    pass\n"
        "print(json.dumps(sorted({m.split('.')[0] for m in sys.modules})), file=sys.stderr)\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    return set(json.loads(proc.stderr.strip().splitlines()[-1]))


def test_help_imports_no_kafka_client_nor_output_library():
    loaded = modules_loaded_by("--help")
    assert not loaded & set(HEAVY), sorted(loaded & set(HEAVY))


def test_config_show_imports_no_kafka_client():
    loaded = modules_loaded_by("config", "show", "-b", "h:1", "-o", "json")
    assert not loaded & {"confluent_kafka", "kafka", "pyspark", "prometheus_client"}
