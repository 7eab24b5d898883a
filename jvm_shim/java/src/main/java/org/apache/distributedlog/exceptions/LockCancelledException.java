package org.apache.distributedlog.exceptions;

import org.apache.distributedlog.shim.RemoteError;

/**
 * Thrown when a lock acquisition was cancelled.
 */
public class LockCancelledException extends LockingException {

    private static final long serialVersionUID = 1L;

    public LockCancelledException(String lockPath, String message, Throwable cause) {
        super(lockPath, message, cause);
    }

    /**
     * An error raised by the Python storage core, carried across the gateway with its message.
     *
     * @param error the gateway's error description
     */
    public LockCancelledException(RemoteError error) {
        super(error);
    }
}
