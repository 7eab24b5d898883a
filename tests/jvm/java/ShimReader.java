import java.net.URI;
import java.util.List;
import java.util.concurrent.ExecutionException;
import org.apache.distributedlog.DLSN;
import org.apache.distributedlog.DistributedLogConfiguration;
import org.apache.distributedlog.LogRecordWithDLSN;
import org.apache.distributedlog.api.AsyncLogReader;
import org.apache.distributedlog.api.DistributedLogManager;
import org.apache.distributedlog.api.LogReader;
import org.apache.distributedlog.api.namespace.Namespace;
import org.apache.distributedlog.api.namespace.NamespaceBuilder;
import org.apache.distributedlog.exceptions.EndOfStreamException;

/**
 * Reads a log through the shim and prints every record.
 *
 * <pre>
 * usage: java ShimReader &lt;uri&gt; &lt;log&gt; [--from=lssn,entry,slot | --from=txid:N | --from=b64:BASE64]
 *                        [--max=N] [--async] [key=value ...]
 *   --from   where to start (default 1,0,0 = DLSN.InitialDLSN); b64: is DLSN.deserialize's form
 *   --max    stop after N records (required with --async); without it, a sync read stops at the first blocking
 *            read that returns nothing (caught up)
 *   --async  read with AsyncLogReader.readBulk instead of LogReader.readBulk
 *   key=value: DistributedLog configuration of the namespace
 * stdout:
 *   R &lt;txid&gt; &lt;sequenceId&gt; &lt;lssn,entry,slot&gt; &lt;payload as lowercase hex, "-" if empty&gt;   one per record
 *   EOS                     the reader reached the end-of-stream marker (EndOfStreamException)
 *   END &lt;records read&gt;
 * Other errors: "E &lt;exception class&gt; &lt;message&gt;" and exit code 1.
 * </pre>
 */
public final class ShimReader {

    static StringBuilder out = new StringBuilder();
    static int count;

    static void print(List<LogRecordWithDLSN> recs) {
        for (LogRecordWithDLSN r : recs) {
            DLSN d = r.getDlsn();
            out.append("R ").append(r.getTransactionId()).append(' ').append(r.getSequenceId()).append(' ')
                .append(d.getLogSegmentSequenceNo()).append(',').append(d.getEntryId()).append(',')
                .append(d.getSlotId()).append(' ');
            byte[] p = r.getPayload();
            if (p.length == 0) {
                out.append('-');
            }
            for (byte b : p) {
                out.append(Character.forDigit((b >> 4) & 0xF, 16)).append(Character.forDigit(b & 0xF, 16));
            }
            out.append('\n');
            count++;
        }
        if (out.length() > 1 << 16) {
            System.out.print(out);
            out.setLength(0);
        }
    }

    public static void main(String[] args) throws Exception {
        URI uri = URI.create(args[0]);
        String log = args[1];
        String from = "1,0,0";
        long max = -1;
        boolean async = false;
        DistributedLogConfiguration conf = new DistributedLogConfiguration();
        for (int i = 2; i < args.length; i++) {
            String a = args[i];
            if (a.startsWith("--from=")) {
                from = a.substring(7);
            } else if (a.startsWith("--max=")) {
                max = Long.parseLong(a.substring(6));
            } else if (a.equals("--async")) {
                async = true;
            } else if (a.indexOf('=') > 0) {
                conf.setProperty(a.substring(0, a.indexOf('=')), a.substring(a.indexOf('=') + 1));
            } else {
                throw new IllegalArgumentException("unknown argument " + a);
            }
        }
        if (async && max < 0) {
            throw new IllegalArgumentException("--async needs --max");
        }
        int code = 0;
        try (Namespace ns = NamespaceBuilder.newBuilder().conf(conf).uri(uri).build()) {
            DistributedLogManager dlm = ns.openLog(log);
            Long txid = null;
            DLSN dlsn = null;
            if (from.startsWith("txid:")) {
                txid = Long.parseLong(from.substring(5));
            } else if (from.startsWith("b64:")) {
                dlsn = DLSN.deserialize(from.substring(4));
            } else {
                String[] p = from.split(",");
                dlsn = new DLSN(Long.parseLong(p[0]), Long.parseLong(p[1]), Long.parseLong(p[2]));
            }
            try {
                if (async) {
                    AsyncLogReader r = txid != null ? dlm.openAsyncLogReader(txid).get()
                                                    : dlm.openAsyncLogReader(dlsn).get();
                    try {
                        while (count < max) {
                            print(r.readBulk((int) Math.min(1000, max - count)).get());
                        }
                    } finally {
                        r.asyncClose().get();
                    }
                } else {
                    LogReader r = txid != null ? dlm.openLogReader(txid) : dlm.openLogReader(dlsn);
                    try {
                        while (max < 0 || count < max) {
                            List<LogRecordWithDLSN> recs = r.readBulk(false, (int) (max < 0 ? 1000
                                                                                 : Math.min(1000, max - count)));
                            if (recs.isEmpty()) {
                                break;
                            }
                            print(recs);
                        }
                    } finally {
                        r.close();
                    }
                }
            } catch (EndOfStreamException | ExecutionException e) {
                Throwable c = e instanceof ExecutionException ? e.getCause() : e;
                if (!(c instanceof EndOfStreamException)) {
                    throw c instanceof Exception ? (Exception) c : e;
                }
                out.append("EOS\n");
            }
            dlm.close();
        } catch (Exception e) {
            out.append("E ").append(e.getClass().getName()).append(' ')
                .append(String.valueOf(e.getMessage()).replace('\n', ' ')).append('\n');
            code = 1;
        }
        out.append("END ").append(count).append('\n');
        System.out.print(out);
        System.out.flush();
        System.exit(code);
    }
}
