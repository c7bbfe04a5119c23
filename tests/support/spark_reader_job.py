"""A Structured Streaming query that reads a Kafka topic read_committed, batch after batch, and writes
down what each batch read: the reader ``tests/integration/test_spark_reader.py`` stalls, diagnoses and
unblocks.

Run as a process of its own (``python -m tests.support.spark_reader_job ...``, in a session of its own
so its process group is the whole driver). Every batch appends one JSON line ``{"batch": N, "values":
[...]}`` to ``--out``; the query stops when the file ``--stop`` appears.
"""

from __future__ import annotations

import argparse
import json
import os
import time


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--bootstrap", required=True)
    parser.add_argument("--input", required=True)
    parser.add_argument("--checkpoint", required=True)
    parser.add_argument("--out", required=True)
    parser.add_argument("--stop", required=True)
    parser.add_argument("--jars", required=True, help="comma-separated: Spark's Kafka connector and its dependencies")
    parser.add_argument("--name", default="reader")
    args = parser.parse_args()

    from pyspark.sql import SparkSession

    spark = (SparkSession.builder.master("local[2]").appName(args.name)
             .config("spark.ui.enabled", "false").config("spark.ui.showConsoleProgress", "false")
             .config("spark.sql.shuffle.partitions", "1").config("spark.jars", args.jars).getOrCreate())
    spark.sparkContext.setLogLevel("ERROR")
    source = (spark.readStream.format("kafka").option("kafka.bootstrap.servers", args.bootstrap)
              .option("subscribe", args.input).option("startingOffsets", "earliest")
              .option("kafka.isolation.level", "read_committed").option("failOnDataLoss", "false").load())

    def write(batch, batch_id: int) -> None:
        values = [r.value.decode() for r in batch.select("value").collect()]
        with open(args.out, "a") as f:
            f.write(json.dumps({"batch": batch_id, "values": values}) + "\n")

    query = (source.writeStream.queryName(args.name).foreachBatch(write).option("checkpointLocation", args.checkpoint)
             .trigger(processingTime="500 milliseconds").start())
    while not os.path.exists(args.stop) and query.isActive:
        time.sleep(0.2)
    query.stop()
    spark.stop()


if __name__ == "__main__":
    main()
