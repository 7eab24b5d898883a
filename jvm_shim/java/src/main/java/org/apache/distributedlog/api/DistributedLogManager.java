package org.apache.distributedlog.api;

import java.io.Closeable;
import java.io.IOException;
import java.util.concurrent.CompletableFuture;
import org.apache.distributedlog.DLSN;
import org.apache.distributedlog.io.AsyncCloseable;

/**
 * A handle on one log of a namespace: opens its writers and readers and reads its metadata.
 */
public interface DistributedLogManager extends AsyncCloseable, Closeable {

    String getStreamName();

    // --- writers ----------------------------------------------------------------------------

    /**
     * Open the (single, fenced) async writer of the log; fails with {@code OwnershipAcquireFailedException} if
     * another writer holds it.
     */
    CompletableFuture<AsyncLogWriter> openAsyncLogWriter();

    /**
     * Open the (single, fenced) sync writer of the log.
     *
     * @throws org.apache.distributedlog.exceptions.OwnershipAcquireFailedException another writer holds the log
     */
    LogWriter openLogWriter() throws IOException;

    /** Same as {@link #openLogWriter()} (DistributedLog's deprecated name). */
    LogWriter startLogSegmentNonPartitioned() throws IOException;

    /** Same as {@link #openAsyncLogWriter()}, waiting for it (DistributedLog's deprecated name). */
    AsyncLogWriter startAsyncLogSegmentNonPartitioned() throws IOException;

    // --- readers ----------------------------------------------------------------------------

    /** A sync reader from the first record whose transaction id is at least {@code fromTxnId}. */
    LogReader openLogReader(long fromTxnId) throws IOException;

    /** A sync reader from {@code fromDLSN} (inclusive). */
    LogReader openLogReader(DLSN fromDLSN) throws IOException;

    CompletableFuture<AsyncLogReader> openAsyncLogReader(long fromTxnId);

    CompletableFuture<AsyncLogReader> openAsyncLogReader(DLSN fromDLSN);

    /** Same as {@link #openLogReader(long)} (deprecated name). */
    LogReader getInputStream(long fromTxnId) throws IOException;

    /** Same as {@link #openLogReader(DLSN)} (deprecated name). */
    LogReader getInputStream(DLSN fromDLSN) throws IOException;

    /** Same as {@link #openAsyncLogReader(long)}, waiting for it (deprecated name). */
    AsyncLogReader getAsyncLogReader(long fromTxnId) throws IOException;

    /** Same as {@link #openAsyncLogReader(DLSN)}, waiting for it (deprecated name). */
    AsyncLogReader getAsyncLogReader(DLSN fromDLSN) throws IOException;

    // --- metadata ---------------------------------------------------------------------------

    /** @return the log's last transaction id */
    long getLastTxId() throws IOException;

    CompletableFuture<Long> getLastTxIdAsync();

    /** @return the DLSN of the log's first readable record */
    CompletableFuture<DLSN> getFirstDLSNAsync();

    /** @return the DLSN of the log's last record */
    DLSN getLastDLSN() throws IOException;

    CompletableFuture<DLSN> getLastDLSNAsync();

    /** @return the number of records in the active (untruncated) part of the log */
    long getLogRecordCount() throws IOException;

    /** @return the number of records from {@code beginDLSN} on */
    CompletableFuture<Long> getLogRecordCountAsync(DLSN beginDLSN);

    /** @return whether the log was sealed with an end-of-stream marker */
    boolean isEndOfStreamMarked() throws IOException;

    /** Delete the log. */
    void delete() throws IOException;
}
