"""An idempotent ``df.write`` job for the several-writers fault harness (tests/spark/writers_faults.py).

Writes events ``first_id .. first_id + count - 1`` (the pipeline's output shape: a JSON object with ``id``) to
``output`` with ``writerId`` + ``writerVersion``, in ``partitions`` tasks. Prints ``{"event": "started"}`` once its
SparkSession is up and ``{"event": "done"}`` after the job::

    python tests/spark/writer_job.py URI OUTPUT FIRST_ID COUNT WRITER_ID VERSION
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))


def emit(event: str) -> None:
    print(json.dumps({"event": event}), flush=True)


def main(argv: list[str]) -> int:
    uri, output, first_id, count, writer_id, version = argv
    from pyspark.sql import functions as sf

    from dl_spark.session import spark_session

    spark = spark_session("local[2]", app_name="writer-job", pythonpath=[str(ROOT)], conf={"spark.driver.memory": "1g"})
    emit("started")
    first = int(first_id)
    df = spark.range(first, first + int(count), numPartitions=4).select(
        sf.to_json(sf.struct(sf.col("id"), sf.lit("BATCH").alias("user"))).alias("value")
    )
    (
        df.write.format("distributedlog")
        .option("uri", uri)
        .option("stream", output)
        .option("writerId", writer_id)
        .option("writerVersion", version)
        .mode("append")
        .save()
    )
    emit("done")
    spark.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
