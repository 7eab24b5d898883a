package org.apache.distributedlog.exceptions;

import org.apache.distributedlog.shim.RemoteError;

/**
 * Thrown when the log has no user records.
 */
public class LogEmptyException extends DLException {

    private static final long serialVersionUID = 1L;

    public LogEmptyException(String message) {
        super(StatusCode.LOG_EMPTY, message);
    }

    /**
     * An error raised by the Python storage core, carried across the gateway with its message.
     *
     * @param error the gateway's error description
     */
    public LogEmptyException(RemoteError error) {
        super(StatusCode.LOG_EMPTY, error);
    }
}
