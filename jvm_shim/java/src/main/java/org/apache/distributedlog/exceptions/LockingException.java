package org.apache.distributedlog.exceptions;

import org.apache.distributedlog.shim.RemoteError;

/**
 * Thrown when the write lock of a log could not be taken or was lost.
 */
public class LockingException extends DLException {

    private static final long serialVersionUID = 1L;

    public LockingException(String lockPath, String message) {
        this(StatusCode.LOCKING_EXCEPTION, lockPath, message);
    }

    public LockingException(String lockPath, String message, Throwable cause) {
        this(StatusCode.LOCKING_EXCEPTION, lockPath, message, cause);
    }

    protected LockingException(int code, String lockPath, String message) {
        super(code, String.format("LockPath - %s: %s", lockPath, message));
    }

    protected LockingException(int code, String lockPath, String message, Throwable cause) {
        super(code, String.format("LockPath - %s: %s", lockPath, message), cause);
    }

    /**
     * An error raised by the Python storage core, carried across the gateway with its message.
     *
     * @param error the gateway's error description
     */
    public LockingException(RemoteError error) {
        super(StatusCode.LOCKING_EXCEPTION, error);
    }

    protected LockingException(int defaultCode, RemoteError error) {
        super(defaultCode, error);
    }
}
