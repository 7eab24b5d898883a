package org.apache.distributedlog.shim;

import java.io.IOException;
import java.net.InetAddress;
import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.util.Arrays;
import java.util.Collections;
import java.util.Map;
import java.util.Set;
import java.util.function.Supplier;
import org.apache.distributedlog.exceptions.AlreadyClosedException;
import org.apache.distributedlog.exceptions.ServiceUnavailableException;
import org.apache.distributedlog.exceptions.UnexpectedException;
import py4j.ClientServer;
import py4j.ClientServerConnection;
import py4j.Py4JException;
import py4j.Py4JPythonClient;
import py4j.PythonClient;

/**
 * A connection to a DistributedLog gateway (the Python process serving the storage core): py4j's
 * {@link ClientServer} in the Python-server topology, with no Java server socket (py4j's Java server is never
 * started: the gateway never calls into the JVM). py4j gives every Java thread its own socket to the gateway (and
 * the gateway a Python thread for it), so calls of different threads run concurrently.
 *
 * <p>The calls that carry records ({@code writer.write}, {@code writer.await}, {@code reader.read}) go over the
 * gateway's data channel when it offers one ({@code dataPort} in its {@code gateway.ping} answer; see
 * {@link DataChannel}): raw bytes instead of py4j's base64 text. {@code -Ddlog.shim.dataChannel=false} keeps every
 * call on py4j.
 *
 * <p>{@link #call} sends one operation and decodes the response envelope of {@code jvm_shim/protocol.py}: an error
 * response is thrown as its DistributedLog exception (see {@link Errors}); a broken connection as
 * {@link ServiceUnavailableException}.
 */
public final class GatewayConnection implements AutoCloseable {

    private static final byte[] EMPTY = new byte[0];
    /**
     * {@code -Ddlog.shim.trace=true}: one line per call on stderr (thread, op, transport, bytes sent and received,
     * time).
     */
    private static final boolean TRACE = Boolean.getBoolean("dlog.shim.trace");
    /** {@code -Ddlog.shim.dataChannel=false}: every call over py4j, even when the gateway offers a data channel. */
    private static final boolean USE_DATA_CHANNEL =
        !"false".equalsIgnoreCase(System.getProperty("dlog.shim.dataChannel", "true"));
    /** The operations sent over the data channel. */
    static final Set<String> DATA_OPS = Set.of("writer.write", "writer.await", "reader.read");

    private final ClientServer clientServer;
    private final PythonGateway gateway;
    private final String address;
    private volatile DataChannel dataChannel;
    private volatile Supplier<String> diagnostics = () -> "";
    private volatile boolean closed;

    /** The result of an operation: its JSON object and its binary part. */
    public static final class Response {
        public final Map<String, Object> result;
        public final byte[] data;

        Response(Map<String, Object> result, byte[] data) {
            this.result = result;
            this.data = data;
        }
    }

    private GatewayConnection(ClientServer clientServer, PythonGateway gateway, String address) {
        this.clientServer = clientServer;
        this.gateway = gateway;
        this.address = address;
    }

    /**
     * Connect to the gateway at {@code host:port} with py4j's auth {@code token} and check it answers
     * {@code gateway.ping}.
     *
     * @throws ServiceUnavailableException if it cannot be reached or rejects the token
     */
    public static GatewayConnection connect(String host, int port, String token) throws IOException {
        String address = host + ":" + port;
        ClientServer.ClientServerBuilder b = new ClientServer.ClientServerBuilder()
            .javaPort(0)
            .javaAddress(InetAddress.getLoopbackAddress())
            .pythonPort(port)
            .pythonAddress(InetAddress.getByName(host))
            .readTimeout(0)
            .socketFactory(new NoDelaySocketFactory())
            .autoStartJavaServer(false)
            .enableMemoryManagement(false);
        if (token != null) {
            b.authToken(token);
        }
        ClientServer cs = b.build();
        GatewayConnection conn;
        try {
            PythonGateway gw = (PythonGateway) cs.getPythonServerEntryPoint(new Class<?>[] {PythonGateway.class});
            conn = new GatewayConnection(cs, gw, address);
            Response ping = conn.call("gateway.ping", Collections.emptyMap(), EMPTY);
            Object dataPort = ping.result.get("dataPort");
            if (USE_DATA_CHANNEL && token != null && dataPort instanceof Number) {
                conn.dataChannel = new DataChannel(InetAddress.getByName(host), ((Number) dataPort).intValue(), token);
            }
        } catch (IOException | RuntimeException e) {
            quietShutdown(cs);
            Throwable root = e;
            while (root.getCause() != null && root.getCause() != root) {
                root = root.getCause();
            }
            ServiceUnavailableException se = new ServiceUnavailableException(
                "cannot use the DistributedLog gateway at " + address + " (wrong port or token, or not a gateway?): "
                    + e.getMessage() + (root == e ? "" : " (" + root + ")"));
            se.initCause(e);
            throw se;
        }
        return conn;
    }

    /** A description of the gateway's state added to transport errors (for example the process's stderr). */
    void setDiagnostics(Supplier<String> diagnostics) {
        this.diagnostics = diagnostics;
    }

    /** @return {@code host:port} of the gateway */
    public String getAddress() {
        return address;
    }

    /** @return whether record-carrying calls go over the gateway's data channel (else py4j) */
    public boolean usesDataChannel() {
        return dataChannel != null;
    }

    /** Same as {@code call(op, args, new byte[0])}. */
    public Response call(String op, Map<String, ?> args) throws IOException {
        return call(op, args, EMPTY);
    }

    /**
     * Run one operation.
     *
     * @param op the operation
     * @param args its JSON arguments
     * @param data its binary part
     * @return the result
     * @throws IOException the operation's error as its DistributedLog exception ({@link IllegalArgumentException}
     *         for the Python {@code InvalidArgumentError} family)
     */
    public Response call(String op, Map<String, ?> args, byte[] data) throws IOException {
        if (closed) {
            throw new AlreadyClosedException("the connection to the DistributedLog gateway at " + address
                + " is closed (" + op + ")");
        }
        byte[] raw;
        long t0 = TRACE ? System.nanoTime() : 0;
        DataChannel channel = dataChannel;
        boolean viaChannel = channel != null && DATA_OPS.contains(op);
        String json = Json.write(args);
        byte[] bytes = data == null ? EMPTY : data;
        try {
            raw = viaChannel ? channel.call(op, json, bytes) : gateway.call(op, json, bytes);
            if (TRACE) {
                System.err.printf("[dlog-shim] %s %s via %s %d B -> %d B in %.3f ms%n",
                                  Thread.currentThread().getName(), op, viaChannel ? "data-channel" : "py4j",
                                  bytes.length, raw == null ? 0 : raw.length, (System.nanoTime() - t0) / 1e6);
            }
        } catch (Py4JException | IOException e) {
            if (closed) {
                throw new AlreadyClosedException("the connection to the DistributedLog gateway at " + address
                    + " was closed during " + op);
            }
            String extra = diagnostics.get();
            ServiceUnavailableException se = new ServiceUnavailableException(
                "DistributedLog gateway at " + address + " failed during " + op + ": " + e.getMessage()
                    + (extra.isEmpty() ? "" : "; " + extra));
            se.initCause(e);
            throw se;
        }
        return decode(op, raw);
    }

    /** The {@code details} object of an error response (optional; anything else counts as none). */
    @SuppressWarnings("unchecked")
    static Map<String, Object> details(Object details) {
        return details instanceof Map ? (Map<String, Object>) details : null;
    }

    static Response decode(String op, byte[] raw) throws IOException {
        if (raw == null || raw.length == 0) {
            throw new UnexpectedException("empty gateway response to " + op);
        }
        if (raw[0] == 1) {
            String text = new String(raw, 1, raw.length - 1, StandardCharsets.UTF_8);
            Map<String, Object> doc;
            try {
                doc = Json.parseObject(text);
            } catch (IllegalArgumentException e) {
                throw new UnexpectedException("malformed gateway error response to " + op + ": " + e.getMessage());
            }
            Object code = doc.get("code");
            RemoteError err = new RemoteError(
                String.valueOf(doc.get("class")),
                code instanceof Number ? Integer.valueOf(((Number) code).intValue()) : null,
                Boolean.TRUE.equals(doc.get("retriable")),
                doc.get("message") == null ? "" : String.valueOf(doc.get("message")),
                details(doc.get("details")));
            throw Errors.rethrow(Errors.toException(err));
        }
        if (raw[0] != 0 || raw.length < 5) {
            throw new UnexpectedException("malformed gateway response to " + op + " (status " + raw[0] + ", "
                + raw.length + " bytes)");
        }
        int n = ByteBuffer.wrap(raw, 1, 4).getInt();
        if (n < 0 || n > raw.length - 5) {
            throw new UnexpectedException("malformed gateway response to " + op + " (JSON length " + n + ")");
        }
        Map<String, Object> result;
        try {
            result = Json.parseObject(new String(raw, 5, n, StandardCharsets.UTF_8));
        } catch (IllegalArgumentException e) {
            throw new UnexpectedException("malformed gateway response to " + op + ": " + e.getMessage());
        }
        byte[] data = 5 + n == raw.length ? EMPTY : Arrays.copyOfRange(raw, 5 + n, raw.length);
        return new Response(result, data);
    }

    /**
     * Close this thread's socket to the gateway (py4j keeps one per thread until the connection is closed); for
     * threads of the shim that end before the connection.
     */
    void releaseThreadConnection() {
        DataChannel channel = dataChannel;
        if (channel != null) {
            channel.releaseThreadConnection();
        }
        try {
            Py4JPythonClient pc = clientServer.getPythonClient();
            if (pc instanceof PythonClient) {
                PythonClient client = (PythonClient) pc;
                ClientServerConnection c = client.getPerThreadConnection();
                if (c != null) {
                    client.setPerThreadConnection(null);
                    c.shutdown();
                }
            }
        } catch (RuntimeException e) {
            // best effort
        }
    }

    /** @return whether {@link #close()} was called */
    public boolean isClosed() {
        return closed;
    }

    /** Close every socket to the gateway (the gateway itself keeps running). */
    @Override
    public void close() {
        synchronized (this) {
            if (closed) {
                return;
            }
            closed = true;
        }
        DataChannel channel = dataChannel;
        if (channel != null) {
            channel.close();
        }
        quietShutdown(clientServer);
    }

    private static void quietShutdown(ClientServer cs) {
        try {
            cs.shutdown();
        } catch (RuntimeException e) {
            // already down
        }
    }
}
