package org.apache.distributedlog.shim;

import java.io.IOException;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.CancellationException;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.Executor;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;
import java.util.function.Function;
import org.apache.distributedlog.DLSN;
import org.apache.distributedlog.api.AsyncLogReader;
import org.apache.distributedlog.api.AsyncLogWriter;
import org.apache.distributedlog.api.DistributedLogManager;
import org.apache.distributedlog.api.LogReader;
import org.apache.distributedlog.api.LogWriter;
import org.apache.distributedlog.exceptions.AlreadyClosedException;
import org.apache.distributedlog.io.AsyncCloseable;

/**
 * A log of the namespace ({@code log.open}); the writers and readers opened from it are closed with it.
 */
final class ShimLogManager implements DistributedLogManager {

    private final GatewayConnection conn;
    private final long handle;
    private final String name;
    private final Executor executor;
    private final int readWaitMs;
    private final Runnable onClosed;
    /** The writers and readers opened here and not closed yet (each removes itself when it closes). */
    private final Set<AsyncCloseable> children = ConcurrentHashMap.newKeySet();
    private volatile boolean closed;

    ShimLogManager(GatewayConnection conn, long handle, String name, Executor executor, int readWaitMs,
                   Runnable onClosed) {
        this.conn = conn;
        this.handle = handle;
        this.name = name;
        this.executor = executor;
        this.readWaitMs = readWaitMs;
        this.onClosed = onClosed;
    }

    private Map<String, Object> args() {
        return Json.object("log", handle);
    }

    private void check() throws IOException {
        if (closed) {
            throw closedError();
        }
    }

    private AlreadyClosedException closedError() {
        return new AlreadyClosedException("the log manager of " + name + " is closed");
    }

    /**
     * Make a writer or reader with {@code make} (given the callback that forgets it once closed) and remember it
     * until then. One opened while this log manager closes is closed at once, and the open fails.
     */
    private <T extends AsyncCloseable> T track(Function<Runnable, T> make) throws IOException {
        Object[] self = new Object[1];
        T child = make.apply(() -> children.remove(self[0]));
        self[0] = child;
        children.add(child);
        if (closed) { // close() may have listed the children before this one was added
            child.asyncClose();
            throw closedError();
        }
        return child;
    }

    @Override
    public String getStreamName() {
        return name;
    }

    // --- writers ----------------------------------------------------------------------------------

    private ShimAsyncLogWriter newWriter() throws IOException {
        check();
        long w = Json.getLong(conn.call("writer.open", args()).result, "writer");
        return track(onClosed -> new ShimAsyncLogWriter(conn, w, name, onClosed));
    }

    @Override
    public CompletableFuture<AsyncLogWriter> openAsyncLogWriter() {
        return Futures.supply(executor, this::newWriter);
    }

    @Override
    public LogWriter openLogWriter() throws IOException {
        return new ShimLogWriter(newWriter());
    }

    @Override
    public LogWriter startLogSegmentNonPartitioned() throws IOException {
        return openLogWriter();
    }

    @Override
    public AsyncLogWriter startAsyncLogSegmentNonPartitioned() throws IOException {
        return newWriter();
    }

    // --- readers ----------------------------------------------------------------------------------

    private long openReader(DLSN fromDLSN, Long fromTxnId) throws IOException {
        check();
        Map<String, Object> a = args();
        if (fromDLSN != null) {
            a.put("dlsn", Wire.toText(fromDLSN));
        } else {
            a.put("txid", fromTxnId);
        }
        return Json.getLong(conn.call("reader.open", a).result, "reader");
    }

    private LogReader syncReader(DLSN fromDLSN, Long fromTxnId) throws IOException {
        long r = openReader(fromDLSN, fromTxnId);
        return track(onClosed -> new ShimLogReader(conn, r, name, readWaitMs, onClosed));
    }

    private AsyncLogReader asyncReader(DLSN fromDLSN, Long fromTxnId) throws IOException {
        long r = openReader(fromDLSN, fromTxnId);
        return track(onClosed -> new ShimAsyncLogReader(conn, r, name, onClosed));
    }

    @Override
    public LogReader openLogReader(long fromTxnId) throws IOException {
        return syncReader(null, fromTxnId);
    }

    @Override
    public LogReader openLogReader(DLSN fromDLSN) throws IOException {
        return syncReader(nonNull(fromDLSN), null);
    }

    @Override
    public CompletableFuture<AsyncLogReader> openAsyncLogReader(long fromTxnId) {
        return Futures.supply(executor, () -> asyncReader(null, fromTxnId));
    }

    @Override
    public CompletableFuture<AsyncLogReader> openAsyncLogReader(DLSN fromDLSN) {
        DLSN from = nonNull(fromDLSN);
        return Futures.supply(executor, () -> asyncReader(from, null));
    }

    @Override
    public LogReader getInputStream(long fromTxnId) throws IOException {
        return openLogReader(fromTxnId);
    }

    @Override
    public LogReader getInputStream(DLSN fromDLSN) throws IOException {
        return openLogReader(fromDLSN);
    }

    @Override
    public AsyncLogReader getAsyncLogReader(long fromTxnId) throws IOException {
        return asyncReader(null, fromTxnId);
    }

    @Override
    public AsyncLogReader getAsyncLogReader(DLSN fromDLSN) throws IOException {
        return asyncReader(nonNull(fromDLSN), null);
    }

    private static DLSN nonNull(DLSN d) {
        if (d == null) {
            throw new NullPointerException("fromDLSN");
        }
        return d;
    }

    // --- metadata ---------------------------------------------------------------------------------

    @Override
    public long getLastTxId() throws IOException {
        check();
        return Json.getLong(conn.call("log.lastTxId", args()).result, "txid");
    }

    @Override
    public CompletableFuture<Long> getLastTxIdAsync() {
        return Futures.supply(executor, this::getLastTxId);
    }

    @Override
    public CompletableFuture<DLSN> getFirstDLSNAsync() {
        return Futures.supply(executor, () -> {
            check();
            return Wire.parseText(Json.getString(conn.call("log.firstDLSN", args()).result, "dlsn"));
        });
    }

    @Override
    public DLSN getLastDLSN() throws IOException {
        check();
        return Wire.parseText(Json.getString(conn.call("log.lastDLSN", args()).result, "dlsn"));
    }

    @Override
    public CompletableFuture<DLSN> getLastDLSNAsync() {
        return Futures.supply(executor, this::getLastDLSN);
    }

    @Override
    public long getLogRecordCount() throws IOException {
        check();
        return Json.getLong(conn.call("log.recordCount", args()).result, "count");
    }

    @Override
    public CompletableFuture<Long> getLogRecordCountAsync(DLSN beginDLSN) {
        return Futures.supply(executor, () -> {
            check();
            Map<String, Object> a = args();
            if (beginDLSN != null) {
                a.put("from", Wire.toText(beginDLSN));
            }
            return Json.getLong(conn.call("log.recordCount", a).result, "count");
        });
    }

    @Override
    public boolean isEndOfStreamMarked() throws IOException {
        check();
        return Json.getBoolean(conn.call("log.isEndOfStreamMarked", args()).result, "eos");
    }

    @Override
    public void delete() throws IOException {
        check();
        conn.call("log.delete", args());
    }

    // --- closing ----------------------------------------------------------------------------------

    /**
     * Close the writers (waiting for their writes) and readers opened from here, waiting up to 30 s for each; one
     * that cannot close in time is left to the gateway ({@code log.close} closes its handle there).
     */
    private void closeChildren() {
        List<CompletableFuture<Void>> closing = new ArrayList<>();
        for (AsyncCloseable c : new ArrayList<>(children)) {
            closing.add(c.asyncClose());
        }
        for (CompletableFuture<Void> f : closing) {
            try {
                f.get(30, TimeUnit.SECONDS);
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
                return;
            } catch (ExecutionException | TimeoutException | CancellationException e) {
                // left to the gateway
            }
        }
    }

    @Override
    public void close() throws IOException {
        synchronized (this) {
            if (closed) {
                return;
            }
            closed = true;
        }
        try {
            closeChildren();
            if (!conn.isClosed()) {
                conn.call("log.close", args());
            }
        } finally {
            if (onClosed != null) {
                onClosed.run();
            }
        }
    }

    @Override
    public CompletableFuture<Void> asyncClose() {
        return Futures.supply(executor, () -> {
            close();
            return null;
        });
    }
}
