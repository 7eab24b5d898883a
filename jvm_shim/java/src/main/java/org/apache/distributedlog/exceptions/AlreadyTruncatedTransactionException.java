package org.apache.distributedlog.exceptions;

import org.apache.distributedlog.shim.RemoteError;

/**
 * Thrown when a read position lies in data that was already truncated.
 */
public class AlreadyTruncatedTransactionException extends DLException {

    private static final long serialVersionUID = 1L;

    public AlreadyTruncatedTransactionException(String message) {
        super(StatusCode.TRUNCATED_TRANSACTION, message);
    }

    /**
     * An error raised by the Python storage core, carried across the gateway with its message.
     *
     * @param error the gateway's error description
     */
    public AlreadyTruncatedTransactionException(RemoteError error) {
        super(StatusCode.TRUNCATED_TRANSACTION, error);
    }
}
