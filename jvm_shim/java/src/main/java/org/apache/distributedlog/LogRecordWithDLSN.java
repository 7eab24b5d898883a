package org.apache.distributedlog;

/**
 * A record read from a log: its {@link DLSN} and its sequence id (its position in the log, contiguous from 0).
 */
public class LogRecordWithDLSN extends LogRecord {

    private final DLSN dlsn;
    private final long sequenceId;

    /**
     * @param dlsn the record's position
     * @param txid the transaction id
     * @param data the payload
     * @param sequenceId the record's sequence id
     */
    public LogRecordWithDLSN(DLSN dlsn, long txid, byte[] data, long sequenceId) {
        super(txid, data);
        this.dlsn = dlsn;
        this.sequenceId = sequenceId;
    }

    public DLSN getDlsn() {
        return dlsn;
    }

    public long getSequenceId() {
        return sequenceId;
    }

    @Override
    public String toString() {
        return "LogRecordWithDLSN{"
            + "dlsn=" + dlsn
            + ", txid=" + getTransactionId()
            + ", sequenceId=" + sequenceId
            + '}';
    }
}
