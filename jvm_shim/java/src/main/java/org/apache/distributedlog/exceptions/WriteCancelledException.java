package org.apache.distributedlog.exceptions;

import org.apache.distributedlog.shim.RemoteError;

/**
 * Thrown when a buffered write was cancelled because the writer aborted or failed.
 */
public class WriteCancelledException extends DLException {

    private static final long serialVersionUID = 1L;

    public WriteCancelledException(String stream, Throwable t) {
        super(StatusCode.WRITE_CANCELLED_EXCEPTION, "Write cancelled on stream " + stream + " due to an earlier error",
              t);
    }

    public WriteCancelledException(String stream, String reason) {
        super(StatusCode.WRITE_CANCELLED_EXCEPTION, "Write cancelled on stream " + stream + " due to : " + reason);
    }

    public WriteCancelledException(String stream) {
        super(StatusCode.WRITE_CANCELLED_EXCEPTION, "Write cancelled on stream " + stream + " due to an earlier error");
    }

    /**
     * An error raised by the Python storage core, carried across the gateway with its message.
     *
     * @param error the gateway's error description
     */
    public WriteCancelledException(RemoteError error) {
        super(StatusCode.WRITE_CANCELLED_EXCEPTION, error);
    }
}
