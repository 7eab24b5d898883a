package org.apache.distributedlog.exceptions;

import org.apache.distributedlog.shim.RemoteError;

/**
 * Thrown when there are too many streams.
 */
public class TooManyStreamsException extends OverCapacityException {

    private static final long serialVersionUID = 1L;

    public TooManyStreamsException(String message) {
        super(StatusCode.TOO_MANY_STREAMS, message);
    }

    /**
     * An error raised by the Python storage core, carried across the gateway with its message.
     *
     * @param error the gateway's error description
     */
    public TooManyStreamsException(RemoteError error) {
        super(StatusCode.TOO_MANY_STREAMS, error);
    }
}
