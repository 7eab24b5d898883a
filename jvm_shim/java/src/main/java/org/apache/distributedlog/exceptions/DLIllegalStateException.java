package org.apache.distributedlog.exceptions;

import org.apache.distributedlog.shim.RemoteError;

/**
 * Thrown on an operation in the wrong state.
 */
public class DLIllegalStateException extends DLException {

    private static final long serialVersionUID = 1L;

    public DLIllegalStateException(String msg) {
        super(StatusCode.ILLEGAL_STATE, msg);
    }

    public DLIllegalStateException(String msg, Throwable t) {
        super(StatusCode.ILLEGAL_STATE, msg, t);
    }

    /**
     * An error raised by the Python storage core, carried across the gateway with its message.
     *
     * @param error the gateway's error description
     */
    public DLIllegalStateException(RemoteError error) {
        super(StatusCode.ILLEGAL_STATE, error);
    }
}
