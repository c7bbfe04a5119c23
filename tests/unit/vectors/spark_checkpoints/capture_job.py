"""Runs inside a venv holding one PySpark (and nothing of kafkatxn): capture.py's Structured Streaming
queries. Argument: a JSON object (bootstrap, jars, work, shapes: name -> options). Prints one JSON line
per run ({"run": N, "queries": {shape: {"id", "end_offsets"}}}); between runs it waits for a line on
stdin (capture.py produces more records meanwhile)."""

import json
import sys

from pyspark.sql import SparkSession
from pyspark.sql import functions as F

cfg = json.loads(sys.argv[1])
spark = (SparkSession.builder.master("local[1]").appName("kafkatxn-capture")
         .config("spark.ui.enabled", "false").config("spark.ui.showConsoleProgress", "false")
         .config("spark.sql.shuffle.partitions", "1").config("spark.jars", cfg["jars"]).getOrCreate())
spark.sparkContext.setLogLevel("ERROR")


def kafka_source(options, name=None):
    reader = spark.readStream.name(name) if name else spark.readStream
    reader = (reader.format("kafka").option("kafka.bootstrap.servers", cfg["bootstrap"])
              .option("startingOffsets", "earliest").option("kafka.isolation.level", "read_committed"))
    for k, v in options.items():
        reader = reader.option(k, v)
    return reader.load().select(F.col("value").cast("string").alias("v"))


for run in (1, 2):
    out = {}
    for shape, spec in cfg["shapes"].items():
        named = spec.get("named")  # named sources (Spark 4.2's DataStreamReader.name, source evolution)
        try:
            for k, v in (spec.get("conf") or {}).items():
                spark.conf.set(k, v)
            df = kafka_source(spec["kafka"], "orders" if named else None)
            if spec.get("text_dir"):  # a second source that is not Kafka
                files = spark.readStream.name("files") if named else spark.readStream
                df = df.union(files.format("text").load(spec["text_dir"]).select(F.col("value").alias("v")))
            query = (df.writeStream.format("noop").queryName(shape).option("checkpointLocation", spec["checkpoint"])
                     .trigger(availableNow=True).start())
            query.awaitTermination()
        except Exception as exc:  # an optional shape this Spark does not have
            if not spec.get("optional"):
                raise
            out[shape] = {"error": str(exc).splitlines()[0]}
            continue
        finally:
            for k in spec.get("conf") or {}:
                spark.conf.unset(k)
        out[shape] = {"id": query.id, "end_offsets": [s["endOffset"] for s in (query.lastProgress or {}).get("sources", [])]}
    print(json.dumps({"run": run, "queries": out}), flush=True)
    if run == 1:
        sys.stdin.readline()
spark.stop()
