package org.apache.distributedlog.exceptions;

import org.apache.distributedlog.shim.RemoteError;

/**
 * Thrown when an internal invariant failed.
 */
public class UnexpectedException extends DLException {

    private static final long serialVersionUID = 1L;

    public UnexpectedException() {
        super(StatusCode.UNEXPECTED);
    }

    public UnexpectedException(String msg) {
        super(StatusCode.UNEXPECTED, msg);
    }

    public UnexpectedException(String msg, Throwable t) {
        super(StatusCode.UNEXPECTED, msg, t);
    }

    /**
     * An error raised by the Python storage core, carried across the gateway with its message.
     *
     * @param error the gateway's error description
     */
    public UnexpectedException(RemoteError error) {
        super(StatusCode.UNEXPECTED, error);
    }
}
