package org.apache.distributedlog.exceptions;

import org.apache.distributedlog.shim.RemoteError;

/**
 * Thrown when appending an entry to the segment store failed (Python {@code TransmitError}).
 */
public class BKTransmitException extends DLException {

    private static final long serialVersionUID = 1L;

    private final int bkRc;

    public BKTransmitException(String message, int bkRc) {
        super(StatusCode.BK_TRANSMIT_ERROR, message + " : " + bkRc);
        this.bkRc = bkRc;
    }

    /**
     * An error raised by the Python storage core, carried across the gateway with its message.
     *
     * @param error the gateway's error description
     */
    public BKTransmitException(RemoteError error) {
        super(StatusCode.BK_TRANSMIT_ERROR, error);
        this.bkRc = 0;
    }

    public int getBKResultCode() {
        return bkRc;
    }
}
