"""Capture ``__transaction_state`` history into a Parquet directory with Structured Streaming.

The log is compacted: once the cleaner has run, only each id's latest record is left, and with it
the evidence of fencing and churn is gone. A capture appends every record it sees to DIR (Spark's
file sink: exactly once, with its offsets in ``DIR/_checkpoint``), so running it again — from cron
or as a long-running job — continues where the last run stopped. ``kafkatxn audit --history DIR``
audits what was captured.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kafkatxn.audit import source
from kafkatxn.errors import ClusterError


@dataclass(frozen=True)
class CaptureResult:
    directory: str
    batches: int
    records_captured: int
    duration_ms: int


def capture(spark: Any, config: Any, directory: str | Path, duration_ms: int, trigger_ms: int = 5_000) -> CaptureResult:
    """Stream the log into ``directory`` for ``duration_ms`` (0: what is there now), then stop cleanly."""
    from kafkatxn.audit.job import spark_error_line

    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    started = time.monotonic()
    stream = spark.readStream.format(source.FORMAT).options(**source.reader_options(config)).load()
    query = (
        stream.writeStream.format("parquet")
        .option("checkpointLocation", str(directory / "_checkpoint"))
        .trigger(processingTime=f"{max(trigger_ms, 100)} milliseconds")
        .queryName(f"kafkatxn-capture-{int(time.time())}")
        .start(str(directory))
    )
    try:
        deadline = started + duration_ms / 1000
        while query.isActive and time.monotonic() < deadline:
            query.awaitTermination(min(1.0, max(deadline - time.monotonic(), 0.01)))
        if query.isActive:
            query.processAllAvailable()  # everything up to now lands before we stop
    except Exception as exc:  # noqa: BLE001 - one line instead of the streaming stack
        raise ClusterError(f"capture into {directory} failed: {spark_error_line(exc)}") from exc
    finally:
        progress = list(query.recentProgress)
        query.stop()
    error = query.exception()
    if error is not None:
        raise ClusterError(f"capture into {directory} failed: {spark_error_line(error)}")
    rows = sum(int(p.get("numInputRows", 0)) for p in progress)
    batches = sum(1 for p in progress if int(p.get("numInputRows", 0)) > 0)
    return CaptureResult(str(directory), batches, rows, int((time.monotonic() - started) * 1000))
