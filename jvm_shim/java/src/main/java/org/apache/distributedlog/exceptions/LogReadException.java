package org.apache.distributedlog.exceptions;

import org.apache.distributedlog.shim.RemoteError;

/**
 * Thrown when a read failed.
 */
public class LogReadException extends DLException {

    private static final long serialVersionUID = 1L;

    public LogReadException(String message) {
        super(StatusCode.LOG_READ_ERROR, message);
    }

    /**
     * An error raised by the Python storage core, carried across the gateway with its message.
     *
     * @param error the gateway's error description
     */
    public LogReadException(RemoteError error) {
        super(StatusCode.LOG_READ_ERROR, error);
    }
}
