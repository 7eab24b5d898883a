package org.apache.distributedlog.exceptions;

import org.apache.distributedlog.shim.RemoteError;

/**
 * Thrown when a blocking call was interrupted.
 */
public class DLInterruptedException extends DLException {

    private static final long serialVersionUID = 1L;

    public DLInterruptedException(String msg) {
        super(StatusCode.INTERRUPTED, msg);
    }

    public DLInterruptedException(String msg, Throwable t) {
        super(StatusCode.INTERRUPTED, msg, t);
    }

    /**
     * An error raised by the Python storage core, carried across the gateway with its message.
     *
     * @param error the gateway's error description
     */
    public DLInterruptedException(RemoteError error) {
        super(StatusCode.INTERRUPTED, error);
    }
}
