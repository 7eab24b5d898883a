/*
 * A Java program on DistributedLog's Java API, backed by this project's Python storage core through the
 * jvm_shim gateway: it writes a log with the sync LogWriter and the AsyncLogWriter, reads it back with the
 * LogReader (and an AsyncLogReader from a transaction id), and checks what it read. The same log is then
 * readable from Python (storage.open_namespace(uri).open_log(name)), `dlog`, and Spark.
 *
 * Compile and run, from the checkout (JDK 17+; `make jvm` or `pip install .` builds the shim jar):
 *
 *   SHIM=$(.venv/bin/python -c "import jvm_shim; print(jvm_shim.jar_path())")
 *   PY4J=$(.venv/bin/python -c "import jvm_shim; print(jvm_shim.py4j_jar())")
 *   javac --release 17 -cp "$SHIM" -d /tmp/log-example examples/java/LogExample.java
 *   DLOG_PYTHON=.venv/bin/python java -cp "$SHIM:$PY4J:/tmp/log-example" \
 *       LogExample distributedlog-local:///tmp/java-example-ns events 1000
 *
 * DLOG_PYTHON names the Python that has this project installed (else PYSPARK_PYTHON, else python3); the
 * Namespace starts its own gateway process with it and stops it on close(). With DLOG_GATEWAY=host:port and
 * DLOG_GATEWAY_TOKEN set it uses a running `dlog gateway` instead.
 *
 * Prints "SUMMARY OK records=<2N> ..." when every record read back is the one written, in order.
 */

import java.net.URI;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import org.apache.distributedlog.DLSN;
import org.apache.distributedlog.DistributedLogConfiguration;
import org.apache.distributedlog.LogRecord;
import org.apache.distributedlog.LogRecordWithDLSN;
import org.apache.distributedlog.api.AsyncLogReader;
import org.apache.distributedlog.api.AsyncLogWriter;
import org.apache.distributedlog.api.DistributedLogManager;
import org.apache.distributedlog.api.LogReader;
import org.apache.distributedlog.api.LogWriter;
import org.apache.distributedlog.api.namespace.Namespace;
import org.apache.distributedlog.api.namespace.NamespaceBuilder;

public final class LogExample {

    private LogExample() {
    }

    public static void main(String[] args) throws Exception {
        if (args.length < 1) {
            System.err.println("usage: LogExample <namespace-uri> [log-name] [N]");
            System.exit(2);
        }
        URI uri = URI.create(args[0]);
        String logName = args.length > 1 ? args[1] : "events";
        int n = args.length > 2 ? Integer.parseInt(args[2]) : 1000;

        // the async writer's buffered records go out every 10 ms, so its futures complete without a flush
        DistributedLogConfiguration conf = new DistributedLogConfiguration()
            .setPeriodicFlushFrequencyMilliSeconds(10);

        try (Namespace namespace = NamespaceBuilder.newBuilder().conf(conf).uri(uri).build()) {
            if (namespace.logExists(logName)) {
                System.err.println("log " + logName + " already exists in " + uri + ": use a new log or namespace");
                System.exit(1);
            }
            namespace.createLog(logName);
            DistributedLogManager dlm = namespace.openLog(logName);

            // 1. the sync writer: write, then flush + commit makes the records durable and visible
            List<String> expected = new ArrayList<>(2 * n);
            LogWriter writer = dlm.startLogSegmentNonPartitioned();
            for (int i = 1; i <= n; i++) {
                String payload = "sync-" + i;
                writer.write(new LogRecord(i, payload.getBytes(StandardCharsets.UTF_8)));
                expected.add(payload);
            }
            writer.flush();
            writer.commit();
            writer.close();

            // 2. the async writer: each write returns a future of the record's DLSN
            AsyncLogWriter asyncWriter = dlm.openAsyncLogWriter().get();
            List<CompletableFuture<DLSN>> acks = new ArrayList<>(n);
            for (int i = 1; i <= n; i++) {
                String payload = "async-" + i;
                acks.add(asyncWriter.write(new LogRecord(n + i, payload.getBytes(StandardCharsets.UTF_8))));
                expected.add(payload);
            }
            CompletableFuture.allOf(acks.toArray(new CompletableFuture<?>[0])).get();
            DLSN firstAsync = acks.get(0).get();
            asyncWriter.asyncClose().get(); // completes the segment: readers see every record
            System.out.println("wrote " + (2 * n) + " records; the first async one at " + firstAsync
                + " (serialized " + firstAsync.serialize() + ")");

            // 3. the sync reader, from the first record: records, txids and sequence ids in order
            List<String> read = new ArrayList<>(2 * n);
            boolean ordered = true;
            try (LogReader reader = dlm.openLogReader(DLSN.InitialDLSN)) {
                while (read.size() < 2 * n) {
                    for (LogRecordWithDLSN r : reader.readBulk(false, 500)) {
                        ordered &= r.getTransactionId() == read.size() + 1 && r.getSequenceId() == read.size();
                        read.add(new String(r.getPayload(), StandardCharsets.UTF_8));
                    }
                }
            }

            // 4. the async reader, positioned by transaction id at the first async record
            AsyncLogReader asyncReader = dlm.openAsyncLogReader(n + 1).get();
            LogRecordWithDLSN first = asyncReader.readNext().get();
            asyncReader.asyncClose().get();
            System.out.println("txid " + first.getTransactionId() + " is at " + first.getDlsn() + ": "
                + new String(first.getPayload(), StandardCharsets.UTF_8));

            boolean ok = read.equals(expected) && ordered && first.getDlsn().equals(firstAsync)
                && dlm.getLogRecordCount() == 2 * n && dlm.getLastTxId() == 2 * n;
            System.out.println("last DLSN " + dlm.getLastDLSN() + ", last txid " + dlm.getLastTxId() + ", "
                + dlm.getLogRecordCount() + " records");
            dlm.close();
            System.out.println((ok ? "SUMMARY OK" : "SUMMARY MISMATCH") + " records=" + read.size()
                + " in order: " + ordered);
            if (!ok) {
                System.exit(1);
            }
        }
    }
}
