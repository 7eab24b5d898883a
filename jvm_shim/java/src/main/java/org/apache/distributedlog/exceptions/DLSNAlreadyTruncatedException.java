package org.apache.distributedlog.exceptions;

import org.apache.distributedlog.shim.RemoteError;

/**
 * Thrown when a read position (a DLSN, or the record a transaction id leads to) lies in data that was already
 * truncated: the Python {@code AlreadyTruncatedTransactionError}. It is an
 * {@link AlreadyTruncatedTransactionException}, so DistributedLog code catching that class sees it too.
 */
public class DLSNAlreadyTruncatedException extends AlreadyTruncatedTransactionException {

    private static final long serialVersionUID = 1L;

    public DLSNAlreadyTruncatedException(String message) {
        super(message);
    }

    /**
     * An error raised by the Python storage core, carried across the gateway with its message.
     *
     * @param error the gateway's error description
     */
    public DLSNAlreadyTruncatedException(RemoteError error) {
        super(error);
    }
}
