package org.apache.distributedlog.exceptions;

import org.apache.distributedlog.shim.RemoteError;

/**
 * Thrown when an entry failed its checksum or could not be decoded (Python {@code CorruptedEntryError}).
 */
public class ChecksumFailedException extends DLException {

    private static final long serialVersionUID = 1L;

    public ChecksumFailedException() {
        super(StatusCode.CHECKSUM_FAILED, "Checksum failed");
    }

    /**
     * An error raised by the Python storage core, carried across the gateway with its message.
     *
     * @param error the gateway's error description
     */
    public ChecksumFailedException(RemoteError error) {
        super(StatusCode.CHECKSUM_FAILED, error);
    }
}
