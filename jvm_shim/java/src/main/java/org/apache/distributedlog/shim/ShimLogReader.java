package org.apache.distributedlog.shim;

import java.io.IOException;
import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import org.apache.distributedlog.LogRecordWithDLSN;
import org.apache.distributedlog.api.LogReader;
import org.apache.distributedlog.exceptions.ReadCancelledException;

/**
 * The sync reader: fetches with {@code reader.read} (up to {@link Fetcher#MAX_RECORDS} records or about
 * {@link Fetcher#MAX_BYTES} bytes per call) in the calling thread and serves from memory.
 */
final class ShimLogReader implements LogReader {

    private final Fetcher fetcher;
    private final int waitMs;
    private final Runnable onClosed;
    private final ArrayDeque<LogRecordWithDLSN> buffer = new ArrayDeque<>();
    private IOException error;
    private boolean closed;

    ShimLogReader(GatewayConnection conn, long handle, String streamName, int waitMs, Runnable onClosed) {
        this.fetcher = new Fetcher(conn, handle, streamName);
        this.waitMs = waitMs;
        this.onClosed = onClosed;
    }

    private boolean fill(int wait) throws IOException {
        if (closed) {
            throw fetcher.cancelled();
        }
        if (error != null) {
            throw error;
        }
        try {
            List<LogRecordWithDLSN> recs = fetcher.fetch(wait);
            buffer.addAll(recs);
            return !recs.isEmpty();
        } catch (IOException e) {
            error = e;
            throw e;
        }
    }

    @Override
    public synchronized LogRecordWithDLSN readNext(boolean nonBlocking) throws IOException {
        if (buffer.isEmpty()) {
            fill(nonBlocking ? 0 : waitMs);
        }
        return buffer.pollFirst();
    }

    @Override
    public synchronized List<LogRecordWithDLSN> readBulk(boolean nonBlocking, int numLogRecords) throws IOException {
        if (numLogRecords < 1) {
            throw new IllegalArgumentException("number of records must be positive, got " + numLogRecords);
        }
        List<LogRecordWithDLSN> out = new ArrayList<>(Math.min(numLogRecords, 1024));
        while (out.size() < numLogRecords) {
            if (buffer.isEmpty() && !fill(out.isEmpty() && !nonBlocking ? waitMs : 0)) {
                break;
            }
            while (out.size() < numLogRecords && !buffer.isEmpty()) {
                out.add(buffer.pollFirst());
            }
        }
        return out;
    }

    @Override
    public synchronized void close() throws IOException {
        if (closed) {
            return;
        }
        closed = true;
        buffer.clear();
        try {
            fetcher.close();
        } finally {
            if (onClosed != null) {
                onClosed.run();
            }
        }
    }

    @Override
    public CompletableFuture<Void> asyncClose() {
        try {
            close();
            return CompletableFuture.completedFuture(null);
        } catch (IOException e) {
            return Futures.failed(e);
        }
    }

    /** {@code reader.read} calls with a record limit that keeps a response near {@link #MAX_BYTES}. */
    static final class Fetcher {
        static final int MAX_RECORDS = 1000;
        static final int MAX_BYTES = 4 << 20;

        final GatewayConnection conn;
        final long handle;
        final String streamName;
        private int max = 100;

        Fetcher(GatewayConnection conn, long handle, String streamName) {
            this.conn = conn;
            this.handle = handle;
            this.streamName = streamName;
        }

        List<LogRecordWithDLSN> fetch(int waitMs) throws IOException {
            Map<String, Object> a = Json.object("reader", handle);
            a.put("max", max);
            a.put("waitMs", waitMs);
            GatewayConnection.Response r = conn.call("reader.read", a);
            List<LogRecordWithDLSN> recs = Wire.decodeRead(r.data);
            if (!recs.isEmpty()) {
                long avg = Math.max(1, (long) r.data.length / recs.size());
                max = (int) Math.max(1, Math.min(MAX_RECORDS, MAX_BYTES / avg));
            }
            return recs;
        }

        void close() throws IOException {
            conn.call("reader.close", Json.object("reader", handle));
        }

        /** The error of a read on a closed reader (DistributedLog's). */
        ReadCancelledException cancelled() {
            return new ReadCancelledException(streamName, "Reader was closed");
        }
    }
}
