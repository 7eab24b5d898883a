package org.apache.distributedlog.exceptions;

import org.apache.distributedlog.shim.RemoteError;

/**
 * Thrown when the writer is in an error state.
 */
public class WriteException extends DLException {

    private static final long serialVersionUID = 1L;

    public WriteException(String stream, String transmitError) {
        super(StatusCode.WRITE_EXCEPTION,
              "Write rejected because stream " + stream + " has encountered an error : " + transmitError);
    }

    public WriteException(String stream, String transmitError, Throwable cause) {
        super(StatusCode.WRITE_EXCEPTION,
              "Write rejected because stream " + stream + " has encountered an error : " + transmitError, cause);
    }

    /**
     * An error raised by the Python storage core, carried across the gateway with its message.
     *
     * @param error the gateway's error description
     */
    public WriteException(RemoteError error) {
        super(StatusCode.WRITE_EXCEPTION, error);
    }
}
