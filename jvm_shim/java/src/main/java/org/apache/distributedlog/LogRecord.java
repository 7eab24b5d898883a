package org.apache.distributedlog;

import java.io.ByteArrayInputStream;
import java.io.InputStream;
import java.nio.ByteBuffer;

/**
 * A log record: a transaction id (non-decreasing per log) and a payload of at most
 * {@link #MAX_LOGRECORD_SIZE} bytes.
 */
public class LogRecord {

    /** The largest persistent record size (1 MiB - 8 KiB). */
    public static final int MAX_LOGRECORD_SIZE = 1024 * 1024 - 8 * 1024;
    /** The largest record set size (1 MiB - 4 KiB). */
    public static final int MAX_LOGRECORDSET_SIZE = 1024 * 1024 - 4 * 1024;

    private final long txid;
    private final byte[] payload;
    private int positionWithinLogSegment;

    protected LogRecord() {
        this.txid = 0;
        this.payload = new byte[0];
    }

    /**
     * @param txid the transaction id
     * @param payload the payload (not copied)
     */
    public LogRecord(long txid, byte[] payload) {
        if (payload == null) {
            throw new NullPointerException("payload");
        }
        this.txid = txid;
        this.payload = payload;
    }

    /**
     * @param txid the transaction id
     * @param buffer the payload: the remaining bytes of the buffer (copied)
     */
    public LogRecord(long txid, ByteBuffer buffer) {
        this.txid = txid;
        this.payload = new byte[buffer.remaining()];
        buffer.duplicate().get(this.payload);
    }

    public long getTransactionId() {
        return txid;
    }

    /**
     * @return the payload (not a copy)
     */
    public byte[] getPayload() {
        return payload;
    }

    public InputStream getPayLoadInputStream() {
        return new ByteArrayInputStream(payload);
    }

    void setPositionWithinLogSegment(int positionWithinLogSegment) {
        this.positionWithinLogSegment = positionWithinLogSegment;
    }

    public int getPositionWithinLogSegment() {
        return positionWithinLogSegment;
    }

    /**
     * @return false: readers never return control records
     */
    public boolean isControl() {
        return false;
    }

    /**
     * @return false: record sets are delivered as their member records
     */
    public boolean isRecordSet() {
        return false;
    }

    @Override
    public String toString() {
        return "LogRecord{txid=" + txid + ", payload=" + payload.length + " bytes}";
    }
}
