package org.apache.distributedlog.exceptions;

import org.apache.distributedlog.shim.RemoteError;

/**
 * Thrown when the outstanding write limit was exceeded (retriable).
 */
public class OverCapacityException extends DLException {

    private static final long serialVersionUID = 1L;

    public OverCapacityException(String message) {
        super(StatusCode.OVER_CAPACITY, message);
    }

    public OverCapacityException(int code, String message) {
        super(code, message);
    }

    /**
     * An error raised by the Python storage core, carried across the gateway with its message.
     *
     * @param error the gateway's error description
     */
    public OverCapacityException(RemoteError error) {
        super(StatusCode.OVER_CAPACITY, error);
    }

    protected OverCapacityException(int defaultCode, RemoteError error) {
        super(defaultCode, error);
    }
}
