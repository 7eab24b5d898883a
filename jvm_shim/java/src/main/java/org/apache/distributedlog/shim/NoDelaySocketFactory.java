package org.apache.distributedlog.shim;

import java.io.IOException;
import java.net.InetAddress;
import java.net.Socket;
import javax.net.SocketFactory;

/**
 * Sockets with {@code TCP_NODELAY}: py4j writes a command in several pieces, and Nagle's algorithm would hold the
 * last one until the gateway acknowledges the others (up to the delayed-ACK timeout, 40 ms on Linux).
 */
final class NoDelaySocketFactory extends SocketFactory {

    /** {@code s} with {@code TCP_NODELAY} set; closed if that fails. */
    private static Socket noDelay(Socket s) throws IOException {
        try {
            s.setTcpNoDelay(true);
        } catch (IOException | RuntimeException e) {
            try {
                s.close();
            } catch (IOException suppressed) {
                e.addSuppressed(suppressed);
            }
            throw e;
        }
        return s;
    }

    @Override
    public Socket createSocket() throws IOException {
        return noDelay(new Socket());
    }

    @Override
    public Socket createSocket(String host, int port) throws IOException {
        return noDelay(new Socket(host, port));
    }

    @Override
    public Socket createSocket(String host, int port, InetAddress localHost, int localPort) throws IOException {
        return noDelay(new Socket(host, port, localHost, localPort));
    }

    @Override
    public Socket createSocket(InetAddress host, int port) throws IOException {
        return noDelay(new Socket(host, port));
    }

    @Override
    public Socket createSocket(InetAddress address, int port, InetAddress localAddress, int localPort)
            throws IOException {
        return noDelay(new Socket(address, port, localAddress, localPort));
    }
}
