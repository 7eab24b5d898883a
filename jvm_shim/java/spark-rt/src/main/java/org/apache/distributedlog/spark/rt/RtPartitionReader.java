package org.apache.distributedlog.spark.rt;

import java.io.IOException;
import java.io.InterruptedIOException;
import java.util.ArrayDeque;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;
import org.apache.distributedlog.DLSN;
import org.apache.distributedlog.LogRecordWithDLSN;
import org.apache.distributedlog.api.AsyncLogReader;
import org.apache.distributedlog.api.DistributedLogManager;
import org.apache.distributedlog.api.namespace.Namespace;
import org.apache.distributedlog.exceptions.AlreadyTruncatedTransactionException;
import org.apache.distributedlog.exceptions.DLSNAlreadyTruncatedException;
import org.apache.distributedlog.exceptions.LogSegmentIsTruncatedException;
import org.apache.distributedlog.exceptions.LogSegmentNotFoundException;
import org.apache.distributedlog.shim.Errors;
import org.apache.distributedlog.shim.Futures;
import org.apache.spark.sql.catalyst.InternalRow;
import org.apache.spark.sql.catalyst.expressions.GenericInternalRow;
import org.apache.spark.sql.connector.read.streaming.PartitionOffset;
import org.apache.spark.sql.connector.read.streaming.SupportsRealTimeRead;
import org.apache.spark.unsafe.types.UTF8String;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * Reads one log through an {@link AsyncLogReader} of the executor's namespace. In real-time mode
 * {@link #nextWithTimeout} returns each record as soon as the log's writer made it visible (one bulk read of up to
 * {@value #BULK} records stays pending across calls, so no record is lost to a timeout); in a micro-batch
 * {@link #next} stops at the batch's end.
 */
final class RtPartitionReader implements SupportsRealTimeRead<InternalRow> {

    private static final Logger LOG = LoggerFactory.getLogger(RtPartitionReader.class);
    static final int BULK = 1000;

    private final RtInputPartition partition;
    private final Namespace ns;
    private final DistributedLogManager dlm;
    private final UTF8String stream;
    private final DLSN end;
    private final ArrayDeque<LogRecordWithDLSN> buffer = new ArrayDeque<>();
    private AsyncLogReader reader;
    private CompletableFuture<List<LogRecordWithDLSN>> pending;
    private DLSN position;
    private InternalRow current;

    RtPartitionReader(RtInputPartition p) throws IOException {
        this.partition = p;
        this.ns = Namespaces.get(p.uri, p.conf);
        this.dlm = ns.openLog(p.log);
        this.stream = UTF8String.fromString(p.log);
        this.position = new DLSN(p.start[0], p.start[1], p.start[2]);
        this.end = p.hasEnd ? new DLSN(p.end[0], p.end[1], p.end[2]) : null;
        this.reader = Futures.result(dlm.openAsyncLogReader(position));
    }

    private static boolean isDataLoss(IOException e) {
        return e instanceof DLSNAlreadyTruncatedException || e instanceof LogSegmentIsTruncatedException
            || e instanceof AlreadyTruncatedTransactionException || e instanceof LogSegmentNotFoundException;
    }

    /**
     * Wait up to {@code timeoutMs} (-1: for ever) for records; true if some were added to the buffer.
     */
    private boolean fill(long timeoutMs) throws IOException {
        if (pending == null) {
            pending = reader.readBulk(BULK);
        }
        List<LogRecordWithDLSN> got;
        try {
            got = timeoutMs < 0 ? pending.get() : pending.get(timeoutMs, TimeUnit.MILLISECONDS);
        } catch (TimeoutException e) {
            return false;
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            InterruptedIOException ie = new InterruptedIOException("reading log '" + partition.log + "' interrupted");
            ie.initCause(e);
            throw ie;
        } catch (ExecutionException e) {
            pending = null;
            Throwable err = Futures.unwrap(e);
            if (!(err instanceof IOException) || !isDataLoss((IOException) err)) {
                throw Errors.rethrow(err);
            }
            return skipLostRecords((IOException) err);
        }
        pending = null;
        buffer.addAll(got);
        return !got.isEmpty();
    }

    /** Records at the position were truncated or purged: fail (failOnDataLoss) or go on from the first readable. */
    private boolean skipLostRecords(IOException err) throws IOException {
        String msg = "records of log '" + partition.log + "' from " + Dlsns.text(position)
            + " can no longer be read (" + err.getMessage() + ")";
        if (partition.failOnDataLoss) {
            throw new IOException(msg + "; set failOnDataLoss=false to go on from the first readable position", err);
        }
        LOG.warn("{}; going on from the first readable position (failOnDataLoss=false)", msg);
        reader.asyncClose();
        DLSN first = Logs.earliest(dlm);
        position = Dlsns.max(position, first);
        reader = Futures.result(dlm.openAsyncLogReader(position));
        return false;
    }

    private void emit(LogRecordWithDLSN rec) {
        DLSN d = rec.getDlsn();
        GenericInternalRow dlsn = new GenericInternalRow(new Object[] {
            d.getLogSegmentSequenceNo(), d.getEntryId(), d.getSlotId()});
        current = new GenericInternalRow(new Object[] {
            stream, dlsn, rec.getTransactionId(), rec.getSequenceId(), rec.getPayload()});
        position = d.getNextDLSN();
    }

    /** The next record before the batch's end (micro-batch), waiting for it if needed. */
    @Override
    public boolean next() throws IOException {
        if (end == null) {
            while (buffer.isEmpty()) {
                fill(-1);
            }
            emit(buffer.poll());
            return true;
        }
        if (position.compareTo(end) >= 0) {
            return false;
        }
        while (buffer.isEmpty()) {
            fill(-1);
        }
        LogRecordWithDLSN rec = buffer.peek();
        if (rec.getDlsn().compareTo(end) >= 0) {
            position = end;
            return false;
        }
        emit(buffer.poll());
        return true;
    }

    /** The next record, waiting at most {@code timeoutMs} for one to be written (real-time mode). */
    @Override
    public RecordStatus nextWithTimeout(Long timeoutMs) throws IOException {
        if (end != null) {
            return RecordStatus.newStatusWithoutArrivalTime(next());
        }
        long deadline = System.nanoTime() + TimeUnit.MILLISECONDS.toNanos(Math.max(0L, timeoutMs));
        while (buffer.isEmpty()) {
            long left = TimeUnit.NANOSECONDS.toMillis(deadline - System.nanoTime());
            if (left <= 0) {
                if (!fill(0)) {
                    return RecordStatus.newStatusWithoutArrivalTime(false);
                }
            } else {
                fill(left);
            }
        }
        emit(buffer.poll());
        return RecordStatus.newStatusWithoutArrivalTime(true);
    }

    @Override
    public InternalRow get() {
        return current;
    }

    /** The DLSN after the last record returned (the start before any). */
    @Override
    public PartitionOffset getOffset() {
        return new RtPartitionOffset(partition.log, position.getLogSegmentSequenceNo(), position.getEntryId(),
            position.getSlotId());
    }

    @Override
    public void close() throws IOException {
        try {
            if (pending != null) {
                pending.cancel(false);
            }
            reader.asyncClose().get(10, TimeUnit.SECONDS);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        } catch (ExecutionException | TimeoutException | RuntimeException e) {
            LOG.debug("closing the reader of log '{}': {}", partition.log, e.toString());
        } finally {
            dlm.close();
        }
    }
}
