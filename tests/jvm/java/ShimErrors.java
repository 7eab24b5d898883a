import java.net.URI;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.ExecutionException;
import org.apache.distributedlog.DLSN;
import org.apache.distributedlog.DistributedLogConfiguration;
import org.apache.distributedlog.LogRecord;
import org.apache.distributedlog.api.AsyncLogWriter;
import org.apache.distributedlog.api.DistributedLogManager;
import org.apache.distributedlog.api.LogReader;
import org.apache.distributedlog.api.LogWriter;
import org.apache.distributedlog.api.namespace.Namespace;
import org.apache.distributedlog.api.namespace.NamespaceBuilder;
import org.apache.distributedlog.exceptions.DLException;
import org.apache.distributedlog.exceptions.OwnershipAcquireFailedException;
import org.apache.distributedlog.exceptions.TransactionIdOutOfOrderException;
import org.apache.distributedlog.shim.RemoteError;

/**
 * Triggers errors of the Python storage core through the shim and prints the Java exception each arrives as.
 *
 * <pre>
 * usage: java ShimErrors &lt;uri&gt; [prefix (errs)]       (the namespace should be new or empty; logs are named
 *                                                    &lt;prefix&gt;-&lt;case&gt;)
 * stdout, one line per case, in this order:
 *   E &lt;case&gt; &lt;Java exception class&gt; &lt;Python class or -&gt; &lt;code or -&gt; &lt;message&gt;
 *       Python class and code come from DLException.getRemoteError() ("-" when the exception was raised on the
 *       Java side or is not a DLException); newlines in the message are replaced by spaces
 *   NOERROR &lt;case&gt;     the case raised nothing
 *   D &lt;case&gt; &lt;getter&gt;=&lt;value&gt; ...   after the E line of an exception with detail getters:
 *       OwnershipAcquireFailedException: currentOwner=&lt;getCurrentOwner()&gt;
 *       TransactionIdOutOfOrderException: txnId=&lt;getTxnId()&gt; lastTxnId=&lt;getLastTxnId()&gt;
 * cases:
 *   invalid-name        Namespace.createLog("bad name")                      (space in the name)
 *   log-not-found       Namespace.deleteLog of a log that does not exist
 *   log-exists          Namespace.createLog twice
 *   log-empty           DistributedLogManager.getLastDLSN of a created, empty log
 *   ownership           a second writer on a held log (lockTimeoutSeconds=0 on the namespace)
 *   txid-out-of-order   sync writer: write txid 10, then txid 5, then flush()
 *   record-too-long     sync writer: a 2 MiB record, then flush()
 *   write-after-eos     markEndOfStream(), then a new writer writes
 *   read-after-eos      a reader reads past the end-of-stream marker
 *   negative-txid       DistributedLogManager.openLogReader(-1)            (Python InvalidArgumentError)
 *   invalid-config      NamespaceBuilder.build() with the unknown key noSuchKey (Python InvalidConfigError)
 *   closed-writer       write on a closed async writer                       (raised on the Java side)
 * </pre>
 */
public final class ShimErrors {

    interface Case {
        void run() throws Exception;
    }

    static final List<String> LINES = new ArrayList<>();

    static void check(String name, Case c) {
        try {
            c.run();
            LINES.add("NOERROR " + name);
        } catch (Throwable t) {
            while ((t instanceof ExecutionException || t instanceof java.util.concurrent.CompletionException)
                   && t.getCause() != null) {
                t = t.getCause();
            }
            String py = "-";
            String code = "-";
            if (t instanceof DLException) {
                RemoteError r = ((DLException) t).getRemoteError();
                if (r != null) {
                    py = r.getPythonClass();
                }
                code = String.valueOf(((DLException) t).getCode());
            }
            LINES.add("E " + name + " " + t.getClass().getName() + " " + py + " " + code + " "
                + String.valueOf(t.getMessage()).replace('\n', ' '));
            System.out.println(LINES.get(LINES.size() - 1));
            if (t instanceof OwnershipAcquireFailedException) {
                LINES.add("D " + name + " currentOwner=" + ((OwnershipAcquireFailedException) t).getCurrentOwner());
            } else if (t instanceof TransactionIdOutOfOrderException) {
                TransactionIdOutOfOrderException x = (TransactionIdOutOfOrderException) t;
                LINES.add("D " + name + " txnId=" + x.getTxnId() + " lastTxnId=" + x.getLastTxnId());
            } else {
                System.out.flush();
                return;
            }
        }
        System.out.println(LINES.get(LINES.size() - 1));
        System.out.flush();
    }

    public static void main(String[] args) throws Exception {
        URI uri = URI.create(args[0]);
        String p = args.length > 1 ? args[1] : "errs";
        DistributedLogConfiguration conf = new DistributedLogConfiguration().setLockTimeout(0)
            .setPeriodicFlushFrequencyMilliSeconds(10);
        try (Namespace ns = NamespaceBuilder.newBuilder().conf(conf).uri(uri).build()) {
            check("invalid-name", () -> ns.createLog("bad name"));
            check("log-not-found", () -> ns.deleteLog(p + "-missing"));
            check("log-exists", () -> {
                ns.createLog(p + "-exists");
                ns.createLog(p + "-exists");
            });
            check("log-empty", () -> {
                ns.createLog(p + "-empty");
                ns.openLog(p + "-empty").getLastDLSN();
            });
            check("ownership", () -> {
                DistributedLogManager a = ns.openLog(p + "-owned");
                LogWriter w = a.openLogWriter();
                w.write(new LogRecord(1, new byte[] {1}));
                w.flush();
                try {
                    ns.openLog(p + "-owned").openLogWriter();
                } finally {
                    w.close();
                }
            });
            check("txid-out-of-order", () -> {
                LogWriter w = ns.openLog(p + "-order").openLogWriter();
                try {
                    w.write(new LogRecord(10, new byte[] {1}));
                    w.write(new LogRecord(5, new byte[] {2}));
                    w.flush();
                } finally {
                    w.close();
                }
            });
            check("record-too-long", () -> {
                LogWriter w = ns.openLog(p + "-long").openLogWriter();
                try {
                    w.write(new LogRecord(1, new byte[2 << 20]));
                    w.flush();
                } finally {
                    w.close();
                }
            });
            check("write-after-eos", () -> {
                DistributedLogManager d = ns.openLog(p + "-eos");
                LogWriter w = d.openLogWriter();
                w.write(new LogRecord(1, new byte[] {1}));
                w.markEndOfStream();
                AsyncLogWriter w2 = d.openAsyncLogWriter().get();
                try {
                    w2.write(new LogRecord(2, new byte[] {2})).get();
                } finally {
                    w2.asyncClose().get();
                }
            });
            check("read-after-eos", () -> {
                LogReader r = ns.openLog(p + "-eos").openLogReader(DLSN.InitialDLSN);
                try {
                    for (int i = 0; i < 10; i++) {
                        r.readNext(false);
                    }
                } finally {
                    r.close();
                }
            });
            check("negative-txid", () -> ns.openLog(p + "-order").openLogReader(-1L).close());
            check("invalid-config", () -> {
                DistributedLogConfiguration bad = new DistributedLogConfiguration();
                bad.setProperty("noSuchKey", 1);
                NamespaceBuilder.newBuilder().conf(bad).uri(uri).build().close();
            });
            check("closed-writer", () -> {
                AsyncLogWriter w = ns.openLog(p + "-closed").openAsyncLogWriter().get();
                w.asyncClose().get();
                w.write(new LogRecord(1, new byte[] {1})).get();
            });
        }
    }
}
