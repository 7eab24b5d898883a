package org.apache.distributedlog.exceptions;

import java.io.IOException;
import org.apache.distributedlog.shim.RemoteError;

/**
 * Thrown when a reader saw no progress for {@code readerIdleErrorThresholdMillis}.
 */
public class IdleReaderException extends IOException {

    private static final long serialVersionUID = 1L;

    public IdleReaderException(String message) {
        super(message);
    }

    /**
     * An error raised by the Python storage core, carried across the gateway with its message.
     *
     * @param error the gateway's error description
     */
    public IdleReaderException(RemoteError error) {
        super(error.getMessage());
    }
}
