package org.apache.distributedlog.examples;

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
import org.apache.distributedlog.api.namespace.Namespace;
import org.apache.distributedlog.api.namespace.NamespaceBuilder;

/**
 * Writes N records with DistributedLog's async writer, then reads them back with the async reader and prints
 * their DLSNs. Written against DistributedLog's Java API only; runs on the shim jar and py4j's jar:
 *
 * <pre>
 * java -cp distributedlog-shim.jar:py4j0.10.9.9.jar:. org.apache.distributedlog.examples.WriteReadExample \
 *     distributedlog-local:///tmp/example-ns [log-name] [N]
 * </pre>
 *
 * ({@code DLOG_PYTHON} names the Python that has this project installed; {@code python3} otherwise.)
 */
public final class WriteReadExample {

    private WriteReadExample() {
    }

    public static void main(String[] args) throws Exception {
        if (args.length < 1) {
            System.err.println("usage: WriteReadExample <namespace-uri> [log-name] [N]");
            System.exit(2);
        }
        URI uri = URI.create(args[0]);
        String logName = args.length > 1 ? args[1] : "example-log";
        int n = args.length > 2 ? Integer.parseInt(args[2]) : 10;

        // transmit buffered writes every 5 ms (half the period), so the futures complete without a flush
        DistributedLogConfiguration conf = new DistributedLogConfiguration()
            .setPeriodicFlushFrequencyMilliSeconds(10);

        try (Namespace namespace = NamespaceBuilder.newBuilder().conf(conf).uri(uri).build()) {
            DistributedLogManager dlm = namespace.openLog(logName);
            long firstTxId = namespace.logExists(logName) && dlm.getLogRecordCount() > 0 ? dlm.getLastTxId() + 1 : 1;

            // write
            AsyncLogWriter writer = dlm.openAsyncLogWriter().get();
            List<CompletableFuture<DLSN>> acks = new ArrayList<>(n);
            for (int i = 0; i < n; i++) {
                long txid = firstTxId + i;
                byte[] payload = ("record-" + txid).getBytes(StandardCharsets.UTF_8);
                acks.add(writer.write(new LogRecord(txid, payload)));
            }
            CompletableFuture.allOf(acks.toArray(new CompletableFuture<?>[0])).get();
            DLSN first = acks.get(0).get();
            for (int i = 0; i < n; i++) {
                System.out.println("wrote txid " + (firstTxId + i) + " at " + acks.get(i).get());
            }
            writer.asyncClose().get(); // commits: readers see the records

            // read back from the first DLSN written
            AsyncLogReader reader = dlm.openAsyncLogReader(first).get();
            int read = 0;
            while (read < n) {
                for (LogRecordWithDLSN r : reader.readBulk(n - read).get()) {
                    System.out.println("read txid " + r.getTransactionId() + " seq " + r.getSequenceId() + " at "
                        + r.getDlsn() + ": " + new String(r.getPayload(), StandardCharsets.UTF_8));
                    read++;
                }
            }
            reader.asyncClose().get();
            System.out.println("last DLSN " + dlm.getLastDLSN() + ", " + dlm.getLogRecordCount() + " records");
            dlm.close();
        }
    }
}
