package org.apache.distributedlog.exceptions;

import org.apache.distributedlog.shim.RemoteError;

/**
 * Thrown when an operation is attempted on a closed handle.
 */
public class AlreadyClosedException extends DLException {

    private static final long serialVersionUID = 1L;

    public AlreadyClosedException(String message) {
        super(StatusCode.ALREADY_CLOSED, message);
    }

    /**
     * An error raised by the Python storage core, carried across the gateway with its message.
     *
     * @param error the gateway's error description
     */
    public AlreadyClosedException(RemoteError error) {
        super(StatusCode.ALREADY_CLOSED, error);
    }
}
