package org.apache.distributedlog.exceptions;

import org.apache.distributedlog.shim.RemoteError;

/**
 * Thrown when the log was sealed with an end-of-stream marker.
 */
public class EndOfStreamException extends DLException {

    private static final long serialVersionUID = 1L;

    public EndOfStreamException(String message) {
        super(StatusCode.END_OF_STREAM, message);
    }

    /**
     * An error raised by the Python storage core, carried across the gateway with its message.
     *
     * @param error the gateway's error description
     */
    public EndOfStreamException(RemoteError error) {
        super(StatusCode.END_OF_STREAM, error);
    }
}
