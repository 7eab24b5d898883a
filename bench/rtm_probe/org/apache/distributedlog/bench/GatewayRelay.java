package org.apache.distributedlog.bench;

import java.net.URI;
import java.util.List;
import java.util.concurrent.TimeUnit;
import org.apache.distributedlog.DLSN;
import org.apache.distributedlog.DistributedLogConfiguration;
import org.apache.distributedlog.LogRecord;
import org.apache.distributedlog.LogRecordWithDLSN;
import org.apache.distributedlog.api.AsyncLogReader;
import org.apache.distributedlog.api.AsyncLogWriter;
import org.apache.distributedlog.api.DistributedLogManager;
import org.apache.distributedlog.api.namespace.Namespace;
import org.apache.distributedlog.api.namespace.NamespaceBuilder;
import org.apache.distributedlog.shim.Futures;

/**
 * The gateway relay without Spark: reads log IN from its start and appends each record to log OUT as it arrives,
 * through DistributedLog's Java API (the same reads and writes the real-time source and sink make), until SECONDS
 * pass with nothing to read. Usage: {@code GatewayRelay URI IN OUT SECONDS}.
 */
public final class GatewayRelay {
    private GatewayRelay() {
    }

    public static void main(String[] args) throws Exception {
        DistributedLogConfiguration conf = new DistributedLogConfiguration();
        conf.setProperty("writerOutputBufferSize", "0");
        conf.setProperty("enableImmediateFlush", "true");
        conf.setProperty("readAheadWaitTime", "2");
        long idleNanos = TimeUnit.SECONDS.toNanos(Long.parseLong(args[3]));
        try (Namespace ns = NamespaceBuilder.newBuilder().uri(URI.create(args[0])).conf(conf).clientId("relay").build()) {
            DistributedLogManager in = ns.openLog(args[1]);
            DistributedLogManager out = ns.openLog(args[2]);
            AsyncLogReader reader = Futures.result(in.openAsyncLogReader(DLSN.InitialDLSN));
            AsyncLogWriter writer = Futures.result(out.openAsyncLogWriter());
            System.out.println("RELAY ready");
            System.out.flush();
            long txid = 0;
            long last = System.nanoTime();
            while (System.nanoTime() - last < idleNanos) {
                List<LogRecordWithDLSN> got = Futures.result(reader.readBulk(1000, 5, TimeUnit.MILLISECONDS));
                if (got.isEmpty()) {
                    continue;
                }
                last = System.nanoTime();
                for (LogRecordWithDLSN r : got) {
                    writer.write(new LogRecord(++txid, r.getPayload()));
                }
            }
            Futures.result(writer.asyncClose());
            Futures.result(reader.asyncClose());
            System.out.println("RELAY done " + txid);
        }
    }
}
