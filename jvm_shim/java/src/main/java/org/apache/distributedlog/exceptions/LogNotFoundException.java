package org.apache.distributedlog.exceptions;

import org.apache.distributedlog.shim.RemoteError;

/**
 * Thrown when the log does not exist.
 */
public class LogNotFoundException extends DLException {

    private static final long serialVersionUID = 1L;

    public LogNotFoundException(String message) {
        super(StatusCode.LOG_NOT_FOUND, message);
    }

    /**
     * An error raised by the Python storage core, carried across the gateway with its message.
     *
     * @param error the gateway's error description
     */
    public LogNotFoundException(RemoteError error) {
        super(StatusCode.LOG_NOT_FOUND, error);
    }
}
