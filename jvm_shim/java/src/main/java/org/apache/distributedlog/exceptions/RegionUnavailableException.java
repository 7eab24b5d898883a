package org.apache.distributedlog.exceptions;

import org.apache.distributedlog.shim.RemoteError;

/**
 * Thrown when a region is unavailable.
 */
public class RegionUnavailableException extends DLException {

    private static final long serialVersionUID = 1L;

    public RegionUnavailableException(String msg) {
        super(StatusCode.REGION_UNAVAILABLE, msg);
    }

    /**
     * An error raised by the Python storage core, carried across the gateway with its message.
     *
     * @param error the gateway's error description
     */
    public RegionUnavailableException(RemoteError error) {
        super(StatusCode.REGION_UNAVAILABLE, error);
    }
}
