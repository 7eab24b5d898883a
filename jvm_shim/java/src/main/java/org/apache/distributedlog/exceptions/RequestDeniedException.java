package org.apache.distributedlog.exceptions;

import org.apache.distributedlog.shim.RemoteError;

/**
 * Thrown when a request is denied.
 */
public class RequestDeniedException extends DLException {

    private static final long serialVersionUID = 1L;

    public RequestDeniedException(String stream, String operation) {
        super(StatusCode.REQUEST_DENIED, operation + " request to stream " + stream + " is denied");
    }

    /**
     * An error raised by the Python storage core, carried across the gateway with its message.
     *
     * @param error the gateway's error description
     */
    public RequestDeniedException(RemoteError error) {
        super(StatusCode.REQUEST_DENIED, error);
    }
}
