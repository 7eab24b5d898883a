package org.apache.distributedlog.exceptions;

import org.apache.distributedlog.shim.RemoteError;

/**
 * Thrown on segment metadata of an unsupported version.
 */
public class UnsupportedMetadataVersionException extends DLException {

    private static final long serialVersionUID = 1L;

    public UnsupportedMetadataVersionException(String message) {
        super(StatusCode.UNSUPPORTED_METADATA_VERSION, message);
    }

    /**
     * An error raised by the Python storage core, carried across the gateway with its message.
     *
     * @param error the gateway's error description
     */
    public UnsupportedMetadataVersionException(RemoteError error) {
        super(StatusCode.UNSUPPORTED_METADATA_VERSION, error);
    }
}
