package org.apache.distributedlog.exceptions;

import org.apache.distributedlog.shim.RemoteError;

/**
 * Thrown when a log segment is gone.
 */
public class LogSegmentNotFoundException extends DLException {

    private static final long serialVersionUID = 1L;

    public LogSegmentNotFoundException(String logSegmentPath) {
        super(StatusCode.LOG_SEGMENT_NOT_FOUND, "Log Segment " + logSegmentPath + " not found");
    }

    /**
     * An error raised by the Python storage core, carried across the gateway with its message.
     *
     * @param error the gateway's error description
     */
    public LogSegmentNotFoundException(RemoteError error) {
        super(StatusCode.LOG_SEGMENT_NOT_FOUND, error);
    }
}
