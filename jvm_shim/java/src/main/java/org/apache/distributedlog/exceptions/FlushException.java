package org.apache.distributedlog.exceptions;

import org.apache.distributedlog.shim.RemoteError;

/**
 * Thrown when a flush did not complete.
 */
public class FlushException extends DLException {

    private static final long serialVersionUID = 1L;

    private final long lastTxIdWritten;
    private final long lastTxIdAcknowledged;

    public FlushException(String message, long lastTxIdWritten, long lastTxIdAcknowledged) {
        super(StatusCode.FLUSH_TIMEOUT, message);
        this.lastTxIdWritten = lastTxIdWritten;
        this.lastTxIdAcknowledged = lastTxIdAcknowledged;
    }

    public FlushException(String message, long lastTxIdWritten, long lastTxIdAcknowledged, Throwable cause) {
        super(StatusCode.FLUSH_TIMEOUT, message, cause);
        this.lastTxIdWritten = lastTxIdWritten;
        this.lastTxIdAcknowledged = lastTxIdAcknowledged;
    }

    /**
     * An error raised by the Python storage core, carried across the gateway with its message.
     *
     * @param error the gateway's error description
     */
    public FlushException(RemoteError error) {
        super(StatusCode.FLUSH_TIMEOUT, error);
        this.lastTxIdWritten = -1L;
        this.lastTxIdAcknowledged = -1L;
    }

    public long getLastTxIdWritten() {
        return lastTxIdWritten;
    }

    public long getLastTxIdAcknowledged() {
        return lastTxIdAcknowledged;
    }
}
