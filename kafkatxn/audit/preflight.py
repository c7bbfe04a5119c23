"""Which Python runs Spark's Python side, and whether it has what the audit needs.

Spark starts its Python processes (the data-source planner on the driver, the workers on the
executors) with ``SparkContext.pythonExec``: ``PYSPARK_PYTHON``, else ``python3`` from PATH. That
is not the interpreter running ``kafkatxn`` when it is installed in its own virtual environment
(pipx, a venv used without activating it), and a ``python3`` without pyarrow fails deep inside
Spark. So the audit pins local mode to its own interpreter (:func:`pin_local_python`) and, before
the job, runs one tiny task per core that tries the imports (:func:`probe`): a Python that lacks a
package is one line naming the package and the interpreter.

This module imports nothing beyond the standard library at module level: the probe is unpickled
on workers that may lack everything else.
"""

from __future__ import annotations

import os
import sys
from typing import Any

# import name -> distribution name, what the Python side of the audit imports on executors.
REQUIRED = {"pyarrow": "pyarrow", "pandas": "pandas", "confluent_kafka": "confluent-kafka", "kafka": "kafka-python"}
INSTALL_HINT = "pip install 'kafkatxn[spark]'"


# The same check as a script, for the interpreter the driver's data-source planner runs (it looks
# the packages up without importing them and without kafkatxn on its path).
PROBE_SCRIPT = (
    "import importlib.util, json, sys\n"
    f"required = {REQUIRED!r}\n"
    "missing = [d for m, d in required.items() if importlib.util.find_spec(m) is None]\n"
    "print(json.dumps([sys.executable, '%d.%d.%d' % sys.version_info[:3], missing]))\n"
)


def pin_local_python(master: str | None) -> str | None:
    """In local mode, make Spark's Python processes run this interpreter unless the user chose one.

    Returns the interpreter set, or None when nothing was changed (not local, or ``PYSPARK_PYTHON`` set).
    """
    if os.environ.get("PYSPARK_PYTHON"):
        return None
    if master is not None and not master.startswith("local"):
        return None
    os.environ["PYSPARK_PYTHON"] = sys.executable
    return sys.executable


def probe_imports(_: Any = None) -> tuple[str, str, tuple[str, ...]]:
    """(interpreter, version, missing distributions) of the Python this runs in."""
    import importlib

    missing = []
    for module, dist in REQUIRED.items():
        try:
            importlib.import_module(module)
        except ImportError:
            missing.append(dist)
    return sys.executable, "%d.%d.%d" % sys.version_info[:3], tuple(missing)


def missing_line(interpreter: str, version: str, missing: tuple[str, ...] | list[str], where: str) -> str:
    return (
        f"the Python on the Spark {where} ({interpreter}, {version}) lacks {', '.join(missing)}: "
        f"install them there ({INSTALL_HINT}) or point PYSPARK_PYTHON / spark.pyspark.python at a Python that has them"
    )


def probe(sc: Any) -> str | None:
    """Run :func:`probe_imports` once per core of the cluster; the one-line problem, or None."""
    n = max(int(sc.defaultParallelism), 1)
    answers = set(sc.parallelize(range(n), n).map(probe_imports).collect())
    bad = sorted(a for a in answers if a[2])
    if not bad:
        return None
    interpreter, version, missing = bad[0]
    return missing_line(interpreter, version, missing, "workers")
