package org.apache.distributedlog.api.namespace;

import java.io.IOException;
import java.net.URI;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import org.apache.distributedlog.DistributedLogConfiguration;
import org.apache.distributedlog.DistributedLogConstants;
import org.apache.distributedlog.shim.ShimNamespace;

/**
 * Builds a {@link Namespace}.
 *
 * <p>{@code NamespaceBuilder.newBuilder().uri(URI.create(uri)).build()} needs nothing else: it starts a gateway
 * process ({@code <python> -m jvm_shim --uri URI --port 0 --parent-watch}, the interpreter being
 * {@code $DLOG_PYTHON}, else {@code $PYSPARK_PYTHON}, else {@code python3}) and {@link Namespace#close()} stops
 * it. To use a running gateway ({@code dlog gateway --uri URI}) instead, call
 * {@link #gateway(String, int, String)} or set {@code DLOG_GATEWAY=host:port} (and {@code DLOG_GATEWAY_TOKEN}).
 *
 * <p>Unlike DistributedLog's builder, {@link #conf(DistributedLogConfiguration)} is optional: the properties it
 * holds are sent to the gateway, whose defaults apply to the others.
 */
public class NamespaceBuilder {

    private URI uri;
    private DistributedLogConfiguration conf;
    private String clientId = DistributedLogConstants.UNKNOWN_CLIENT_ID;
    private int regionId = DistributedLogConstants.LOCAL_REGION_ID;
    private String gatewayHost;
    private int gatewayPort;
    private String gatewayToken;
    private String python;
    private long startTimeoutMs = -1;

    /** @return a new builder */
    public static NamespaceBuilder newBuilder() {
        return new NamespaceBuilder();
    }

    private NamespaceBuilder() {
    }

    /** The DistributedLog configuration of the namespace (optional). */
    public NamespaceBuilder conf(DistributedLogConfiguration conf) {
        this.conf = conf;
        return this;
    }

    /** The namespace's location, for example {@code distributedlog-local:///tmp/ns}. */
    public NamespaceBuilder uri(URI uri) {
        this.uri = uri;
        return this;
    }

    /** The client id (accepted; not sent: the gateway protocol has no field for it). */
    public NamespaceBuilder clientId(String clientId) {
        this.clientId = clientId;
        return this;
    }

    /** The region id (accepted and ignored). */
    public NamespaceBuilder regionId(int regionId) {
        this.regionId = regionId;
        return this;
    }

    /**
     * Use the running gateway at {@code host:port} (for example one started by {@code dlog gateway}) instead of
     * starting one.
     *
     * @param token the gateway's py4j auth token ({@code null} if it has none)
     */
    public NamespaceBuilder gateway(String host, int port, String token) {
        this.gatewayHost = host;
        this.gatewayPort = port;
        this.gatewayToken = token;
        return this;
    }

    /** The interpreter of a started gateway (default: {@code $DLOG_PYTHON}, {@code $PYSPARK_PYTHON}, python3). */
    public NamespaceBuilder python(String interpreter) {
        this.python = interpreter;
        return this;
    }

    /**
     * How long a started gateway may take to announce its port (default 60 s, or
     * {@code $DLOG_GATEWAY_START_TIMEOUT_MS}).
     */
    public NamespaceBuilder gatewayStartTimeout(long timeout, TimeUnit unit) {
        this.startTimeoutMs = unit.toMillis(timeout);
        return this;
    }

    /**
     * Build the namespace: connect to the gateway (starting one if none was given) and open the namespace there.
     *
     * @throws IllegalArgumentException a bad argument (for example an unknown configuration key)
     * @throws NullPointerException no URI
     * @throws IOException the gateway cannot be started or reached
     *         ({@code org.apache.distributedlog.exceptions.ServiceUnavailableException}), or the namespace cannot be
     *         opened
     */
    public Namespace build() throws IllegalArgumentException, NullPointerException, IOException {
        if (uri == null) {
            throw new NullPointerException("No DistributedLog URI");
        }
        Map<String, Object> props = conf == null ? Map.of() : conf.toMap();
        String host = gatewayHost;
        int port = gatewayPort;
        String token = gatewayToken;
        if (host == null) {
            String env = System.getenv("DLOG_GATEWAY");
            if (env != null && !env.trim().isEmpty()) {
                String hp = env.trim();
                int colon = hp.lastIndexOf(':');
                if (colon <= 0 || !hp.substring(colon + 1).matches("[0-9]{1,5}")) {
                    throw new IllegalArgumentException("DLOG_GATEWAY must be host:port, got '" + hp + "'");
                }
                host = hp.substring(0, colon);
                port = Integer.parseInt(hp.substring(colon + 1));
                token = System.getenv("DLOG_GATEWAY_TOKEN");
            }
        }
        long timeout = startTimeoutMs;
        if (timeout < 0) {
            String env = System.getenv("DLOG_GATEWAY_START_TIMEOUT_MS");
            timeout = env == null || env.trim().isEmpty() ? 60_000 : Long.parseLong(env.trim());
        }
        int readWaitMs = (conf == null ? new DistributedLogConfiguration() : conf).getReadAheadWaitTime();
        return ShimNamespace.open(uri.toString(), props, clientId, host, port, token, python, timeout,
                                  readWaitMs);
    }
}
