package org.apache.distributedlog.shim;

import java.io.IOException;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.LinkedBlockingDeque;
import java.util.concurrent.LinkedBlockingQueue;
import org.apache.distributedlog.DLSN;
import org.apache.distributedlog.DistributedLogConstants;
import org.apache.distributedlog.LogRecord;
import org.apache.distributedlog.api.AsyncLogWriter;
import org.apache.distributedlog.exceptions.AlreadyClosedException;
import org.apache.distributedlog.exceptions.DLInterruptedException;
import org.apache.distributedlog.exceptions.UnexpectedException;
import org.apache.distributedlog.exceptions.WriteCancelledException;

/**
 * The async writer of the shim, and the engine of the sync one.
 *
 * <p>{@link #write} only queues the record. A sender thread takes everything queued (up to {@link #MAX_BATCH_BYTES}
 * bytes) and sends it as one {@code writer.write} call; the gateway answers at once with a batch number. A
 * completer thread calls {@code writer.await} for each batch in order and completes the batch's futures with
 * their DLSNs, or with the batch's error. The sender never waits for acknowledgements (the gateway's writer only
 * transmits what it buffers when more records, a flush or a close come, so waiting could deadlock); instead,
 * {@code write} blocks (except on the writer's own threads) while more than {@value #MAX_QUEUED_BYTES} bytes are
 * queued or unacknowledged. Other operations (flush, truncate, end of stream, close) go through the sender in
 * order (an abort goes before everything still queued); flush, end of stream and close make the gateway's writer
 * transmit what it buffers, then wait until every batch before them is completed.
 *
 * <p>As in DistributedLog, a write is acknowledged once the gateway's writer has transmitted it: with the default
 * configuration ({@code writerOutputBufferSize} 1024, no periodic flush) the last records of a burst wait for
 * more writes, a flush or {@code asyncClose()}; set {@code periodicFlushFrequencyMilliSeconds},
 * {@code enableImmediateFlush} or {@code writerOutputBufferSize=0} for prompt acknowledgements.
 */
final class ShimAsyncLogWriter implements AsyncLogWriter {

    /**
     * Bytes per {@code writer.write} call (a record is never split): {@code -Ddlog.shim.maxBatchBytes}, default
     * 256 KiB (measured: as fast as 1 MiB, with smaller calls pipelining better).
     */
    static final int MAX_BATCH_BYTES = Integer.getInteger("dlog.shim.maxBatchBytes", 256 << 10);
    static final int MAX_BATCH_RECORDS = 100_000;
    static final long MAX_QUEUED_BYTES = 64L << 20;

    private static final Object STOP = new Object();

    private enum Kind { FLUSH, TRUNCATE, END_OF_STREAM, CLOSE, ABORT }

    private static final class Pending {
        final LogRecord record;
        final CompletableFuture<DLSN> future;
        final int size;

        Pending(LogRecord record, CompletableFuture<DLSN> future) {
            this.record = record;
            this.future = future;
            this.size = Wire.encodedSize(record);
        }
    }

    private static final class Command {
        final Kind kind;
        final DLSN dlsn;
        final CompletableFuture<Object> future = new CompletableFuture<>();

        Command(Kind kind, DLSN dlsn) {
            this.kind = kind;
            this.dlsn = dlsn;
        }
    }

    private static final class Batch {
        final long number;
        final List<Pending> records;
        final long bytes;
        final Throwable error;

        Batch(long number, List<Pending> records, long bytes, Throwable error) {
            this.number = number;
            this.records = records;
            this.bytes = bytes;
            this.error = error;
        }
    }

    private final GatewayConnection conn;
    private final long handle;
    private final String streamName;
    private final Runnable onClosed;
    private final LinkedBlockingDeque<Object> queue = new LinkedBlockingDeque<>();
    private final LinkedBlockingQueue<Object> inflight = new LinkedBlockingQueue<>();
    private final Object space = new Object();
    private long queuedBytes;
    private final Object state = new Object();
    private boolean closing;
    /** The sender has ended: nothing is queued any more (guarded by {@code state}). */
    private boolean done;
    private CompletableFuture<Void> closeFuture;
    private volatile long lastTxId = DistributedLogConstants.INVALID_TXID;
    private volatile long lastAckedTxId = DistributedLogConstants.INVALID_TXID;
    private final Thread sender;
    private final Thread completer;

    ShimAsyncLogWriter(GatewayConnection conn, long handle, String streamName, Runnable onClosed) {
        this.conn = conn;
        this.handle = handle;
        this.streamName = streamName;
        this.onClosed = onClosed;
        this.sender = new Thread(this::sendLoop, "dlog-writer-send-" + streamName);
        this.completer = new Thread(this::completeLoop, "dlog-writer-ack-" + streamName);
        sender.setDaemon(true);
        completer.setDaemon(true);
        sender.start();
        completer.start();
    }

    private Map<String, Object> args() {
        return Json.object("writer", handle);
    }

    // --- AsyncLogWriter ---------------------------------------------------------------------------

    @Override
    public String getStreamName() {
        return streamName;
    }

    @Override
    public long getLastTxId() {
        return lastTxId;
    }

    /** @return the highest transaction id acknowledged (durable) so far */
    long getLastAckedTxId() {
        return lastAckedTxId;
    }

    @Override
    public CompletableFuture<DLSN> write(LogRecord record) {
        if (record == null) {
            throw new NullPointerException("record");
        }
        CompletableFuture<DLSN> f = new CompletableFuture<>();
        Pending p = new Pending(record, f);
        reserve(p.size);
        synchronized (state) {
            if (!closing) {
                queue.add(p);
                lastTxId = record.getTransactionId();
                return f;
            }
        }
        // outside the state lock: release() takes the space lock, and reserve() takes them in the other order
        release(p.size);
        f.completeExceptionally(closedError());
        return f;
    }

    @Override
    public CompletableFuture<List<CompletableFuture<DLSN>>> writeBulk(List<LogRecord> records) {
        List<CompletableFuture<DLSN>> out = new ArrayList<>(records.size());
        for (LogRecord r : records) {
            out.add(write(r));
        }
        return CompletableFuture.completedFuture(out);
    }

    @Override
    public CompletableFuture<Boolean> truncate(DLSN dlsn) {
        if (dlsn == null) {
            throw new NullPointerException("dlsn");
        }
        return command(Kind.TRUNCATE, dlsn).thenApply(o -> (Boolean) o);
    }

    @Override
    public CompletableFuture<Long> markEndOfStream() {
        return command(Kind.END_OF_STREAM, null).thenApply(o -> lastAckedTxId);
    }

    /** Wait for every write so far, then {@code writer.flush}; the future resolves to the flushed DLSN. */
    CompletableFuture<Object> flush() {
        return command(Kind.FLUSH, null);
    }

    @Override
    public CompletableFuture<Void> asyncClose() {
        synchronized (state) {
            if (closeFuture != null) {
                return closeFuture;
            }
            if (done) {
                return CompletableFuture.completedFuture(null);
            }
            closing = true;
            Command c = new Command(Kind.CLOSE, null);
            closeFuture = c.future.thenApply(o -> (Void) null);
            queue.add(c);
            return closeFuture;
        }
    }

    @Override
    public CompletableFuture<Void> asyncAbort() {
        synchronized (state) {
            if (done) {
                return closeFuture != null ? closeFuture : CompletableFuture.completedFuture(null);
            }
            closing = true;
            Command c = new Command(Kind.ABORT, null);
            CompletableFuture<Void> f = c.future.thenApply(o -> (Void) null);
            if (closeFuture == null) {
                closeFuture = f;
            }
            queue.addFirst(c);
            return f;
        }
    }

    private CompletableFuture<Object> command(Kind kind, DLSN dlsn) {
        synchronized (state) {
            if (closing) {
                return Futures.failed(closedError());
            }
            Command c = new Command(kind, dlsn);
            queue.add(c);
            return c.future;
        }
    }

    private AlreadyClosedException closedError() {
        return new AlreadyClosedException("the writer of " + streamName + " is closed");
    }

    // --- flow control -----------------------------------------------------------------------------

    private void reserve(int size) {
        Thread me = Thread.currentThread();
        boolean mayBlock = me != sender && me != completer;
        synchronized (space) {
            boolean interrupted = false;
            while (mayBlock && queuedBytes > 0 && queuedBytes + size > MAX_QUEUED_BYTES) {
                synchronized (state) {
                    if (closing) {
                        break;
                    }
                }
                try {
                    space.wait(100);
                } catch (InterruptedException e) {
                    interrupted = true;
                }
            }
            queuedBytes += size;
            if (interrupted) {
                me.interrupt();
            }
        }
    }

    private void release(long size) {
        synchronized (space) {
            queuedBytes -= size;
            space.notifyAll();
        }
    }

    // --- sender -----------------------------------------------------------------------------------

    private void sendLoop() {
        try {
            while (true) {
                Object item = queue.take();
                if (item instanceof Command) {
                    if (runCommand((Command) item)) {
                        return;
                    }
                    continue;
                }
                List<Pending> batch = new ArrayList<>();
                Pending first = (Pending) item;
                batch.add(first);
                long bytes = first.size;
                while (batch.size() < MAX_BATCH_RECORDS) {
                    Object next = queue.peekFirst();
                    if (!(next instanceof Pending) || bytes + ((Pending) next).size > MAX_BATCH_BYTES) {
                        break;
                    }
                    Object taken = queue.pollFirst();
                    if (taken != next) {
                        // an abort was put in front meanwhile: keep the order of what we took
                        if (taken != null) {
                            queue.addFirst(taken);
                        }
                        break;
                    }
                    batch.add((Pending) taken);
                    bytes += ((Pending) taken).size;
                }
                send(batch, bytes);
            }
        } catch (InterruptedException e) {
            finish(new WriteCancelledException(streamName, "the writer thread was interrupted"));
        } finally {
            inflight.add(STOP);
            conn.releaseThreadConnection();
        }
    }

    private void send(List<Pending> batch, long bytes) {
        List<LogRecord> records = new ArrayList<>(batch.size());
        for (Pending p : batch) {
            records.add(p.record);
        }
        long number = -1;
        Throwable error = null;
        try {
            byte[] data = Wire.encodeRecords(records, (int) bytes);
            GatewayConnection.Response r = conn.call("writer.write", args(), data);
            number = Json.getLong(r.result, "batch");
            long count = Json.getLong(r.result, "count");
            if (count != batch.size()) {
                error = new UnexpectedException("the gateway took " + count + " of " + batch.size()
                    + " records of a batch");
            }
        } catch (Throwable t) {
            error = t;
        }
        inflight.add(new Batch(number, batch, bytes, error));
    }

    /** Run a command on the sender thread; true when the writer is done. */
    private boolean runCommand(Command c) throws InterruptedException {
        try {
            switch (c.kind) {
                case TRUNCATE: {
                    Map<String, Object> a = args();
                    a.put("dlsn", Wire.toText(c.dlsn));
                    c.future.complete(Json.getBoolean(conn.call("writer.truncate", a).result, "truncated"));
                    return false;
                }
                case FLUSH: {
                    // writer.flush transmits what the gateway's writer buffers (so the batches in flight become
                    // durable), then the futures of every batch before it are completed
                    DLSN d = Wire.parseText(Json.getString(conn.call("writer.flush", args()).result, "dlsn"));
                    drainInflight();
                    c.future.complete(d);
                    return false;
                }
                case END_OF_STREAM: {
                    DLSN d = Wire.parseText(Json.getString(conn.call("writer.markEndOfStream", args()).result,
                                                           "dlsn"));
                    drainInflight();
                    c.future.complete(d);
                    return false;
                }
                case CLOSE: {
                    try {
                        try {
                            conn.call("writer.flush", args());
                        } catch (IOException | RuntimeException e) {
                            // the writer is in error: its batches fail; close it anyway
                        }
                        drainInflight();
                        conn.call("writer.close", args());
                        c.future.complete(null);
                    } finally {
                        finish(closedError());
                    }
                    return true;
                }
                case ABORT: {
                    WriteCancelledException cancelled = new WriteCancelledException(streamName, "writer aborted");
                    failQueued(cancelled);
                    try {
                        conn.call("writer.abort", args());
                        c.future.complete(null);
                    } finally {
                        finish(closedError());
                    }
                    return true;
                }
                default:
                    throw new IllegalStateException(c.kind.name());
            }
        } catch (InterruptedException e) {
            c.future.completeExceptionally(new DLInterruptedException("the writer thread was interrupted"));
            throw e;
        } catch (Throwable t) {
            c.future.completeExceptionally(t);
            return c.kind == Kind.CLOSE || c.kind == Kind.ABORT;
        }
    }

    /** Wait until the completer has completed every batch sent so far. */
    private void drainInflight() throws InterruptedException {
        CountDownLatch latch = new CountDownLatch(1);
        inflight.add(latch);
        latch.await();
    }

    /** The sender ends: nothing more is queued; what is queued fails with {@code queuedError}. */
    private void finish(Throwable queuedError) {
        synchronized (state) {
            closing = true;
            done = true;
        }
        failQueued(queuedError);
        if (onClosed != null) {
            onClosed.run();
        }
    }

    /** Fail every queued write and command (after close or abort). */
    private void failQueued(Throwable error) {
        Object o;
        while ((o = queue.pollFirst()) != null) {
            if (o instanceof Pending) {
                Pending p = (Pending) o;
                release(p.size);
                p.future.completeExceptionally(error);
            } else {
                Command c = (Command) o;
                if (c.kind == Kind.CLOSE || c.kind == Kind.ABORT) {
                    c.future.complete(null);
                } else {
                    c.future.completeExceptionally(error);
                }
            }
        }
    }

    // --- completer --------------------------------------------------------------------------------

    private void completeLoop() {
        try {
            while (true) {
                Object o;
                try {
                    o = inflight.take();
                } catch (InterruptedException e) {
                    continue;
                }
                if (o == STOP) {
                    return;
                }
                if (o instanceof CountDownLatch) {
                    ((CountDownLatch) o).countDown();
                    continue;
                }
                complete((Batch) o);
            }
        } finally {
            conn.releaseThreadConnection();
        }
    }

    private void complete(Batch b) {
        try {
            Throwable error = b.error;
            List<DLSN> dlsns = null;
            if (error == null) {
                try {
                    Map<String, Object> a = args();
                    a.put("batch", b.number);
                    GatewayConnection.Response r = conn.call("writer.await", a);
                    dlsns = Wire.decodeDlsns(r.data);
                    if (dlsns.size() != b.records.size()) {
                        error = new UnexpectedException("the gateway acknowledged " + dlsns.size() + " of "
                            + b.records.size() + " records of batch " + b.number);
                    }
                } catch (Throwable t) {
                    error = t;
                }
            }
            if (error == null) {
                lastAckedTxId = b.records.get(b.records.size() - 1).record.getTransactionId();
                for (int i = 0; i < dlsns.size(); i++) {
                    b.records.get(i).future.complete(dlsns.get(i));
                }
            } else {
                for (Pending p : b.records) {
                    p.future.completeExceptionally(error);
                }
            }
        } finally {
            release(b.bytes);
        }
    }
}
