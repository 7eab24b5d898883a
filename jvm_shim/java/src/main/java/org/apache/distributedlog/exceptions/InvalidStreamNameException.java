package org.apache.distributedlog.exceptions;

import org.apache.distributedlog.shim.RemoteError;

/**
 * Thrown when a log name breaks DistributedLog's naming rules.
 */
public class InvalidStreamNameException extends DLException {

    private static final long serialVersionUID = 1L;

    public InvalidStreamNameException(String streamName) {
        super(StatusCode.INVALID_STREAM_NAME, "Invalid stream name : '" + streamName + "'");
    }

    public InvalidStreamNameException(String streamName, String reason) {
        super(StatusCode.INVALID_STREAM_NAME, "Invalid stream name : '" + streamName + "' : " + reason);
    }

    /**
     * An error raised by the Python storage core, carried across the gateway with its message.
     *
     * @param error the gateway's error description
     */
    public InvalidStreamNameException(RemoteError error) {
        super(StatusCode.INVALID_STREAM_NAME, error);
    }
}
