package org.apache.distributedlog.spark.rt;

import java.io.IOException;
import java.io.InterruptedIOException;
import java.io.UncheckedIOException;
import java.nio.charset.StandardCharsets;
import java.util.HashMap;
import java.util.Locale;
import java.util.Map;
import java.util.TreeMap;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.Executors;
import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.TimeUnit;
import org.apache.distributedlog.DLSN;
import org.apache.distributedlog.LogRecord;
import org.apache.distributedlog.api.AsyncLogWriter;
import org.apache.distributedlog.api.DistributedLogManager;
import org.apache.distributedlog.exceptions.LogEmptyException;
import org.apache.distributedlog.exceptions.LogNotFoundException;
import org.apache.distributedlog.exceptions.OwnershipAcquireFailedException;
import org.apache.distributedlog.shim.Futures;
import org.apache.spark.sql.Dataset;
import org.apache.spark.sql.ForeachWriter;
import org.apache.spark.sql.Row;
import org.apache.spark.sql.catalyst.plans.logical.LogicalPlan;
import org.apache.spark.sql.catalyst.streaming.StreamingRelationV2;
import org.apache.spark.sql.types.BinaryType;
import org.apache.spark.sql.types.DataType;
import org.apache.spark.sql.types.LongType;
import org.apache.spark.sql.types.StringType;
import org.apache.spark.sql.types.StructField;
import org.apache.spark.sql.types.StructType;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * A Spark {@link ForeachWriter} that appends each row's {@code value} to one DistributedLog log as the row arrives:
 * the sink of a Real-Time Mode query ({@code df.writeStream().foreach(writer)}, a sink Real-Time Mode allows), and
 * of plain micro-batch queries too.
 *
 * <p><b>Exactly once</b> (the default) for a stateless query that reads one source log with
 * {@code format("distributedlog-rt")} (or {@code format("distributedlog")}) and gives at most one output row per
 * input record, in the source's order: the output record's transaction id is the input record's
 * {@code sequence_id} (its position in the source log: 0, 1, 2...). When a task opens the output log's writer it
 * takes the log's lock (DistributedLog's one writer per log; the writer of an earlier attempt whose lock is gone is
 * fenced when the in-progress segment is recovered), reads the output log's last transaction id and from then on
 * skips every row whose sequence id is not above it: those records were written by an earlier attempt, whose batch
 * the checkpoint did not record. Each write is sent at once ({@code writerOutputBufferSize=0},
 * {@code enableImmediateFlush=true} unless given as {@code dlog.} options) and every record is acknowledged durable
 * before the task's {@code close} returns.
 *
 * <p>The writer stays open between tasks (a static cache per executor JVM, keyed by namespace, configuration and
 * log), so a Real-Time Mode batch boundary costs no lock round-trip; it is closed when no task used it for
 * {@code writerIdleTimeoutMs} (default {@value #DEFAULT_IDLE_MS} ms), after a task failed, or after a write failed
 * (the next task opens it again, recovering the log).
 *
 * <p>Options (names case-insensitive): {@code atLeastOnce} ({@code true}: write every row, txid = the larger of the
 * output log's last txid and the current time in milliseconds; rows may be written again after a restart; needed
 * for several source logs into one log, and for rows without {@code sequence_id}), {@code writerIdleTimeoutMs},
 * {@code dlog.<key>} (DistributedLog configuration of the namespace the writer opens).
 */
public final class DistributedLogForeachWriter extends ForeachWriter<Row> {

    private static final long serialVersionUID = 1L;
    private static final Logger LOG = LoggerFactory.getLogger(DistributedLogForeachWriter.class);

    /** Option: {@code true} to write every row (at least once), e.g. the rows of several source logs. */
    public static final String AT_LEAST_ONCE = "atLeastOnce";
    /** Option: how long an unused writer stays open between tasks, in milliseconds. */
    public static final String WRITER_IDLE_TIMEOUT_MS = "writerIdleTimeoutMs";
    static final long DEFAULT_IDLE_MS = 10_000L;
    /** How long a task waits for another task of this JVM to release the log when lockTimeoutSeconds is not set. */
    static final long DEFAULT_WAIT_MS = 30_000L;

    private static final String VALUE = "value";
    private static final String STREAM = "stream";
    private static final String SEQUENCE_ID = "sequence_id";

    /** The writers of this JVM, by namespace URI, configuration and log; an entry is never removed. */
    private static final Map<String, Slot> SLOTS = new ConcurrentHashMap<>();
    private static final ScheduledExecutorService IDLE = Executors.newSingleThreadScheduledExecutor(r -> {
        Thread t = new Thread(r, "dlog-rt-sink-idle");
        t.setDaemon(true);
        return t;
    });

    private final String uri;
    private final String log;
    private final HashMap<String, String> conf;
    private final boolean atLeastOnce;
    private final long idleMs;
    private final long waitMs;
    private final int valueIndex;
    private final boolean valueIsString;
    private final int streamIndex;
    private final int sequenceIndex;

    private transient Slot slot;
    private transient String taskStream;
    private transient long taskLastSequence;
    private transient long skipped;

    /**
     * A writer of the log {@code log} of the namespace {@code uri} for rows of {@code schema}.
     *
     * @param options {@code atLeastOnce}, {@code writerIdleTimeoutMs}, {@code dlog.<key>}; may be null
     * @throws IllegalArgumentException an unknown or bad option, no {@code value} column of type binary or string,
     *     or (exactly once) no {@code stream} string column or {@code sequence_id} bigint column
     */
    public DistributedLogForeachWriter(String uri, String log, StructType schema, Map<String, String> options) {
        if (uri == null || uri.isBlank()) {
            throw new IllegalArgumentException("the namespace URI of the output log is required");
        }
        if (log == null || log.isBlank()) {
            throw new IllegalArgumentException("the name of the output log is required");
        }
        this.uri = uri;
        this.log = log;
        TreeMap<String, String> dlog = new TreeMap<>();
        dlog.put("writerOutputBufferSize", "0");
        dlog.put("enableImmediateFlush", "true");
        boolean atLeast = false;
        long idle = DEFAULT_IDLE_MS;
        for (Map.Entry<String, String> e : (options == null ? Map.<String, String>of() : options).entrySet()) {
            String key = e.getKey();
            String low = key.toLowerCase(Locale.ROOT);
            String v = e.getValue() == null ? "" : e.getValue().trim();
            if (low.startsWith("dlog.") && key.length() > 5) {
                dlog.put(key.substring(5), v);
            } else if (low.equals(AT_LEAST_ONCE.toLowerCase(Locale.ROOT))) {
                if (!v.equalsIgnoreCase("true") && !v.equalsIgnoreCase("false")) {
                    throw new IllegalArgumentException("option atLeastOnce must be 'true' or 'false', got '" + v + "'");
                }
                atLeast = v.equalsIgnoreCase("true");
            } else if (low.equals(WRITER_IDLE_TIMEOUT_MS.toLowerCase(Locale.ROOT))) {
                try {
                    idle = Long.parseLong(v);
                } catch (NumberFormatException ex) {
                    idle = -1;
                }
                if (idle < 0) {
                    throw new IllegalArgumentException("option writerIdleTimeoutMs must be an integer >= 0, got '"
                        + v + "'");
                }
            } else {
                throw new IllegalArgumentException("unknown option " + key + " of the distributedlog-rt sink (options: "
                    + AT_LEAST_ONCE + ", " + WRITER_IDLE_TIMEOUT_MS + ", dlog.<key>)");
            }
        }
        if (!dlog.get("writerOutputBufferSize").equals("0") && positive(dlog.get("periodicFlushFrequencyMilliSeconds"))
                == 0) {
            throw new IllegalArgumentException("option dlog.writerOutputBufferSize other than 0 needs "
                + "dlog.periodicFlushFrequencyMilliSeconds > 0: the last rows of a batch would wait for more rows");
        }
        this.conf = new HashMap<>(dlog);
        this.atLeastOnce = atLeast;
        this.idleMs = idle;
        this.waitMs = waitMillis(dlog.get("lockTimeoutSeconds"));

        StructField value = field(schema, VALUE);
        if (value == null || !(value.dataType() instanceof BinaryType || value.dataType() instanceof StringType)) {
            throw new IllegalArgumentException("the rows written to log '" + log + "' need a column 'value' of type "
                + "binary or string (the record's payload); columns: " + columns(schema));
        }
        this.valueIndex = schema.fieldIndex(VALUE);
        this.valueIsString = value.dataType() instanceof StringType;
        if (atLeast) {
            this.streamIndex = -1;
            this.sequenceIndex = -1;
            return;
        }
        StructField stream = field(schema, STREAM);
        StructField seq = field(schema, SEQUENCE_ID);
        if (!isType(stream, StringType.class) || !isType(seq, LongType.class)) {
            throw new IllegalArgumentException("exactly once into log '" + log + "' needs the source position "
                + "columns 'stream' (string) and 'sequence_id' (bigint) of format(\"distributedlog-rt\") in the rows "
                + "(the output record's transaction id is the source record's sequence id); columns: "
                + columns(schema) + ". Keep them in the query's output, or set option atLeastOnce=true");
        }
        this.streamIndex = schema.fieldIndex(STREAM);
        this.sequenceIndex = schema.fieldIndex(SEQUENCE_ID);
    }

    /**
     * A writer for the streaming DataFrame {@code df} (what {@code dl_spark.realtime.write_stream} builds): as the
     * constructor, and, exactly once, refuses a {@code format("distributedlog-rt")} source of several logs or of a
     * {@code streamPattern} (rows of several source logs cannot share one output log's transaction ids).
     *
     * @throws IllegalArgumentException as the constructor, or a source of several logs (unless atLeastOnce)
     */
    public static DistributedLogForeachWriter forStream(Dataset<Row> df, String uri, String log,
            Map<String, String> options) {
        DistributedLogForeachWriter w = new DistributedLogForeachWriter(uri, log, df.schema(), options);
        if (!w.atLeastOnce && df instanceof org.apache.spark.sql.classic.Dataset) {
            LogicalPlan plan = ((org.apache.spark.sql.classic.Dataset<Row>) df).logicalPlan();
            scala.collection.Iterator<LogicalPlan> leaves = plan.collectLeaves().iterator();
            int sources = 0;
            while (leaves.hasNext()) {
                LogicalPlan leaf = leaves.next();
                if (leaf instanceof StreamingRelationV2) {
                    sources++;
                    w.checkSource((StreamingRelationV2) leaf);
                }
            }
            if (sources > 1) {
                throw new IllegalArgumentException("the query reads " + sources + " streaming sources: exactly once "
                    + "into log '" + log + "' needs one source log (or set option atLeastOnce=true)");
            }
        }
        return w;
    }

    private void checkSource(StreamingRelationV2 r) {
        if (!r.source().isDefined() || !(r.source().get() instanceof DistributedLogRealTimeSource)) {
            return;  // another source: the rows' columns were checked, and each row's source log is
        }
        String pattern = r.extraOptions().get("streamPattern");
        String streams = r.extraOptions().get("streams");
        if (pattern != null) {
            throw new IllegalArgumentException("exactly once into log '" + log + "' needs one source log, but the "
                + "source reads streamPattern '" + pattern + "' (several logs); name one log in option streams, "
                + "or set option atLeastOnce=true");
        }
        if (streams != null && streams.contains(",")) {
            throw new IllegalArgumentException("exactly once into log '" + log + "' needs one source log, but the "
                + "source reads streams '" + streams + "'; write each source log to an output log of its own, or "
                + "set option atLeastOnce=true");
        }
    }

    private static long positive(String v) {
        try {
            return v == null ? 0 : Math.max(0, Long.parseLong(v.trim()));
        } catch (NumberFormatException e) {
            return 0;
        }
    }

    private static long waitMillis(String lockTimeoutSeconds) {
        if (lockTimeoutSeconds == null) {
            return DEFAULT_WAIT_MS;
        }
        try {
            double s = Double.parseDouble(lockTimeoutSeconds.trim());
            return s < 0 ? Long.MAX_VALUE : (long) (s * 1000);
        } catch (NumberFormatException e) {
            return DEFAULT_WAIT_MS;  // the gateway refuses the value when the namespace is opened
        }
    }

    private static StructField field(StructType schema, String name) {
        for (StructField f : schema.fields()) {
            if (f.name().equals(name)) {
                return f;
            }
        }
        return null;
    }

    private static boolean isType(StructField f, Class<? extends DataType> type) {
        return f != null && type.isInstance(f.dataType());
    }

    private static String columns(StructType schema) {
        StringBuilder sb = new StringBuilder();
        for (StructField f : schema.fields()) {
            sb.append(sb.length() == 0 ? "" : ", ").append(f.name()).append(' ').append(f.dataType().simpleString());
        }
        return sb.length() == 0 ? "(none)" : sb.toString();
    }

    // --- the task's life ----------------------------------------------------------------------------------------

    /**
     * Take the output log's writer (this JVM's cached one, or a new one: the log's lock taken, the log recovered,
     * its last transaction id read).
     *
     * @throws UncheckedIOException the writer cannot be opened (the lock is held elsewhere past
     *     {@code lockTimeoutSeconds}: an {@link OwnershipAcquireFailedException} inside; another task of this JVM
     *     writes the log that long; the namespace cannot be opened...)
     */
    @Override
    public boolean open(long partitionId, long epochId) {
        taskStream = null;
        taskLastSequence = Long.MIN_VALUE;
        skipped = 0;
        String key = uri + '\u0000' + new TreeMap<>(conf) + '\u0000' + log;
        Slot s = SLOTS.computeIfAbsent(key, k -> new Slot());
        try {
            s.acquire(this);
        } catch (IOException e) {
            throw new UncheckedIOException("cannot open the writer of log '" + log + "' of " + uri + ": " + e, e);
        }
        slot = s;
        return true;
    }

    /**
     * Append the row's {@code value} (not waiting for its acknowledgement), or skip it when an earlier attempt
     * wrote it.
     *
     * @throws IllegalArgumentException (exactly once) rows of another source log than the one this output log is
     *     written from, two rows for one source record, rows out of the source's order, a record without a sequence
     *     id
     * @throws UncheckedIOException an earlier write of this writer failed
     */
    @Override
    public void process(Row row) {
        byte[] payload;
        if (row.isNullAt(valueIndex)) {
            payload = new byte[0];
        } else {
            payload = valueIsString ? row.getString(valueIndex).getBytes(StandardCharsets.UTF_8)
                : (byte[]) row.get(valueIndex);
        }
        Slot s = slot;
        if (atLeastOnce) {
            s.write(this, -1, payload);
            return;
        }
        String stream = row.getString(streamIndex);
        if (row.isNullAt(sequenceIndex)) {
            throw new IllegalArgumentException("a row for log '" + log + "' has no sequence_id");
        }
        long seq = row.getLong(sequenceIndex);
        if (taskStream == null) {
            s.bindSource(this, stream);
            taskStream = stream;
        } else if (!taskStream.equals(stream)) {
            throw severalSources(taskStream, stream);
        }
        if (seq < 0) {
            throw new IllegalArgumentException("record " + seq + " of source log '" + stream + "' has no sequence id "
                + "(a segment of an old metadata version): exactly once into log '" + log + "' needs sequence ids; "
                + "set option atLeastOnce=true");
        }
        if (seq <= taskLastSequence) {
            throw new IllegalArgumentException("two rows for record " + seq + " of source log '" + stream + "', or "
                + "rows out of the source's order: exactly once into log '" + log + "' needs at most one output row "
                + "per input record, in the source's order (a stateless query); set option atLeastOnce=true");
        }
        taskLastSequence = seq;
        if (!s.write(this, seq, payload)) {
            skipped++;
        }
    }

    IllegalArgumentException severalSources(String first, String other) {
        return new IllegalArgumentException("rows of source logs '" + first + "' and '" + other + "' into log '"
            + log + "': exactly once needs one source log per output log (the output's transaction ids are the "
            + "source's sequence ids); write each to a log of its own, or set option atLeastOnce=true");
    }

    /**
     * Wait until every record this task wrote is durable, then release the writer (kept open for the next task when
     * all went well, closed otherwise).
     *
     * @throws UncheckedIOException a write failed (and the task had not failed already)
     */
    @Override
    public void close(Throwable errorOrNull) {
        Slot s = slot;
        slot = null;
        if (s == null) {
            return;
        }
        IOException failed = s.release(this, errorOrNull != null);
        if (skipped > 0) {
            LOG.info("log '{}': skipped {} rows written by an earlier attempt", log, skipped);
        }
        if (failed != null && errorOrNull == null) {
            throw new UncheckedIOException("writing log '" + log + "' of " + uri + " failed: " + failed, failed);
        }
    }

    /** One output log's writer in this JVM, shared by the tasks that write it one after the other. */
    private static final class Slot {
        private DistributedLogManager dlm;
        private AsyncLogWriter writer;
        /** The output log's last transaction id: read when the writer opened, then the last one written. */
        private long lastTxId;
        /** Exactly once: the source log this output log is written from (the first one seen in this JVM). */
        private String source;
        private int users;
        private boolean exclusive;
        private long idleSince;
        private CompletableFuture<DLSN> lastWrite;
        private volatile Throwable failure;

        synchronized void acquire(DistributedLogForeachWriter w) throws IOException {
            long deadline = w.waitMs == Long.MAX_VALUE ? Long.MAX_VALUE : System.currentTimeMillis() + w.waitMs;
            while (users > 0 && (exclusive || !w.atLeastOnce)) {
                long left = deadline - System.currentTimeMillis();
                if (left <= 0) {
                    throw new IOException("log '" + w.log + "' is being written by another task of this executor"
                        + " (for " + (source == null ? "another query" : "source log '" + source
                        + "'") + ") after " + w.waitMs + " ms");
                }
                try {
                    wait(Math.min(left, 1000));
                } catch (InterruptedException e) {
                    Thread.currentThread().interrupt();
                    throw new InterruptedIOException("interrupted waiting for the writer of log '" + w.log
                        + "'");
                }
            }
            if (writer == null || failure != null) {
                closeWriter();
                dlm = Namespaces.get(w.uri, w.conf).openLog(w.log);
                try {
                    writer = Futures.result(dlm.openAsyncLogWriter());
                    try {
                        lastTxId = Futures.result(dlm.getLastTxIdAsync());
                    } catch (LogEmptyException | LogNotFoundException e) {
                        lastTxId = -1;
                    }
                } catch (IOException | RuntimeException e) {
                    closeWriter();
                    throw e;
                }
                failure = null;
                lastWrite = null;
                LOG.info("opened the writer of log '{}' (last transaction id {})", w.log, lastTxId);
            }
            users++;
            exclusive = !w.atLeastOnce;
        }

        synchronized void bindSource(DistributedLogForeachWriter w, String stream) {
            if (source == null) {
                source = stream;
            } else if (!source.equals(stream)) {
                throw w.severalSources(source, stream);
            }
        }

        /** Write (txid -1: the at-least-once txid); false when {@code txid} is not above the log's last one. */
        synchronized boolean write(DistributedLogForeachWriter w, long txid, byte[] payload) {
            Throwable f = failure;
            if (f != null) {
                throw new UncheckedIOException("an earlier write to log '" + w.log + "' failed: " + f,
                    f instanceof IOException ? (IOException) f : new IOException(f));
            }
            if (txid < 0) {
                txid = Math.max(lastTxId, System.currentTimeMillis());
            } else if (txid <= lastTxId) {
                return false;
            }
            CompletableFuture<DLSN> done = writer.write(new LogRecord(txid, payload));
            done.whenComplete((d, err) -> {
                if (err != null && failure == null) {
                    failure = Futures.unwrap(err);
                }
            });
            lastTxId = txid;
            lastWrite = done;
            return true;
        }

        /** The task is done: wait for its writes; keep the writer for the next task unless something failed. */
        IOException release(DistributedLogForeachWriter w, boolean taskFailed) {
            CompletableFuture<DLSN> last;
            synchronized (this) {
                last = lastWrite;
            }
            IOException failed = null;
            try {
                if (last != null) {
                    Futures.result(last);
                }
            } catch (IOException e) {
                failed = e;
            } catch (RuntimeException e) {
                failed = new IOException(e);
            }
            synchronized (this) {
                users--;
                if (failed == null && failure != null) {
                    Throwable f = failure;
                    failed = f instanceof IOException ? (IOException) f : new IOException(f);
                }
                if (users == 0) {
                    exclusive = false;
                    if (failed != null || taskFailed) {
                        closeWriter();  // the next task opens it again, recovering the log
                    } else {
                        idleSince = System.nanoTime();
                        long at = idleSince;
                        IDLE.schedule(() -> closeIfIdle(at), w.idleMs, TimeUnit.MILLISECONDS);
                    }
                }
                notifyAll();
            }
            return failed;
        }

        synchronized void closeIfIdle(long since) {
            if (users == 0 && idleSince == since) {
                closeWriter();
            }
        }

        /** Close the writer (in the background: what was written is durable or failed already). */
        private void closeWriter() {
            AsyncLogWriter wr = writer;
            DistributedLogManager m = dlm;
            writer = null;
            dlm = null;
            lastWrite = null;
            if (wr != null) {
                wr.asyncClose().whenComplete((v, err) -> {
                    if (m != null) {
                        m.asyncClose();
                    }
                });
            } else if (m != null) {
                m.asyncClose();
            }
        }
    }
}
