package org.apache.distributedlog.exceptions;

import org.apache.distributedlog.shim.RemoteError;

/**
 * Thrown by operations the shim does not support.
 */
public class NotYetImplementedException extends DLException {

    private static final long serialVersionUID = 1L;

    public NotYetImplementedException(String method) {
        super(StatusCode.NOT_IMPLEMENTED, method + " is not supported by the current version");
    }

    /**
     * An error raised by the Python storage core, carried across the gateway with its message.
     *
     * @param error the gateway's error description
     */
    public NotYetImplementedException(RemoteError error) {
        super(StatusCode.NOT_IMPLEMENTED, error);
    }
}
