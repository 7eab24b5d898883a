package org.apache.distributedlog.exceptions;

import org.apache.distributedlog.shim.RemoteError;

/**
 * Thrown at the end of a log segment.
 */
public class EndOfLogSegmentException extends DLException {

    private static final long serialVersionUID = 1L;

    public EndOfLogSegmentException(String logSegmentName) {
        super(StatusCode.END_OF_LOG_SEGMENT, "end of log segment " + logSegmentName);
    }

    /**
     * An error raised by the Python storage core, carried across the gateway with its message.
     *
     * @param error the gateway's error description
     */
    public EndOfLogSegmentException(RemoteError error) {
        super(StatusCode.END_OF_LOG_SEGMENT, error);
    }
}
