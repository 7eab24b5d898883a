package org.apache.distributedlog.shim;

/**
 * The gateway's entry point, implemented by the Python gateway ({@code jvm_shim}) and reached through py4j's
 * {@code ClientServer} (the Python-server topology). See {@code jvm_shim/protocol.py} for the operations, the JSON
 * arguments, the response envelope and the binary layouts.
 */
public interface PythonGateway {

    /**
     * Run one operation.
     *
     * @param op the operation, for example {@code "writer.write"}
     * @param args a JSON object (UTF-8 text) with the operation's arguments
     * @param data the binary part (records), an empty array when unused
     * @return the response envelope: status byte, then the JSON result and binary result, or the JSON error
     */
    byte[] call(String op, String args, byte[] data);
}
