package org.apache.distributedlog.spark.rt;

import java.io.IOException;
import java.io.InterruptedIOException;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ExecutionException;
import org.apache.distributedlog.DLSN;
import org.apache.distributedlog.LogRecordWithDLSN;
import org.apache.distributedlog.api.AsyncLogReader;
import org.apache.distributedlog.api.DistributedLogManager;
import org.apache.distributedlog.exceptions.LogEmptyException;

/** Positions of one log, through DistributedLog's Java API. */
final class Logs {

    private Logs() {
    }

    /** The value of a future, its failure unwrapped (an IOException as it is). */
    static <T> T await(CompletableFuture<T> f) throws IOException {
        try {
            return f.get();
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            InterruptedIOException ie = new InterruptedIOException("interrupted");
            ie.initCause(e);
            throw ie;
        } catch (ExecutionException e) {
            throw unwrap(e.getCause());
        }
    }

    static IOException unwrap(Throwable t) {
        while (t instanceof ExecutionException || t instanceof java.util.concurrent.CompletionException) {
            if (t.getCause() == null) {
                break;
            }
            t = t.getCause();
        }
        if (t instanceof IOException) {
            return (IOException) t;
        }
        if (t instanceof RuntimeException) {
            throw (RuntimeException) t;
        }
        if (t instanceof Error) {
            throw (Error) t;
        }
        return new IOException(t);
    }

    /** The first readable position: the first user record's DLSN, {@code (1,0,0)} for a log without any. */
    static DLSN earliest(DistributedLogManager dlm) throws IOException {
        try {
            return await(dlm.getFirstDLSNAsync());
        } catch (LogEmptyException e) {
            return Dlsns.INITIAL;
        }
    }

    /** Just past the last visible record (its DLSN + 1 slot), or null for a log without records. */
    static DLSN tail(DistributedLogManager dlm) throws IOException {
        try {
            return await(dlm.getLastDLSNAsync()).getNextDLSN();
        } catch (LogEmptyException e) {
            return null;
        }
    }

    /**
     * The position of the first record whose transaction id is at least {@code txid} (the tail when there is
     * none yet), not before {@link #earliest}.
     */
    static DLSN atTxId(DistributedLogManager dlm, long txid) throws IOException {
        long last;
        try {
            last = await(dlm.getLastTxIdAsync());
        } catch (LogEmptyException e) {
            return earliest(dlm);
        }
        if (last < txid) {
            DLSN t = tail(dlm);
            return t == null ? earliest(dlm) : t;
        }
        AsyncLogReader r = await(dlm.openAsyncLogReader(txid));
        try {
            LogRecordWithDLSN rec = await(r.readNext());  // there is one: the last record's txid is >= txid
            return Dlsns.max(rec.getDlsn(), earliest(dlm));
        } finally {
            r.asyncClose();
        }
    }
}
