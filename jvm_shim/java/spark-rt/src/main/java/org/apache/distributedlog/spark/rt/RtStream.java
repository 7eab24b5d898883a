package org.apache.distributedlog.spark.rt;

import java.io.IOException;
import java.io.UncheckedIOException;
import java.util.ArrayList;
import java.util.Iterator;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;
import java.util.TreeSet;
import org.apache.distributedlog.DLSN;
import org.apache.distributedlog.api.DistributedLogManager;
import org.apache.distributedlog.api.namespace.Namespace;
import org.apache.distributedlog.exceptions.LogNotFoundException;
import org.apache.distributedlog.shim.ShimNamespace;
import org.apache.spark.sql.connector.read.InputPartition;
import org.apache.spark.sql.connector.read.PartitionReaderFactory;
import org.apache.spark.sql.connector.read.streaming.MicroBatchStream;
import org.apache.spark.sql.connector.read.streaming.Offset;
import org.apache.spark.sql.connector.read.streaming.PartitionOffset;
import org.apache.spark.sql.connector.read.streaming.ReadLimit;
import org.apache.spark.sql.connector.read.streaming.SupportsAdmissionControl;
import org.apache.spark.sql.connector.read.streaming.SupportsRealTimeMode;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * The driver side of the source. In real-time mode ({@code trigger(realTime=...)}) every batch has one
 * long-running task per log, started at the batch's start positions with no end; Spark merges the positions the
 * tasks reached ({@link #mergeOffsets}) into the next batch's start. In plain micro-batches, a batch reads each log
 * from its start to the tail seen when the batch was planned.
 *
 * <p>Positions are also recorded, under the query's {@code subscriberId}, in each log's subscriptions store when a
 * batch is committed, so {@code dlog lag} shows how far the query is behind (advisory: a failure is logged).
 */
final class RtStream implements MicroBatchStream, SupportsAdmissionControl, SupportsRealTimeMode {

    private static final Logger LOG = LoggerFactory.getLogger(RtStream.class);

    private final RtOptions opts;
    private final InitialOffsets initial;
    private final Map<String, DLSN> recorded = new TreeMap<>();
    /** The start of the real-time batch planned last: {@link #mergeOffsets} completes it with the tasks' ends. */
    private Map<String, DLSN> realTimeStart;
    private boolean realTime;

    RtStream(RtOptions opts, String checkpointLocation) {
        this.opts = opts;
        this.initial = checkpointLocation == null ? null : new InitialOffsets(checkpointLocation);
    }

    /**
     * Open the namespace and check that the logs of {@code streams} exist.
     *
     * @throws IllegalArgumentException a bad {@code dlog.<key>} option, or a missing log
     * @throws UncheckedIOException the namespace cannot be opened
     */
    static void checkLogsExist(RtOptions opts) {
        try {
            new RtStream(opts, null).currentLogs();
        } catch (IOException e) {
            throw new UncheckedIOException("cannot open the namespace " + opts.uri + ": " + e.getMessage(), e);
        }
    }

    private Namespace ns() throws IOException {
        return Namespaces.get(opts.uri, opts.conf);
    }

    /** The source's logs as they are now (sorted); a log of {@code streams} that does not exist fails. */
    private List<String> currentLogs() throws IOException {
        Namespace ns = ns();
        List<String> out = new ArrayList<>();
        if (opts.streams != null) {
            for (String log : opts.streams) {
                if (!ns.logExists(log)) {
                    throw new IllegalArgumentException("log '" + log + "' of option streams does not exist in "
                        + opts.uri);
                }
                out.add(log);
            }
            out.sort(null);
            return out;
        }
        for (Iterator<String> it = ns.getLogs(); it.hasNext(); ) {
            String log = it.next();
            if (opts.matches(log)) {
                out.add(log);
            }
        }
        out.sort(null);
        return out;
    }

    private void dataLoss(String message) {
        if (opts.failOnDataLoss) {
            throw new IllegalStateException(message + "; set failOnDataLoss=false to go on from the first readable "
                + "position");
        }
        LOG.warn("{}; going on (failOnDataLoss=false)", message);
    }

    /** {@code start} if its segment still exists, else (data loss) the first readable position. */
    private DLSN checkStart(String log, DistributedLogManager dlm, DLSN start) throws IOException {
        DLSN first = Logs.earliest(dlm);
        if (start.getLogSegmentSequenceNo() < first.getLogSegmentSequenceNo() && Logs.tail(dlm) != null) {
            dataLoss("position " + Dlsns.text(start) + " of log '" + log + "' was purged: the log now starts at "
                + Dlsns.text(first));
            return first;
        }
        return start;
    }

    // --- offsets ---------------------------------------------------------------------------------
    @Override
    public Offset initialOffset() {
        try {
            RtOffset kept = initial.read();
            if (kept != null) {
                return kept;
            }
            return initial.writeOnce(computeInitial());
        } catch (IOException e) {
            throw new UncheckedIOException("cannot determine the initial offsets of " + opts.uri + ": "
                + e.getMessage(), e);
        }
    }

    private RtOffset computeInitial() throws IOException {
        Map<String, DLSN> out = new TreeMap<>();
        Namespace ns = ns();
        for (String log : currentLogs()) {
            try (DistributedLogManager dlm = ns.openLog(log)) {
                DLSN pos;
                switch (opts.start) {
                    case TXID:
                        pos = Logs.atTxId(dlm, opts.startingTxId);
                        break;
                    case EARLIEST:
                        pos = Logs.earliest(dlm);
                        break;
                    case JSON: {
                        String given = opts.startPerLog.getOrDefault(log, "latest");
                        if (given.equals("earliest")) {
                            pos = Logs.earliest(dlm);
                        } else if (given.equals("latest")) {
                            DLSN t = Logs.tail(dlm);
                            pos = t == null ? Logs.earliest(dlm) : t;
                        } else {
                            pos = checkStart(log, dlm, Dlsns.parse(given, log));
                        }
                        break;
                    }
                    case LATEST:
                    default: {
                        DLSN t = Logs.tail(dlm);
                        pos = t == null ? Logs.earliest(dlm) : t;
                    }
                }
                out.put(log, pos);
            }
        }
        return new RtOffset(out);
    }

    @Override
    public Offset deserializeOffset(String json) {
        return RtOffset.fromJson(json);
    }

    @Override
    public Offset latestOffset() {
        throw new UnsupportedOperationException("latestOffset(Offset, ReadLimit) is to be called instead");
    }

    @Override
    public ReadLimit getDefaultReadLimit() {
        return ReadLimit.allAvailable();
    }

    /** The tails of the source's logs (logs of {@code streamPattern} that appeared since start at their first). */
    @Override
    public Offset latestOffset(Offset start, ReadLimit limit) {
        Map<String, DLSN> begin = ((RtOffset) start).positions;
        record(begin);  // Spark asks for the next batch once the batch that ended at start completed
        try {
            Namespace ns = ns();
            TreeSet<String> names = new TreeSet<>(begin.keySet());
            names.addAll(currentLogs());
            Map<String, DLSN> end = new TreeMap<>();
            for (String log : names) {
                DLSN s = begin.get(log);
                DLSN tail;
                try (DistributedLogManager dlm = ns.openLog(log)) {
                    tail = Logs.tail(dlm);
                    if (s == null) {
                        if (tail == null) {
                            continue;  // a new log without data yet: added once it has some
                        }
                        s = Logs.earliest(dlm);
                    }
                } catch (LogNotFoundException e) {
                    dataLoss("log '" + log + "' was deleted (position " + (s == null ? "-" : Dlsns.text(s))
                        + " can no longer be read)");
                    continue;
                }
                end.put(log, tail == null ? s : Dlsns.max(s, tail));
            }
            return new RtOffset(end);
        } catch (IOException e) {
            throw new UncheckedIOException("cannot read the tails of the logs of " + opts.uri + ": " + e.getMessage(),
                e);
        }
    }

    // --- planning ----------------------------------------------------------------------------------
    @Override
    public InputPartition[] planInputPartitions(Offset start, Offset end) {
        Map<String, DLSN> s = ((RtOffset) start).positions;
        Map<String, DLSN> e = ((RtOffset) end).positions;
        List<InputPartition> parts = new ArrayList<>();
        List<String> executors = Executors.sorted();
        int index = 0;
        try {
            Namespace ns = ns();
            for (Map.Entry<String, DLSN> it : e.entrySet()) { // by log name: an offset's positions are sorted
                String log = it.getKey();
                String location = Executors.pick(executors, index++);
                DLSN from = s.get(log);
                if (from == null) {
                    try (DistributedLogManager dlm = ns.openLog(log)) {
                        from = Logs.earliest(dlm);
                    }
                }
                if (from.compareTo(it.getValue()) >= 0) {
                    continue;
                }
                parts.add(partition(log, from, it.getValue(), location));
            }
        } catch (IOException ex) {
            throw new UncheckedIOException("cannot plan the batch: " + ex.getMessage(), ex);
        }
        return parts.toArray(new InputPartition[0]);
    }

    @Override
    public void prepareForRealTimeMode() {
        realTime = true;
    }

    /** One unbounded partition per log: the logs of {@code start}, and those of {@code streamPattern} that appeared. */
    @Override
    public InputPartition[] planInputPartitions(Offset start) {
        Map<String, DLSN> begin = new TreeMap<>(((RtOffset) start).positions);
        try {
            Namespace ns = ns();
            for (String log : currentLogs()) {
                if (!begin.containsKey(log)) {
                    try (DistributedLogManager dlm = ns.openLog(log)) {
                        begin.put(log, Logs.earliest(dlm));
                    }
                }
            }
            List<InputPartition> parts = new ArrayList<>();
            List<String> executors = Executors.sorted();
            int index = 0;
            for (Map.Entry<String, DLSN> it : begin.entrySet()) {
                String log = it.getKey();
                String location = Executors.pick(executors, index++);
                DLSN from = it.getValue();
                try (DistributedLogManager dlm = ns.openLog(log)) {
                    from = checkStart(log, dlm, from);
                } catch (LogNotFoundException e) {
                    dataLoss("log '" + log + "' was deleted (position " + Dlsns.text(from)
                        + " can no longer be read)");
                    continue;
                }
                parts.add(partition(log, from, null, location));
                it.setValue(from);
            }
            realTimeStart = begin;
            return parts.toArray(new InputPartition[0]);
        } catch (IOException ex) {
            throw new UncheckedIOException("cannot plan the real-time batch: " + ex.getMessage(), ex);
        }
    }

    private RtInputPartition partition(String log, DLSN from, DLSN to, String location) {
        long[] s = {from.getLogSegmentSequenceNo(), from.getEntryId(), from.getSlotId()};
        long[] e = to == null ? null : new long[] {to.getLogSegmentSequenceNo(), to.getEntryId(), to.getSlotId()};
        return new RtInputPartition(opts.uri, opts.conf, log, s, e, opts.failOnDataLoss, location);
    }

    /** The batch's start with each task's position applied: the next batch's start. */
    @Override
    public Offset mergeOffsets(PartitionOffset[] offsets) {
        Map<String, DLSN> out = new TreeMap<>(realTimeStart == null ? Map.of() : realTimeStart);
        for (PartitionOffset o : offsets) {
            RtPartitionOffset p = (RtPartitionOffset) o;
            out.put(p.log, new DLSN(p.lssn, p.entryId, p.slotId));
        }
        return new RtOffset(out);
    }

    @Override
    public PartitionReaderFactory createReaderFactory() {
        return new RtReaderFactory();
    }

    /** Record {@code end} under {@code subscriberId} in each log's subscriptions store. */
    @Override
    public void commit(Offset end) {
        record(((RtOffset) end).positions);
    }

    private void record(Map<String, DLSN> positions) {
        Map<String, DLSN> todo = new TreeMap<>();
        for (Map.Entry<String, DLSN> e : positions.entrySet()) {
            if (!e.getValue().equals(recorded.get(e.getKey()))) {
                todo.put(e.getKey(), e.getValue());
            }
        }
        if (todo.isEmpty()) {
            return;
        }
        try {
            Namespace ns = ns();
            if (ns instanceof ShimNamespace) {
                ((ShimNamespace) ns).advanceSubscriber(opts.subscriberId, todo);
            }
            recorded.putAll(todo);
        } catch (IOException | RuntimeException e) {
            if (e instanceof LogNotFoundException) {
                recorded.putAll(todo);
            }
            LOG.warn("could not record the positions of subscriber '{}' in {} log(s) (retried next batch): {}",
                opts.subscriberId, todo.size(), e.toString());
        }
    }

    @Override
    public void stop() {
        // the namespace is shared by this JVM's queries and closed when the JVM exits
    }

    @Override
    public String toString() {
        return "DistributedLogRealTime[" + opts.uri + (opts.streams != null ? " streams=" + opts.streams
            : " streamPattern=" + opts.streamPattern) + (realTime ? ", real-time" : "") + "]";
    }
}
