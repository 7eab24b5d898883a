package org.apache.distributedlog.exceptions;

import org.apache.distributedlog.shim.RemoteError;

/**
 * Thrown when the envelope of an entry is malformed.
 */
public class InvalidEnvelopedEntryException extends DLException {

    private static final long serialVersionUID = 1L;

    public InvalidEnvelopedEntryException(String msg) {
        super(StatusCode.INVALID_ENVELOPED_ENTRY, msg);
    }

    /**
     * An error raised by the Python storage core, carried across the gateway with its message.
     *
     * @param error the gateway's error description
     */
    public InvalidEnvelopedEntryException(RemoteError error) {
        super(StatusCode.INVALID_ENVELOPED_ENTRY, error);
    }
}
