package org.apache.distributedlog.shim;

import java.io.IOException;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.Executor;
import java.util.concurrent.TimeUnit;
import org.apache.distributedlog.DLSN;
import org.apache.distributedlog.api.AsyncLogReader;
import org.apache.distributedlog.api.AsyncLogWriter;
import org.apache.distributedlog.api.DistributedLogManager;
import org.apache.distributedlog.api.LogReader;
import org.apache.distributedlog.api.LogWriter;
import org.apache.distributedlog.exceptions.AlreadyClosedException;

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
    private final Set<Object> children = ConcurrentHashMap.newKeySet();
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
        Map<String, Object> a = new LinkedHashMap<>();
        a.put("log", handle);
        return a;
    }

    private void check() throws IOException {
        if (closed) {
            throw new AlreadyClosedException("the log manager of " + name + " is closed");
        }
    }

    @Override
    public String getStreamName() {
        return name;
    }

    // --- writers ----------------------------------------------------------------------------------

    private ShimAsyncLogWriter newWriter() throws IOException {
        check();
        long w = Json.getLong(conn.call("writer.open", args()).result, "writer");
        Object[] self = new Object[1];
        ShimAsyncLogWriter writer = new ShimAsyncLogWriter(conn, w, name, () -> children.remove(self[0]));
        self[0] = writer;
        children.add(writer);
        return writer;
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
        Object[] self = new Object[1];
        ShimLogReader reader = new ShimLogReader(conn, r, name, readWaitMs, () -> children.remove(self[0]));
        self[0] = reader;
        children.add(reader);
        return reader;
    }

    private AsyncLogReader asyncReader(DLSN fromDLSN, Long fromTxnId) throws IOException {
        long r = openReader(fromDLSN, fromTxnId);
        Object[] self = new Object[1];
        ShimAsyncLogReader reader = new ShimAsyncLogReader(conn, r, name, () -> children.remove(self[0]));
        self[0] = reader;
        children.add(reader);
        return reader;
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

    /** Close the writers (waiting up to 30 s for their writes, else aborting) and readers opened from here. */
    void closeChildren() {
        List<CompletableFuture<Void>> closing = new ArrayList<>();
        for (Object c : new ArrayList<>(children)) {
            if (c instanceof ShimAsyncLogWriter) {
                closing.add(((ShimAsyncLogWriter) c).asyncClose());
            } else if (c instanceof ShimAsyncLogReader) {
                closing.add(((ShimAsyncLogReader) c).asyncClose());
            } else if (c instanceof ShimLogReader) {
                closing.add(((ShimLogReader) c).asyncClose());
            }
        }
        for (int i = 0; i < closing.size(); i++) {
            try {
                closing.get(i).get(30, TimeUnit.SECONDS);
            } catch (Exception e) {
                // a writer that cannot close is left to the gateway (its handles die with the namespace)
            }
        }
        children.clear();
    }

    @Override
    public void close() throws IOException {
        if (closed) {
            return;
        }
        closed = true;
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
