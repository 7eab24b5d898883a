package org.apache.distributedlog.exceptions;

import org.apache.distributedlog.shim.RemoteError;

/**
 * Thrown when the metadata store failed or holds something unexpected.
 */
public class MetadataException extends DLException {

    private static final long serialVersionUID = 1L;

    public MetadataException(String msg) {
        super(StatusCode.METADATA_EXCEPTION, msg);
    }

    public MetadataException(String msg, Throwable t) {
        super(StatusCode.METADATA_EXCEPTION, msg, t);
    }

    /**
     * An error raised by the Python storage core, carried across the gateway with its message.
     *
     * @param error the gateway's error description
     */
    public MetadataException(RemoteError error) {
        super(StatusCode.METADATA_EXCEPTION, error);
    }
}
