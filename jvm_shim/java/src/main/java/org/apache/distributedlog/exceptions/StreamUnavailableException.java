package org.apache.distributedlog.exceptions;

import org.apache.distributedlog.shim.RemoteError;

/**
 * Thrown when the stream is unavailable.
 */
public class StreamUnavailableException extends DLException {

    private static final long serialVersionUID = 1L;

    public StreamUnavailableException(String msg) {
        super(StatusCode.STREAM_UNAVAILABLE, msg);
    }

    /**
     * An error raised by the Python storage core, carried across the gateway with its message.
     *
     * @param error the gateway's error description
     */
    public StreamUnavailableException(RemoteError error) {
        super(StatusCode.STREAM_UNAVAILABLE, error);
    }
}
