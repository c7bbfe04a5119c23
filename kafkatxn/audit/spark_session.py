"""The Spark session the audit runs on, and Spark's failures said in one line.

``local[*]`` by default, a given ``--master``, or the session ``spark-submit`` made; the package is
shipped to executors as a zip when the master is not local, and Spark's Python side is checked for
the packages the audit needs before any job starts.
"""

from __future__ import annotations

import json
import os
import re
import sys
import tempfile
import zipfile
from pathlib import Path
from typing import Any

from kafkatxn.audit import preflight, source
from kafkatxn.errors import ClusterError

SPARK_HINT = "pip install 'kafkatxn[spark]'"
# Options whose values must not show in plans or the Spark UI (connection secrets, inline keys).
REDACTION_REGEX = r"(?i)url|password|secret|token|pem|jaas|key\.location"


def require_pyspark() -> None:
    """Raise the one-line hint when PySpark (or pyarrow, which its Python data sources need) is missing."""
    try:
        import pyarrow  # noqa: F401
        import pyspark  # noqa: F401
    except ImportError:
        raise SparkMissing(f"the audit needs PySpark: {SPARK_HINT}") from None


class SparkMissing(ClusterError):
    pass


def _quiet_log4j() -> str:
    """A log4j2 config that keeps Spark's INFO/WARN chatter off the CLI's stderr."""
    path = Path(tempfile.gettempdir()) / "kafkatxn-spark-log4j2.properties"
    if not path.exists():
        path.write_text(
            "rootLogger.level = error\nrootLogger.appenderRef.stderr.ref = console\n"
            "appender.console.type = Console\nappender.console.name = console\nappender.console.target = SYSTEM_ERR\n"
            "appender.console.layout.type = PatternLayout\nappender.console.layout.pattern = %d{HH:mm:ss} %p %c{1}: %m%n\n",
            encoding="utf-8",
        )
    return str(path)


def under_spark_submit() -> bool:
    return "PYSPARK_GATEWAY_PORT" in os.environ


def build_session(master: str | None = None, app_name: str = "kafkatxn-audit", ship_code: bool | None = None,
                  conf: dict[str, str] | None = None) -> tuple[Any, bool]:
    """``(spark, created)``: the active session, spark-submit's, or a new one on ``master`` (default ``local[*]``).

    ``created`` says whether the caller owns (and should stop) it. Code is shipped to executors as a
    zip of this package when the master is not local (``ship_code`` overrides), so workers need no install.
    """
    require_pyspark()
    from pyspark.sql import SparkSession

    active = SparkSession.getActiveSession()
    if active is not None and master is None:
        return active, False
    builder = SparkSession.builder.appName(app_name)
    if master is not None or not under_spark_submit():
        effective = master or "local[*]"
        builder = builder.master(effective)
        builder = builder.config("spark.ui.enabled", "false").config("spark.sql.shuffle.partitions", "8")
        builder = builder.config("spark.ui.showConsoleProgress", "false")  # progress bars would garble stderr
        builder = builder.config("spark.driver.extraJavaOptions", f"-Dlog4j2.configurationFile=file:{_quiet_log4j()}")
        # Spark's Python side runs PYSPARK_PYTHON, else `python3` from PATH, which need not be the
        # interpreter kafkatxn is installed in (pipx, a venv not activated): pin it in local mode.
        preflight.pin_local_python(effective)
    for key, value in (conf or {}).items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    spark.conf.set("spark.sql.redaction.options.regex", REDACTION_REGEX)
    sc = spark.sparkContext
    shipped = "kafkatxn.zip" in (sc.getConf().get("spark.submit.pyFiles") or "")  # spark-submit --py-files did it
    if (ship_code if ship_code is not None else not sc.master.startswith("local")) and not shipped:
        sc.addPyFile(package_zip())
    try:
        check_python(spark)
    except BaseException:
        spark.stop()
        raise
    source.register(spark)
    return spark, True


def check_python(spark: Any) -> None:
    """One line naming the package and the interpreter when Spark's Python side lacks a package.

    The data-source planner runs ``pythonExec`` on the driver's host; the workers run it (or
    ``spark.pyspark.python``) on the executors. Both are asked before the job starts.
    """
    import subprocess

    sc = spark.sparkContext
    exe = sc.pythonExec
    if exe != sys.executable:
        try:
            done = subprocess.run([exe, "-c", preflight.PROBE_SCRIPT], capture_output=True, text=True, timeout=60)
        except (OSError, subprocess.TimeoutExpired) as exc:
            raise SparkMissing(f"cannot run Spark's Python ({exe}) on this host: {exc.__class__.__name__}; set PYSPARK_PYTHON") from None
        if done.returncode == 0:
            interpreter, version, missing = json.loads(done.stdout)
            if missing:
                raise SparkMissing(preflight.missing_line(interpreter, version, missing, "driver (data-source planner)"))
    try:
        problem = preflight.probe(sc)
    except Exception as exc:  # noqa: BLE001 - the probe itself could not run (no worker, wrong Python)
        raise ClusterError(f"Spark's Python workers ({exe}) cannot run: {spark_error_line(exc, exe)}") from exc
    if problem:
        raise SparkMissing(problem)


def package_zip(directory: str | Path | None = None) -> str:
    """A zip of the kafkatxn package for ``addPyFile``/``--py-files``; rebuilt on every call."""
    import kafkatxn

    root = Path(kafkatxn.__file__).resolve().parent
    target = Path(directory or tempfile.mkdtemp(prefix="kafkatxn-pyfiles-")) / "kafkatxn.zip"
    with zipfile.ZipFile(target, "w", zipfile.ZIP_DEFLATED) as zf:
        for path in sorted(root.rglob("*.py")):
            zf.write(path, Path("kafkatxn") / path.relative_to(root))
    return str(target)


def is_kafkatxn_error(exc: BaseException) -> bool:
    from kafkatxn.errors import KafkatxnError

    return isinstance(exc, KafkatxnError)


_ERROR_LINE = re.compile(r"^(?:[\w.]+\.)?(\w*(?:Error|Exception)): (.+)$")


_NO_MODULE = re.compile(r"No module named '([\w.]+)'")


def spark_error_line(exc: BaseException, python: str | None = None) -> str:
    """The innermost ``SomeError: message`` line of a Spark/Python worker failure.

    A missing module is said as such, with the interpreter (``python``, Spark's pythonExec) that lacks it.
    """
    from kafkatxn.redact import redact

    text = str(exc)
    missing = _NO_MODULE.search(text)
    if missing and python:
        module = missing.group(1).split(".")[0]
        dist = preflight.REQUIRED.get(module, module)
        return redact(preflight.missing_line(python, "version unknown", [dist], "driver or workers"))
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    found = [m for m in (_ERROR_LINE.match(ln) for ln in lines) if m]
    # Python worker failures end with the worker's own exception line; prefer it over Java's wrappers.
    for m in reversed(found):
        if m.group(1) not in ("PythonException", "SparkException", "Py4JJavaError"):
            return redact(f"Spark job failed: {m.group(1)}: {m.group(2)}"[:500])
    first = lines[0] if lines else type(exc).__name__
    return redact(f"Spark job failed: {first}"[:500])
