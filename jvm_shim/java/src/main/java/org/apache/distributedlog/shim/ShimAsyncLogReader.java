package org.apache.distributedlog.shim;

import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import org.apache.distributedlog.LogRecordWithDLSN;
import org.apache.distributedlog.api.AsyncLogReader;

/**
 * The async reader: one prefetch thread owns the gateway's reader handle. It reads ahead with {@code reader.read}
 * (waiting up to {@value #WAIT_MS} ms per call for new records) while fewer than {@value #HIGH_WATER} records are
 * buffered, and completes the pending reads in order. After an error the records fetched before it are still
 * delivered, then every read fails with it. {@link #asyncClose()} fails pending reads with
 * {@code ReadCancelledException}; the thread closes the handle and ends.
 */
final class ShimAsyncLogReader implements AsyncLogReader {

    static final int WAIT_MS = 200;
    static final int HIGH_WATER = 2 * ShimLogReader.Fetcher.MAX_RECORDS;

    private static final class Request {
        final int n;
        final boolean single;
        final long deadlineNanos; // 0: none (complete with what is there, at least one record)
        final CompletableFuture<Object> future = new CompletableFuture<>();

        Request(int n, boolean single, long deadlineNanos) {
            this.n = n;
            this.single = single;
            this.deadlineNanos = deadlineNanos;
        }
    }

    private final ShimLogReader.Fetcher fetcher;
    private final Runnable onClosed;
    private final Object lock = new Object();
    private final ArrayDeque<LogRecordWithDLSN> buffer = new ArrayDeque<>();
    private final ArrayDeque<Request> pending = new ArrayDeque<>();
    private Throwable error;
    private boolean closed;
    private final CompletableFuture<Void> closeFuture = new CompletableFuture<>();

    ShimAsyncLogReader(GatewayConnection conn, long handle, String streamName, Runnable onClosed) {
        this.fetcher = new ShimLogReader.Fetcher(conn, handle, streamName);
        this.onClosed = onClosed;
        Thread t = new Thread(this::prefetchLoop, "dlog-reader-" + streamName);
        t.setDaemon(true);
        t.start();
    }

    @Override
    public String getStreamName() {
        return fetcher.streamName;
    }

    @Override
    @SuppressWarnings("unchecked")
    public CompletableFuture<LogRecordWithDLSN> readNext() {
        return (CompletableFuture<LogRecordWithDLSN>) (CompletableFuture<?>) submit(new Request(1, true, 0));
    }

    @Override
    public CompletableFuture<List<LogRecordWithDLSN>> readBulk(int numEntries) {
        return bulk(new Request(checkCount(numEntries), false, 0));
    }

    @Override
    public CompletableFuture<List<LogRecordWithDLSN>> readBulk(int numEntries, long waitTime, TimeUnit timeUnit) {
        long wait = Math.max(1, timeUnit.toNanos(waitTime));
        return bulk(new Request(checkCount(numEntries), false, System.nanoTime() + wait));
    }

    private static int checkCount(int n) {
        if (n < 1) {
            throw new IllegalArgumentException("number of records must be positive, got " + n);
        }
        return n;
    }

    @SuppressWarnings("unchecked")
    private CompletableFuture<List<LogRecordWithDLSN>> bulk(Request r) {
        return (CompletableFuture<List<LogRecordWithDLSN>>) (CompletableFuture<?>) submit(r);
    }

    private CompletableFuture<Object> submit(Request r) {
        List<Runnable> done = new ArrayList<>();
        synchronized (lock) {
            if (closed) {
                r.future.completeExceptionally(fetcher.cancelled());
                return r.future;
            }
            pending.add(r);
            serve(done);
            lock.notifyAll();
        }
        done.forEach(Runnable::run);
        return r.future;
    }

    /** Satisfy what pending reads can be (under the lock); completions run after it is released. */
    private void serve(List<Runnable> done) {
        while (!pending.isEmpty()) {
            Request r = pending.peekFirst();
            if (!buffer.isEmpty()) {
                if (r.single) {
                    LogRecordWithDLSN rec = buffer.pollFirst();
                    pending.pollFirst();
                    done.add(() -> r.future.complete(rec));
                    continue;
                }
                boolean ready = r.deadlineNanos == 0 || buffer.size() >= r.n || error != null
                    || System.nanoTime() - r.deadlineNanos >= 0;
                if (!ready) {
                    return;
                }
                List<LogRecordWithDLSN> out = new ArrayList<>(Math.min(r.n, buffer.size()));
                while (out.size() < r.n && !buffer.isEmpty()) {
                    out.add(buffer.pollFirst());
                }
                pending.pollFirst();
                done.add(() -> r.future.complete(out));
            } else if (error != null) {
                Throwable e = error;
                pending.pollFirst();
                done.add(() -> r.future.completeExceptionally(e));
            } else {
                return;
            }
        }
    }

    /**
     * How long to wait for records: {@value #WAIT_MS} ms, or less when the first pending read is a
     * {@code readBulk} with a deadline that records already buffered would satisfy (at least 1 ms).
     */
    private long waitNanos() {
        long wait = TimeUnit.MILLISECONDS.toNanos(WAIT_MS);
        Request r = pending.peekFirst();
        if (r != null && r.deadlineNanos != 0 && !buffer.isEmpty()) {
            wait = Math.min(wait, Math.max(0, r.deadlineNanos - System.nanoTime()));
        }
        return Math.max(wait, TimeUnit.MILLISECONDS.toNanos(1));
    }

    private void prefetchLoop() {
        try {
            while (true) {
                List<Runnable> done = new ArrayList<>();
                boolean stop;
                synchronized (lock) {
                    while (!closed && (error != null || buffer.size() >= HIGH_WATER)) {
                        serve(done);
                        if (!done.isEmpty()) {
                            break;
                        }
                        long nanos = waitNanos();
                        try {
                            lock.wait(nanos / 1_000_000, (int) (nanos % 1_000_000));
                        } catch (InterruptedException e) {
                            // closing is signalled by the flag
                        }
                        serve(done);
                        if (!done.isEmpty()) {
                            break;
                        }
                    }
                    stop = closed;
                }
                done.forEach(Runnable::run);
                if (stop) {
                    break;
                }
                if (!done.isEmpty()) {
                    continue;
                }
                int waitMs;
                synchronized (lock) {
                    if (error != null || buffer.size() >= HIGH_WATER) {
                        continue;
                    }
                    waitMs = (int) TimeUnit.NANOSECONDS.toMillis(waitNanos());
                }
                List<LogRecordWithDLSN> recs = Collections.emptyList();
                Throwable failure = null;
                try {
                    recs = fetcher.fetch(waitMs);
                } catch (Throwable t) {
                    failure = t;
                }
                synchronized (lock) {
                    buffer.addAll(recs);
                    if (failure != null && error == null) {
                        error = failure;
                    }
                    serve(done);
                }
                done.forEach(Runnable::run);
            }
            try {
                fetcher.close();
                closeFuture.complete(null);
            } catch (Throwable t) {
                closeFuture.completeExceptionally(t);
            }
        } finally {
            fetcher.conn.releaseThreadConnection();
            if (onClosed != null) {
                onClosed.run();
            }
            closeFuture.complete(null);
        }
    }

    @Override
    public CompletableFuture<Void> asyncClose() {
        List<Request> cancelledReads;
        synchronized (lock) {
            if (!closed) {
                closed = true;
                buffer.clear();
                cancelledReads = new ArrayList<>(pending);
                pending.clear();
                lock.notifyAll();
            } else {
                cancelledReads = Collections.emptyList();
            }
        }
        for (Request r : cancelledReads) {
            r.future.completeExceptionally(fetcher.cancelled());
        }
        return closeFuture;
    }
}
