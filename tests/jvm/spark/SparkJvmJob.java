import java.util.Base64;
import java.util.List;
import java.util.concurrent.TimeUnit;
import org.apache.spark.sql.Dataset;
import org.apache.spark.sql.Row;
import org.apache.spark.sql.SparkSession;
import org.apache.spark.sql.streaming.StreamingQuery;
import org.apache.spark.sql.streaming.Trigger;

/**
 * A Spark application written in Java that reads and writes DistributedLog logs through
 * {@code format("distributedlog")} with no registration call: the JVM-started session finds the Python data source
 * (module {@code pyspark_distributedlog}) through its Python worker, which is the interpreter named by
 * {@code spark.pyspark.python} / {@code PYSPARK_PYTHON}.
 *
 * <pre>
 * javac --release 17 -cp ".venv/lib/python3.11/site-packages/pyspark/jars/*" -d CLASSES tests/jvm/spark/SparkJvmJob.java
 * jar cf job.jar -C CLASSES .
 * PYSPARK_PYTHON=.venv/bin/python SPARK_LOCAL_IP=127.0.0.1 .venv/bin/spark-submit \
 *     --properties-file conf/spark-defaults.conf --class SparkJvmJob job.jar URI IN_LOG OUT_LOG CHECKPOINT_DIR
 * </pre>
 *
 * Prints one {@code ROW txid sequence_id lssn,entry,slot base64(value)} line per record of the batch read, one
 * {@code RUN n} line per streaming run, then {@code SPARK JVM OK batch=N runs=2}.
 */
public final class SparkJvmJob {

    private SparkJvmJob() {
    }

    /** A progress line on stderr, so a run stopped from outside shows how far it came. */
    private static void step(long started, String what) {
        System.err.printf("STEP %.1fs %s%n", (System.nanoTime() - started) / 1e9, what);
    }

    public static void main(String[] args) throws Exception {
        if (args.length != 4) {
            System.err.println("usage: SparkJvmJob <namespace-uri> <input-log> <output-log> <checkpoint-dir>");
            System.exit(2);
        }
        String uri = args[0];
        String input = args[1];
        String output = args[2];
        String checkpoint = args[3];

        long started = System.nanoTime();
        SparkSession spark = SparkSession.builder().appName("SparkJvmJob").getOrCreate();
        step(started, "session up; batch read");
        try {
            // batch: every record of the input log, from the earliest
            Dataset<Row> batch = spark.read().format("distributedlog")
                .option("uri", uri)
                .option("streams", input)
                .load()
                .selectExpr("txid", "sequence_id", "dlsn.lssn", "dlsn.entry_id", "dlsn.slot_id", "value")
                .orderBy("sequence_id");
            List<Row> rows = batch.collectAsList();
            Base64.Encoder b64 = Base64.getEncoder();
            for (Row r : rows) {
                byte[] value = r.isNullAt(5) ? new byte[0] : (byte[]) r.get(5);
                System.out.println("ROW " + r.getLong(0) + " " + r.getLong(1) + " " + r.getLong(2) + ","
                    + r.getLong(3) + "," + r.getLong(4) + " " + b64.encodeToString(value));
            }

            // streaming, exactly once: the same query (same checkpoint) runs twice with Trigger.AvailableNow;
            // the second run finds nothing new and must add nothing
            for (int run = 1; run <= 2; run++) {
                step(started, "streaming run " + run);
                StreamingQuery query = spark.readStream().format("distributedlog")
                    .option("uri", uri)
                    .option("streams", input)
                    .option("startingOffsets", "earliest")
                    .load()
                    .selectExpr("txid", "concat(CAST('out-' AS BINARY), value) AS value")
                    .writeStream().format("distributedlog")
                    .option("uri", uri)
                    .option("stream", output)
                    .option("checkpointLocation", checkpoint)
                    .trigger(Trigger.AvailableNow())
                    .start();
                if (!query.awaitTermination(TimeUnit.MINUTES.toMillis(3))) {
                    query.stop();
                    throw new IllegalStateException("streaming run " + run + " did not finish in 3 minutes");
                }
                long rowsIn = 0;
                for (var progress : query.recentProgress()) {
                    rowsIn += progress.numInputRows();
                }
                System.out.println("RUN " + run + " rows=" + rowsIn);
            }
            System.out.println("SPARK JVM OK batch=" + rows.size() + " runs=2");
        } finally {
            spark.stop();
        }
    }
}
