package org.apache.distributedlog.api;

import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import org.apache.distributedlog.LogRecordWithDLSN;
import org.apache.distributedlog.io.AsyncCloseable;

/**
 * An asynchronous reader. A prefetch thread reads ahead (up to 1000 records per call to the gateway); reads are
 * served in order from what was fetched. After an error (for example {@code EndOfStreamException}), the records
 * fetched before it are still delivered, then every read fails with the error.
 */
public interface AsyncLogReader extends AsyncCloseable {

    String getStreamName();

    /**
     * @return a future of the next record (waits for one to be written if needed)
     */
    CompletableFuture<LogRecordWithDLSN> readNext();

    /**
     * @return a future of 1 to {@code numEntries} records: completed as soon as at least one is available
     */
    CompletableFuture<List<LogRecordWithDLSN>> readBulk(int numEntries);

    /**
     * @return a future of 1 to {@code numEntries} records: completed when {@code numEntries} are available, or
     *         when at least one is and {@code waitTime} has passed
     */
    CompletableFuture<List<LogRecordWithDLSN>> readBulk(int numEntries, long waitTime, TimeUnit timeUnit);
}
