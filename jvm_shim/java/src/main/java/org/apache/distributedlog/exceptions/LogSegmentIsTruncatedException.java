package org.apache.distributedlog.exceptions;

import org.apache.distributedlog.shim.RemoteError;

/**
 * Thrown when a log segment was truncated.
 */
public class LogSegmentIsTruncatedException extends DLException {

    private static final long serialVersionUID = 1L;

    public LogSegmentIsTruncatedException(String logSegmentName) {
        super(StatusCode.LOG_SEGMENT_IS_TRUNCATED, "Log Segment '" + logSegmentName + "' is already truncated");
    }

    /**
     * An error raised by the Python storage core, carried across the gateway with its message.
     *
     * @param error the gateway's error description
     */
    public LogSegmentIsTruncatedException(RemoteError error) {
        super(StatusCode.LOG_SEGMENT_IS_TRUNCATED, error);
    }
}
