package org.apache.distributedlog.exceptions;

import java.io.IOException;
import org.apache.distributedlog.shim.RemoteError;

/**
 * The root of DistributedLog's checked exceptions: an {@link IOException} with a {@link StatusCode}.
 *
 * <p>An error raised by the Python storage core arrives as the subclass matching its Python class (see
 * {@code org.apache.distributedlog.shim.Errors}); its message is the Python message and {@link #getCode()} the
 * status code the Python error carries (or the class's own code when it carries none).
 */
public class DLException extends IOException {

    private static final long serialVersionUID = 1L;

    protected final int code;
    private final RemoteError remoteError;

    public DLException(int code) {
        super();
        this.code = code;
        this.remoteError = null;
    }

    public DLException(int code, String msg) {
        super(msg);
        this.code = code;
        this.remoteError = null;
    }

    public DLException(int code, Throwable t) {
        super(t);
        this.code = code;
        this.remoteError = null;
    }

    public DLException(int code, String msg, Throwable t) {
        super(msg, t);
        this.code = code;
        this.remoteError = null;
    }

    /**
     * An error raised by the Python storage core with no closer Java counterpart.
     *
     * @param error the gateway's error description
     */
    public DLException(RemoteError error) {
        this(StatusCode.UNEXPECTED, error);
    }

    /**
     * An error raised by the Python storage core.
     *
     * @param defaultCode the status code used when the Python error carries none
     * @param error the gateway's error description
     */
    protected DLException(int defaultCode, RemoteError error) {
        super(error.getMessage());
        this.code = error.getCode() != null ? error.getCode() : defaultCode;
        this.remoteError = error;
    }

    /**
     * @return the DistributedLog status code of this error
     */
    public int getCode() {
        return code;
    }

    /**
     * @return the Python error this exception stands for (class name, code, retriable flag, message), or
     *         {@code null} if the exception was raised on the Java side
     */
    public RemoteError getRemoteError() {
        return remoteError;
    }
}
