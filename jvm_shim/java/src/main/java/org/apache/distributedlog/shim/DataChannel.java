package org.apache.distributedlog.shim;

import java.io.BufferedInputStream;
import java.io.BufferedOutputStream;
import java.io.DataInputStream;
import java.io.DataOutputStream;
import java.io.EOFException;
import java.io.IOException;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.net.Socket;
import java.nio.charset.StandardCharsets;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;

/**
 * The client of the gateway's data channel ({@code jvm_shim/channel.py}): the calls that carry records, as raw bytes
 * over a loopback socket instead of py4j's base64 text. Like py4j, every Java thread gets its own socket (opened on
 * its first call, authenticated with the gateway's token), so calls of different threads run concurrently and one
 * thread's calls are answered in order.
 *
 * <p>Frames: hello {@code u32 n, token}; answer one byte, 0 = accepted. Request {@code u32 opLen, u32 argsLen,
 * u32 dataLen, op, args, data}; response {@code u32 n, envelope} (the envelope {@link GatewayConnection#decode}
 * reads). A failed socket is closed and forgotten; the next call of that thread opens a new one.
 */
final class DataChannel implements AutoCloseable {

    private static final int CONNECT_TIMEOUT_MS = 10_000;
    private static final int BUFFER = 1 << 16;

    private static final class Conn {
        final Socket socket;
        final DataOutputStream out;
        final DataInputStream in;

        Conn(Socket socket) throws IOException {
            this.socket = socket;
            this.out = new DataOutputStream(new BufferedOutputStream(socket.getOutputStream(), BUFFER));
            this.in = new DataInputStream(new BufferedInputStream(socket.getInputStream(), BUFFER));
        }

        void close() {
            try {
                socket.close();
            } catch (IOException e) {
                // already closed
            }
        }
    }

    private final InetAddress host;
    private final int port;
    private final byte[] token;
    private final ThreadLocal<Conn> perThread = new ThreadLocal<>();
    private final Set<Conn> open = ConcurrentHashMap.newKeySet();
    private volatile boolean closed;

    DataChannel(InetAddress host, int port, String token) {
        this.host = host;
        this.port = port;
        this.token = token.getBytes(StandardCharsets.UTF_8);
    }

    /**
     * Run one call on this thread's socket.
     *
     * @return the response envelope
     * @throws IOException the socket failed or the gateway refused the token (the socket is closed)
     */
    byte[] call(String op, String args, byte[] data) throws IOException {
        Conn c = perThread.get();
        if (c == null) {
            c = connect();
        }
        try {
            byte[] o = op.getBytes(StandardCharsets.UTF_8);
            byte[] a = args.getBytes(StandardCharsets.UTF_8);
            c.out.writeInt(o.length);
            c.out.writeInt(a.length);
            c.out.writeInt(data.length);
            c.out.write(o);
            c.out.write(a);
            c.out.write(data);
            c.out.flush();
            int n = c.in.readInt();
            if (n < 0) {
                throw new IOException("malformed data channel response (" + (n & 0xffffffffL) + " bytes)");
            }
            byte[] raw = new byte[n];
            c.in.readFully(raw);
            return raw;
        } catch (IOException | RuntimeException e) {
            drop(c);
            throw e;
        }
    }

    private Conn connect() throws IOException {
        if (closed) {
            throw new IOException("the data channel is closed");
        }
        Socket s = new Socket();
        Conn c;
        try {
            s.setTcpNoDelay(true);
            s.connect(new InetSocketAddress(host, port), CONNECT_TIMEOUT_MS);
            s.setSoTimeout(CONNECT_TIMEOUT_MS); // for the handshake only: calls may wait as long as they need
            c = new Conn(s);
            c.out.writeInt(token.length);
            c.out.write(token);
            c.out.flush();
            int answer;
            try {
                answer = c.in.readUnsignedByte();
            } catch (EOFException e) {
                answer = -1;
            }
            if (answer != 0) {
                throw new IOException("the gateway's data channel at " + host.getHostAddress() + ":" + port
                    + " refused the connection (wrong token?)");
            }
            s.setSoTimeout(0);
        } catch (IOException | RuntimeException e) {
            try {
                s.close();
            } catch (IOException ignored) {
                // closing a failed socket
            }
            throw e;
        }
        open.add(c);
        perThread.set(c);
        if (closed) { // close() ran meanwhile: do not leave this socket behind
            drop(c);
            throw new IOException("the data channel is closed");
        }
        return c;
    }

    private void drop(Conn c) {
        if (perThread.get() == c) {
            perThread.remove();
        }
        open.remove(c);
        c.close();
    }

    /** Close this thread's socket, if it has one. */
    void releaseThreadConnection() {
        Conn c = perThread.get();
        if (c != null) {
            drop(c);
        }
    }

    /** Close every socket; later calls fail. */
    @Override
    public void close() {
        closed = true;
        for (Conn c : open) {
            open.remove(c);
            c.close();
        }
    }
}
