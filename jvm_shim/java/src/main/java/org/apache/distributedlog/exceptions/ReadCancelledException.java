package org.apache.distributedlog.exceptions;

import org.apache.distributedlog.shim.RemoteError;

/**
 * Thrown when a reader was closed while a read was pending.
 */
public class ReadCancelledException extends DLException {

    private static final long serialVersionUID = 1L;

    public ReadCancelledException(String stream, String reason) {
        super(StatusCode.READ_CANCELLED_EXCEPTION, "Read cancelled on stream " + stream + " : " + reason);
    }

    /**
     * An error raised by the Python storage core, carried across the gateway with its message.
     *
     * @param error the gateway's error description
     */
    public ReadCancelledException(RemoteError error) {
        super(StatusCode.READ_CANCELLED_EXCEPTION, error);
    }
}
