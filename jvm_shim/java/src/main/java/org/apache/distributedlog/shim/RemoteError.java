package org.apache.distributedlog.shim;

import java.io.Serializable;

/**
 * An error raised by the Python storage core, as the gateway describes it: the Python class name (a
 * {@code storage.errors} class), the DistributedLog status code (or {@code null}), whether the call may succeed if
 * tried again, and the message.
 */
public final class RemoteError implements Serializable {

    private static final long serialVersionUID = 1L;

    private final String pythonClass;
    private final Integer code;
    private final boolean retriable;
    private final String message;

    public RemoteError(String pythonClass, Integer code, boolean retriable, String message) {
        this.pythonClass = pythonClass;
        this.code = code;
        this.retriable = retriable;
        this.message = message;
    }

    /** @return the Python class name, for example {@code "OwnershipAcquireFailedError"} */
    public String getPythonClass() {
        return pythonClass;
    }

    /** @return the DistributedLog status code the Python error carries, or {@code null} */
    public Integer getCode() {
        return code;
    }

    /** @return whether the same call may succeed if tried again later */
    public boolean isRetriable() {
        return retriable;
    }

    /** @return the Python error's message */
    public String getMessage() {
        return message;
    }

    @Override
    public String toString() {
        return pythonClass + "(code=" + code + ", retriable=" + retriable + "): " + message;
    }
}
