package org.apache.distributedlog.exceptions;

import org.apache.distributedlog.shim.RemoteError;

/**
 * Thrown when another writer owns the log (after {@code lockTimeoutSeconds}).
 */
public class OwnershipAcquireFailedException extends LockingException {

    private static final long serialVersionUID = 1L;

    private final String currentOwner;

    public OwnershipAcquireFailedException(String lockPath, String currentOwner) {
        super(StatusCode.FOUND, lockPath,
              String.format("Lock acquisition failed, the current owner is %s", currentOwner));
        this.currentOwner = currentOwner;
    }

    /**
     * An error raised by the Python storage core, carried across the gateway with its message.
     *
     * @param error the gateway's error description
     */
    public OwnershipAcquireFailedException(RemoteError error) {
        super(StatusCode.FOUND, error);
        this.currentOwner = error.getDetailString("current_owner");
    }

    /**
     * @return the current owner of the log (for an error from the gateway: its {@code current_owner} detail), or
     *         {@code null} when the gateway did not report it
     */
    public String getCurrentOwner() {
        return currentOwner;
    }
}
