package org.apache.distributedlog.exceptions;

import org.apache.distributedlog.shim.RemoteError;

/**
 * Thrown when a record exceeds the maximum record size.
 */
public class LogRecordTooLongException extends DLException {

    private static final long serialVersionUID = 1L;

    public LogRecordTooLongException(String message) {
        super(StatusCode.TOO_LARGE_RECORD, message);
    }

    /**
     * An error raised by the Python storage core, carried across the gateway with its message.
     *
     * @param error the gateway's error description
     */
    public LogRecordTooLongException(RemoteError error) {
        super(StatusCode.TOO_LARGE_RECORD, error);
    }
}
