package org.apache.distributedlog.exceptions;

import org.apache.distributedlog.shim.RemoteError;

/**
 * Thrown when a read failed and may be retried.
 */
public class RetryableReadException extends DLException {

    private static final long serialVersionUID = 1L;

    public RetryableReadException(String streamName, String message) {
        super(StatusCode.RETRYABLE_READ, String.format("Reader on %s failed with %s", streamName, message));
    }

    public RetryableReadException(String streamName, String message, Throwable cause) {
        super(StatusCode.RETRYABLE_READ, String.format("Reader on %s failed with %s", streamName, message), cause);
    }

    /**
     * An error raised by the Python storage core, carried across the gateway with its message.
     *
     * @param error the gateway's error description
     */
    public RetryableReadException(RemoteError error) {
        super(StatusCode.RETRYABLE_READ, error);
    }
}
