package org.apache.distributedlog.exceptions;

import org.apache.distributedlog.shim.RemoteError;

/**
 * Thrown when the stream is not ready for writes (retriable).
 */
public class StreamNotReadyException extends DLException {

    private static final long serialVersionUID = 1L;

    public StreamNotReadyException(String msg) {
        super(StatusCode.STREAM_NOT_READY, msg);
    }

    /**
     * An error raised by the Python storage core, carried across the gateway with its message.
     *
     * @param error the gateway's error description
     */
    public StreamNotReadyException(RemoteError error) {
        super(StatusCode.STREAM_NOT_READY, error);
    }
}
