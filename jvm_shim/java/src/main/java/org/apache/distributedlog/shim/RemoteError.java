package org.apache.distributedlog.shim;

import java.io.Serializable;
import java.util.Collections;
import java.util.LinkedHashMap;
import java.util.Map;

/**
 * An error raised by the Python storage core, as the gateway describes it: the Python class name (a
 * {@code storage.errors} class), the DistributedLog status code (or {@code null}), whether the call may succeed if
 * tried again, the message, and the optional details the error carries ({@code current_owner} of
 * {@code OwnershipAcquireFailedError}, {@code txid} and {@code last_txid} of {@code TransactionIdOutOfOrderError}).
 */
public final class RemoteError implements Serializable {

    private static final long serialVersionUID = 1L;

    private final String pythonClass;
    private final Integer code;
    private final boolean retriable;
    private final String message;
    private final Map<String, Object> details;

    public RemoteError(String pythonClass, Integer code, boolean retriable, String message) {
        this(pythonClass, code, retriable, message, null);
    }

    /**
     * @param details the error response's {@code details} object (strings and numbers), or {@code null}
     */
    public RemoteError(String pythonClass, Integer code, boolean retriable, String message,
                       Map<String, ?> details) {
        this.pythonClass = pythonClass;
        this.code = code;
        this.retriable = retriable;
        this.message = message;
        this.details = details == null || details.isEmpty()
            ? Collections.emptyMap()
            : Collections.unmodifiableMap(new LinkedHashMap<String, Object>(details));
    }

    /** @return the error's details (empty when the gateway sent none); values are {@code String} or {@code Long} */
    public Map<String, Object> getDetails() {
        return details;
    }

    /** @return the detail {@code key} as a string, or {@code null} when absent or not a string */
    public String getDetailString(String key) {
        Object v = details.get(key);
        return v instanceof String ? (String) v : null;
    }

    /** @return the detail {@code key} as a long, or {@code null} when absent or not an integer */
    public Long getDetailLong(String key) {
        Object v = details.get(key);
        return v instanceof Long || v instanceof Integer ? Long.valueOf(((Number) v).longValue()) : null;
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
