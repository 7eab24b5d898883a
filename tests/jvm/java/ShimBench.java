import java.net.URI;
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

/**
 * Times async writes through the shim, in a warm JVM (bench/bench_jvm.py).
 *
 * <pre>
 * usage: java ShimBench &lt;uri&gt; &lt;log prefix&gt; &lt;records&gt; &lt;record bytes&gt; &lt;reps&gt; [--warmup=N (records)]
 *                       [key=value ...]
 *   key=value: DistributedLog configuration of the namespace (for example writerOutputBufferSize=65536)
 * Every round writes &lt;records&gt; records of &lt;record bytes&gt; bytes (txids 1..N, the same payload: bytes i % 256)
 * to a new log &lt;prefix&gt;-warmup (the warm-up, N = --warmup, not timed; default: &lt;records&gt;) or &lt;prefix&gt;-&lt;rep&gt;
 * with AsyncLogWriter.write, one call per record; asyncClose() after the last write transmits what the writer
 * buffers. A round's time runs from the first write to every write's future completed (writer open untimed).
 * stdout:
 *   RATE &lt;rep&gt; &lt;records&gt; &lt;nanos&gt; &lt;records/s&gt;    one per timed round (rep 1..reps)
 *   LAST &lt;rep&gt; &lt;lssn,entry,slot&gt;                 the last record's DLSN of that round
 * Errors end the program with exit code 1 and "E &lt;exception class&gt; &lt;message&gt;" on stdout.
 * </pre>
 */
public final class ShimBench {

    static long round(Namespace ns, String log, int records, byte[] payload, StringBuilder last) throws Exception {
        DistributedLogManager dlm = ns.openLog(log);
        AsyncLogWriter w = dlm.openAsyncLogWriter().get();
        List<CompletableFuture<DLSN>> acks = new ArrayList<>(records);
        long t0 = System.nanoTime();
        for (int i = 0; i < records; i++) {
            acks.add(w.write(new LogRecord(i + 1, payload)));
        }
        CompletableFuture<Void> closed = w.asyncClose();
        CompletableFuture.allOf(acks.toArray(new CompletableFuture<?>[0])).get();
        long nanos = System.nanoTime() - t0;
        closed.get();
        DLSN d = acks.get(records - 1).get();
        last.setLength(0);
        last.append(d.getLogSegmentSequenceNo()).append(',').append(d.getEntryId()).append(',').append(d.getSlotId());
        dlm.close();
        return nanos;
    }

    public static void main(String[] args) throws Exception {
        URI uri = URI.create(args[0]);
        String prefix = args[1];
        int records = Integer.parseInt(args[2]);
        int size = Integer.parseInt(args[3]);
        int reps = Integer.parseInt(args[4]);
        int warmup = records;
        DistributedLogConfiguration conf = new DistributedLogConfiguration();
        for (int i = 5; i < args.length; i++) {
            int eq = args[i].indexOf('=');
            if (args[i].startsWith("--warmup=")) {
                warmup = Integer.parseInt(args[i].substring(9));
            } else if (eq > 0) {
                conf.setProperty(args[i].substring(0, eq), args[i].substring(eq + 1));
            } else {
                throw new IllegalArgumentException("unknown argument " + args[i]);
            }
        }
        byte[] payload = new byte[size];
        for (int i = 0; i < size; i++) {
            payload[i] = (byte) i;
        }
        StringBuilder last = new StringBuilder();
        try (Namespace ns = NamespaceBuilder.newBuilder().conf(conf).uri(uri).build()) {
            if (warmup > 0) {
                round(ns, prefix + "-warmup", warmup, payload, last);
            }
            for (int rep = 1; rep <= reps; rep++) {
                System.gc();
                long nanos = round(ns, prefix + "-" + rep, records, payload, last);
                System.out.println("RATE " + rep + " " + records + " " + nanos + " " + (records * 1e9 / nanos));
                System.out.println("LAST " + rep + " " + last);
                System.out.flush();
            }
        } catch (Exception e) {
            Throwable c = e instanceof java.util.concurrent.ExecutionException && e.getCause() != null ? e.getCause() : e;
            System.out.println("E " + c.getClass().getName() + " " + String.valueOf(c.getMessage()).replace('\n', ' '));
            System.out.flush();
            System.exit(1);
        }
    }
}
