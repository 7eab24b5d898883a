package org.apache.distributedlog.exceptions;

import org.apache.distributedlog.shim.RemoteError;

/**
 * Thrown when the client was closed.
 */
public class DLClientClosedException extends DLException {

    private static final long serialVersionUID = 1L;

    public DLClientClosedException(String msg) {
        super(StatusCode.CLIENT_CLOSED, msg);
    }

    public DLClientClosedException(String msg, Throwable t) {
        super(StatusCode.CLIENT_CLOSED, msg, t);
    }

    /**
     * An error raised by the Python storage core, carried across the gateway with its message.
     *
     * @param error the gateway's error description
     */
    public DLClientClosedException(RemoteError error) {
        super(StatusCode.CLIENT_CLOSED, error);
    }
}
