package org.apache.distributedlog.shim;

import java.io.IOException;
import java.util.List;
import java.util.concurrent.atomic.AtomicReference;
import org.apache.distributedlog.LogRecord;
import org.apache.distributedlog.api.LogWriter;
import org.apache.distributedlog.exceptions.AlreadyClosedException;

/**
 * The sync writer: the async engine ({@link ShimAsyncLogWriter}) with DistributedLog's sync semantics. Writes are
 * batched; the first failed write puts the writer in error: every later {@code write}, {@code flush} and
 * {@code commit} throws that error, and so does {@code close} (after closing the writer).
 */
final class ShimLogWriter implements LogWriter {

    private final ShimAsyncLogWriter async;
    private final AtomicReference<Throwable> error = new AtomicReference<>();
    private volatile boolean closed;

    ShimLogWriter(ShimAsyncLogWriter async) {
        this.async = async;
    }

    private void check() throws IOException {
        Throwable e = error.get();
        if (e != null) {
            throw Errors.rethrow(e);
        }
        if (closed) {
            throw new AlreadyClosedException("the writer of " + async.getStreamName() + " is closed");
        }
    }

    @Override
    public void write(LogRecord record) throws IOException {
        check();
        async.write(record).whenComplete((d, t) -> {
            if (t != null) {
                error.compareAndSet(null, Futures.unwrap(t));
            }
        });
    }

    @Override
    @Deprecated
    public int writeBulk(List<LogRecord> records) throws IOException {
        for (LogRecord r : records) {
            write(r);
        }
        return records.size();
    }

    @Override
    public long flush() throws IOException {
        check();
        Futures.result(async.flush());
        check();
        return async.getLastAckedTxId();
    }

    @Override
    public long commit() throws IOException {
        return flush();
    }

    @Override
    public void markEndOfStream() throws IOException {
        check();
        Futures.result(async.markEndOfStream());
        check();
        close();
    }

    @Override
    public void close() throws IOException {
        if (closed) {
            return;
        }
        closed = true;
        Futures.result(async.asyncClose());
        // the writes close() waited for may have failed: report it, as a flush would
        Throwable e = error.get();
        if (e != null) {
            throw Errors.rethrow(e);
        }
    }

    @Override
    public void abort() throws IOException {
        closed = true;
        Futures.result(async.asyncAbort());
    }
}
