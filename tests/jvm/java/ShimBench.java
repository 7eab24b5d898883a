import java.io.IOException;
import java.net.URI;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ExecutionException;
import java.util.function.LongFunction;
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
 *
 * <p>{@link Setup}, {@link #writeAsync}, {@link #nextTxId}, {@link #text} and {@link #fail} are shared with
 * {@code ShimRoundTrip} (the tests compile every program of this directory together); they live here because
 * bench/bench_jvm.py compiles this file alone.
 */
public final class ShimBench {

    /**
     * The command line shared by ShimBench and ShimRoundTrip, after their leading positional arguments:
     * {@code --warmup=N}, {@code key=value} (DistributedLog configuration of the namespace), anything else positional.
     */
    static final class Setup {
        final DistributedLogConfiguration conf = new DistributedLogConfiguration();
        final List<String> positional = new ArrayList<>();
        int warmup;

        /** Parse {@code args[from..]}; {@code warmup} is the default of {@code --warmup}. */
        Setup(String[] args, int from, int warmup) {
            this.warmup = warmup;
            for (int i = from; i < args.length; i++) {
                int eq = args[i].indexOf('=');
                if (args[i].startsWith("--warmup=")) {
                    this.warmup = Integer.parseInt(args[i].substring(9));
                } else if (eq > 0) {
                    conf.setProperty(args[i].substring(0, eq), args[i].substring(eq + 1));
                } else {
                    positional.add(args[i]);
                }
            }
        }

        /** The namespace {@code uri}, with the configuration given (its own gateway process). */
        Namespace open(URI uri) throws IOException {
            return NamespaceBuilder.newBuilder().conf(conf).uri(uri).build();
        }
    }

    /** The transaction id after the last one of {@code log} (opened as {@code dlm}): 1 for a new or empty log. */
    static long nextTxId(Namespace ns, DistributedLogManager dlm, String log) throws IOException {
        return ns.logExists(log) && dlm.getLogRecordCount() > 0 ? dlm.getLastTxId() + 1 : 1;
    }

    /** {@code lssn,entry,slot}. */
    static String text(DLSN d) {
        return d.getLogSegmentSequenceNo() + "," + d.getEntryId() + "," + d.getSlotId();
    }

    /** End the program: "E &lt;exception class&gt; &lt;message&gt;" (of an ExecutionException's cause), exit code 1. */
    static void fail(Exception e) {
        Throwable c = e instanceof ExecutionException && e.getCause() != null ? e.getCause() : e;
        System.out.println("E " + c.getClass().getName() + " " + String.valueOf(c.getMessage()).replace('\n', ' '));
        System.out.flush();
        System.exit(1);
    }

    /**
     * Open an async writer of {@code dlm} and write {@code records} records with it, txids {@code firstTxId},
     * {@code firstTxId + 1}, ..., the payload of txid t being {@code payload(t)}: one write call per record, then
     * asyncClose() (which transmits what the writer buffers). Every write's future goes to {@code acks}.
     *
     * @return the nanoseconds from the first write to every write's future completed (writer open untimed)
     */
    static long writeAsync(DistributedLogManager dlm, long firstTxId, int records, LongFunction<byte[]> payload,
                           List<CompletableFuture<DLSN>> acks) throws Exception {
        AsyncLogWriter w = dlm.openAsyncLogWriter().get();
        long t0 = System.nanoTime();
        for (int i = 0; i < records; i++) {
            acks.add(w.write(new LogRecord(firstTxId + i, payload.apply(firstTxId + i))));
        }
        CompletableFuture<Void> closed = w.asyncClose();
        CompletableFuture.allOf(acks.toArray(new CompletableFuture<?>[0])).get();
        long nanos = System.nanoTime() - t0;
        closed.get();
        return nanos;
    }

    /** One round: {@code records} records to the new log {@code log}; its nanoseconds (last DLSN in {@code last}). */
    static long round(Namespace ns, String log, int records, byte[] payload, StringBuilder last) throws Exception {
        DistributedLogManager dlm = ns.openLog(log);
        List<CompletableFuture<DLSN>> acks = new ArrayList<>(records);
        long nanos = writeAsync(dlm, 1, records, t -> payload, acks);
        last.setLength(0);
        last.append(text(acks.get(records - 1).get()));
        dlm.close();
        return nanos;
    }

    public static void main(String[] args) throws Exception {
        URI uri = URI.create(args[0]);
        String prefix = args[1];
        int records = Integer.parseInt(args[2]);
        int size = Integer.parseInt(args[3]);
        int reps = Integer.parseInt(args[4]);
        Setup setup = new Setup(args, 5, records);
        if (!setup.positional.isEmpty()) {
            throw new IllegalArgumentException("unknown argument " + setup.positional.get(0));
        }
        byte[] payload = new byte[size];
        for (int i = 0; i < size; i++) {
            payload[i] = (byte) i;
        }
        StringBuilder last = new StringBuilder();
        try (Namespace ns = setup.open(uri)) {
            if (setup.warmup > 0) {
                round(ns, prefix + "-warmup", setup.warmup, payload, last);
            }
            for (int rep = 1; rep <= reps; rep++) {
                System.gc();
                long nanos = round(ns, prefix + "-" + rep, records, payload, last);
                System.out.println("RATE " + rep + " " + records + " " + nanos + " " + (records * 1e9 / nanos));
                System.out.println("LAST " + rep + " " + last);
                System.out.flush();
            }
        } catch (Exception e) {
            fail(e);
        }
    }
}
