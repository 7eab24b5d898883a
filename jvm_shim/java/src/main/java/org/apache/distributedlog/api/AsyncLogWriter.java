package org.apache.distributedlog.api;

import java.util.List;
import java.util.concurrent.CompletableFuture;
import org.apache.distributedlog.DLSN;
import org.apache.distributedlog.LogRecord;
import org.apache.distributedlog.io.AsyncAbortable;
import org.apache.distributedlog.io.AsyncCloseable;

/**
 * An asynchronous writer: each write returns a future of the record's {@link DLSN}, completed (in write order)
 * once the record is durable. Records are sent to the gateway in batches; futures complete on the writer's
 * completion thread, so callbacks should not block for long.
 */
public interface AsyncLogWriter extends AsyncCloseable, AsyncAbortable {

    /**
     * @return the last transaction id written (acknowledged or not) through this writer
     */
    long getLastTxId();

    CompletableFuture<DLSN> write(LogRecord record);

    CompletableFuture<List<CompletableFuture<DLSN>>> writeBulk(List<LogRecord> record);

    /**
     * Truncate the log before {@code dlsn}.
     *
     * @return whether anything was truncated
     */
    CompletableFuture<Boolean> truncate(DLSN dlsn);

    /**
     * Seal the log with an end-of-stream marker once the writes before it are durable.
     *
     * @return the highest transaction id written before the marker
     */
    CompletableFuture<Long> markEndOfStream();

    String getStreamName();
}
