import java.net.URI;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import org.apache.distributedlog.DLSN;
import org.apache.distributedlog.DistributedLogConfiguration;
import org.apache.distributedlog.LogRecord;
import org.apache.distributedlog.api.AsyncLogWriter;
import org.apache.distributedlog.api.DistributedLogManager;
import org.apache.distributedlog.api.namespace.Namespace;
import org.apache.distributedlog.api.namespace.NamespaceBuilder;
import org.apache.distributedlog.shim.ShimNamespace;

/**
 * Takes the write ownership of a log and holds it until killed.
 *
 * <pre>
 * usage: java ShimOwnership &lt;uri&gt; &lt;log&gt; [--records=N (100)] [--every-ms=M] [key=value ...]
 *   key=value: DistributedLog configuration of the namespace; periodicFlushFrequencyMilliSeconds defaults to 10
 *   here (so writes are acknowledged without a flush)
 * txids continue after the log's last one; the payload of txid t is the ASCII bytes of "own-&lt;t&gt;".
 * stdout (flushed line by line):
 *   GATEWAY &lt;pid&gt;               the gateway process this JVM started (-1: a running gateway was used)
 *   ACK &lt;txid&gt; &lt;lssn,entry,slot&gt;   one per record, once durable (acknowledged), in order
 *   HOLDING                      after the first N records are acknowledged; the writer stays open
 * With --every-ms, after HOLDING one more record is written every M ms (more ACK lines) until the process is
 * killed; without it the program sleeps until killed. If the writer cannot be opened:
 *   E &lt;exception class&gt; &lt;message&gt;   and exit code 1.
 * </pre>
 */
public final class ShimOwnership {

    public static void main(String[] args) throws Exception {
        URI uri = URI.create(args[0]);
        String log = args[1];
        int records = 100;
        long everyMs = -1;
        DistributedLogConfiguration conf = new DistributedLogConfiguration();
        conf.setPeriodicFlushFrequencyMilliSeconds(10);
        for (int i = 2; i < args.length; i++) {
            String a = args[i];
            if (a.startsWith("--records=")) {
                records = Integer.parseInt(a.substring(10));
            } else if (a.startsWith("--every-ms=")) {
                everyMs = Long.parseLong(a.substring(11));
            } else if (a.indexOf('=') > 0) {
                conf.setProperty(a.substring(0, a.indexOf('=')), a.substring(a.indexOf('=') + 1));
            } else {
                throw new IllegalArgumentException("unknown argument " + a);
            }
        }
        Namespace ns = NamespaceBuilder.newBuilder().conf(conf).uri(uri).build();
        System.out.println("GATEWAY " + (ns instanceof ShimNamespace ? ((ShimNamespace) ns).getGatewayPid() : -1));
        System.out.flush();
        DistributedLogManager dlm = ns.openLog(log);
        AsyncLogWriter w;
        long txid;
        try {
            txid = ns.logExists(log) && dlm.getLogRecordCount() > 0 ? dlm.getLastTxId() + 1 : 1;
            w = dlm.openAsyncLogWriter().get();
        } catch (Exception e) {
            Throwable c = e instanceof java.util.concurrent.ExecutionException ? e.getCause() : e;
            System.out.println("E " + c.getClass().getName() + " " + String.valueOf(c.getMessage()).replace('\n', ' '));
            System.out.flush();
            ns.close();
            System.exit(1);
            return;
        }
        List<CompletableFuture<DLSN>> acks = new ArrayList<>();
        long first = txid;
        for (int i = 0; i < records; i++, txid++) {
            acks.add(w.write(new LogRecord(txid, ("own-" + txid).getBytes(StandardCharsets.US_ASCII))));
        }
        for (int i = 0; i < records; i++) {
            ack(first + i, acks.get(i).get());
        }
        System.out.println("HOLDING");
        System.out.flush();
        if (everyMs > 0) {
            while (true) {
                Thread.sleep(everyMs);
                write(w, txid++);
            }
        }
        Thread.sleep(Long.MAX_VALUE);
    }

    static void write(AsyncLogWriter w, long txid) throws Exception {
        ack(txid, w.write(new LogRecord(txid, ("own-" + txid).getBytes(StandardCharsets.US_ASCII))).get());
    }

    static void ack(long txid, DLSN d) {
        System.out.println("ACK " + txid + " " + d.getLogSegmentSequenceNo() + "," + d.getEntryId() + ","
            + d.getSlotId());
        System.out.flush();
    }
}
