package org.apache.distributedlog.exceptions;

import org.apache.distributedlog.shim.RemoteError;

/**
 * Thrown when the service (here: the gateway) is unavailable.
 */
public class ServiceUnavailableException extends DLException {

    private static final long serialVersionUID = 1L;

    public ServiceUnavailableException(String msg) {
        super(StatusCode.SERVICE_UNAVAILABLE, msg);
    }

    /**
     * An error raised by the Python storage core, carried across the gateway with its message.
     *
     * @param error the gateway's error description
     */
    public ServiceUnavailableException(RemoteError error) {
        super(StatusCode.SERVICE_UNAVAILABLE, error);
    }
}
