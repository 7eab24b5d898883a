package org.apache.distributedlog.exceptions;

import org.apache.distributedlog.shim.RemoteError;

/**
 * Thrown when the log already exists.
 */
public class LogExistsException extends DLException {

    private static final long serialVersionUID = 1L;

    public LogExistsException(String msg) {
        super(StatusCode.LOG_EXISTS, msg);
    }

    /**
     * An error raised by the Python storage core, carried across the gateway with its message.
     *
     * @param error the gateway's error description
     */
    public LogExistsException(RemoteError error) {
        super(StatusCode.LOG_EXISTS, error);
    }
}
