package org.apache.distributedlog.spark.rt;

import java.io.IOException;
import org.apache.distributedlog.DLSN;
import org.apache.distributedlog.LogRecordWithDLSN;
import org.apache.distributedlog.api.AsyncLogReader;
import org.apache.distributedlog.api.DistributedLogManager;
import org.apache.distributedlog.exceptions.LogEmptyException;
import org.apache.distributedlog.shim.Futures;

/** Positions of one log, through DistributedLog's Java API. */
final class Logs {

    private Logs() {
    }

    /** The first readable position: the first user record's DLSN, {@code (1,0,0)} for a log without any. */
    static DLSN earliest(DistributedLogManager dlm) throws IOException {
        try {
            return Futures.result(dlm.getFirstDLSNAsync());
        } catch (LogEmptyException e) {
            return Dlsns.INITIAL;
        }
    }

    /** Just past the last visible record (its DLSN + 1 slot), or null for a log without records. */
    static DLSN tail(DistributedLogManager dlm) throws IOException {
        try {
            return Futures.result(dlm.getLastDLSNAsync()).getNextDLSN();
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
            last = Futures.result(dlm.getLastTxIdAsync());
        } catch (LogEmptyException e) {
            return earliest(dlm);
        }
        if (last < txid) {
            DLSN t = tail(dlm);
            return t == null ? earliest(dlm) : t;
        }
        AsyncLogReader r = Futures.result(dlm.openAsyncLogReader(txid));
        try {
            LogRecordWithDLSN rec = Futures.result(r.readNext());  // there is one: the last record's txid is >= txid
            return Dlsns.max(rec.getDlsn(), earliest(dlm));
        } finally {
            r.asyncClose();
        }
    }
}
