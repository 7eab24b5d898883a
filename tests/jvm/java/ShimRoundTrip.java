import java.net.URI;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import org.apache.distributedlog.DLSN;
import org.apache.distributedlog.LogRecord;
import org.apache.distributedlog.api.DistributedLogManager;
import org.apache.distributedlog.api.LogWriter;
import org.apache.distributedlog.api.namespace.Namespace;

/**
 * Writes records through the shim with the sync writer, then with the async writer. The command line, the setup
 * and the async writes are ShimBench's ({@code ShimBench.Setup}, {@code ShimBench.writeAsync}; compile the two
 * together).
 *
 * <pre>
 * usage: java ShimRoundTrip &lt;uri&gt; &lt;log&gt; [nSync (10000)] [nAsync (10000)] [--warmup=N] [key=value ...]
 *   key=value: DistributedLog configuration of the namespace (for example periodicFlushFrequencyMilliSeconds=10)
 *   --warmup=N: first write N records with the async writer to the log &lt;log&gt;-warmup (not printed), so the
 *               T lines measure a warm JVM
 * txids continue after the log's last one (1, 2, ... for a new log); the payload of txid t is payload(t):
 *   empty when t % 1000 == 0, else the ASCII bytes of "java-&lt;t&gt;" followed by the 3 bytes 00 ff (t &amp; 0xff)
 * stdout:
 *   W &lt;txid&gt; -                  one per sync record, in write order (LogWriter.write returns no DLSN);
 *                                 flush() is called every 1000 records and at the end
 *   W &lt;txid&gt; &lt;lssn,entry,slot&gt;  one per async record, in write order: the DLSN its future completed with
 *   T sync &lt;records&gt; &lt;nanos&gt;    from the first sync write to the last flush() returning
 *   T async &lt;records&gt; &lt;nanos&gt;   from the first async write to every future completed (asyncClose() is
 *                                 called after the last write, which transmits what the writer buffers)
 *   LAST &lt;lssn,entry,slot&gt; &lt;lastTxId&gt; &lt;recordCount&gt;
 * Errors end the program with exit code 1 and "E &lt;exception class&gt; &lt;message&gt;" on stdout.
 * </pre>
 */
public final class ShimRoundTrip {

    static byte[] payload(long t) {
        if (t % 1000 == 0) {
            return new byte[0];
        }
        byte[] text = ("java-" + t).getBytes(StandardCharsets.US_ASCII);
        byte[] p = new byte[text.length + 3];
        System.arraycopy(text, 0, p, 0, text.length);
        p[text.length] = 0;
        p[text.length + 1] = (byte) 0xff;
        p[text.length + 2] = (byte) (t & 0xff);
        return p;
    }

    public static void main(String[] args) throws Exception {
        URI uri = URI.create(args[0]);
        String log = args[1];
        ShimBench.Setup setup = new ShimBench.Setup(args, 2, 0);
        List<String> pos = setup.positional;
        int nSync = pos.size() > 0 ? Integer.parseInt(pos.get(0)) : 10000;
        int nAsync = pos.size() > 1 ? Integer.parseInt(pos.get(1)) : 10000;
        StringBuilder out = new StringBuilder();
        try (Namespace ns = setup.open(uri)) {
            if (setup.warmup > 0) {
                DistributedLogManager wdlm = ns.openLog(log + "-warmup");
                long wt = ShimBench.nextTxId(ns, wdlm, log + "-warmup");
                ShimBench.writeAsync(wdlm, wt, setup.warmup, ShimRoundTrip::payload, new ArrayList<>());
                wdlm.close();
            }
            DistributedLogManager dlm = ns.openLog(log);
            long txid = ShimBench.nextTxId(ns, dlm, log);

            long t0 = System.nanoTime();
            LogWriter w = dlm.openLogWriter();
            for (int i = 0; i < nSync; i++, txid++) {
                w.write(new LogRecord(txid, payload(txid)));
                out.append("W ").append(txid).append(" -\n");
                if ((i + 1) % 1000 == 0) {
                    w.flush();
                }
            }
            w.flush();
            long syncNanos = System.nanoTime() - t0;
            w.close();

            long firstAsync = txid;
            List<CompletableFuture<DLSN>> acks = new ArrayList<>(nAsync);
            long asyncNanos = ShimBench.writeAsync(dlm, firstAsync, nAsync, ShimRoundTrip::payload, acks);
            for (int i = 0; i < nAsync; i++) {
                out.append("W ").append(firstAsync + i).append(' ').append(ShimBench.text(acks.get(i).get()))
                    .append('\n');
            }
            out.append("T sync ").append(nSync).append(' ').append(syncNanos).append('\n');
            out.append("T async ").append(nAsync).append(' ').append(asyncNanos).append('\n');
            out.append("LAST ").append(ShimBench.text(dlm.getLastDLSN())).append(' ').append(dlm.getLastTxId())
                .append(' ').append(dlm.getLogRecordCount()).append('\n');
            System.out.print(out);
            System.out.flush();
            dlm.close();
        } catch (Exception e) {
            System.out.print(out);
            ShimBench.fail(e);
        }
    }
}
