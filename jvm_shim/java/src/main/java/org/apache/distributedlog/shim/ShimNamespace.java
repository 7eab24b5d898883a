package org.apache.distributedlog.shim;

import java.io.IOException;
import java.util.ArrayList;
import java.util.Collections;
import java.util.Iterator;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.Set;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.TimeUnit;
import org.apache.distributedlog.DLSN;
import org.apache.distributedlog.DistributedLogConfiguration;
import org.apache.distributedlog.api.DistributedLogManager;
import org.apache.distributedlog.api.namespace.Namespace;
import org.apache.distributedlog.exceptions.AlreadyClosedException;
import org.apache.distributedlog.exceptions.NotYetImplementedException;

/**
 * A namespace opened through a gateway ({@code namespace.open}). Built by
 * {@link org.apache.distributedlog.api.namespace.NamespaceBuilder}.
 */
public final class ShimNamespace implements Namespace {

    /** Threads for the {@code ...Async} metadata calls and async opens (py4j pins a connection per thread). */
    private static final int ASYNC_THREADS = 4;

    private final GatewayConnection conn;
    private final GatewayProcess process;
    private final long handle;
    private final String uri;
    private final String clientId;
    private final int readWaitMs;
    private final ExecutorService executor;
    private final Set<ShimLogManager> logs = ConcurrentHashMap.newKeySet();
    private volatile boolean closed;

    private ShimNamespace(GatewayConnection conn, GatewayProcess process, long handle, String uri, String clientId,
                          int readWaitMs) {
        this.conn = conn;
        this.process = process;
        this.handle = handle;
        this.uri = uri;
        this.clientId = clientId;
        this.readWaitMs = readWaitMs;
        this.executor = Executors.newFixedThreadPool(ASYNC_THREADS, Futures.daemonThreads("dlog-async"));
    }

    /**
     * Open the namespace {@code uri}: through the gateway at {@code host:port} if {@code host} is not null, else
     * through a gateway process started with {@code python}.
     *
     * @param uri the namespace URI
     * @param conf configuration properties sent with {@code namespace.open} (may be empty)
     * @param clientId the client id (kept on the Java side: the protocol has no field for it)
     * @param host gateway host, or null to start a gateway process
     * @param port gateway port
     * @param token gateway auth token (may be null if the gateway has none)
     * @param python the interpreter of a started gateway (null: {@code $DLOG_PYTHON}, else
     *        {@code $PYSPARK_PYTHON}, else {@code python3})
     * @param startTimeoutMs how long a started gateway may take to announce its port
     * @param readWaitMs how long a blocking {@code LogReader} read waits for records
     */
    public static ShimNamespace open(String uri, Map<String, Object> conf, String clientId, String host, int port,
                                     String token, String python, long startTimeoutMs, int readWaitMs)
            throws IOException {
        GatewayProcess process = null;
        GatewayConnection conn = null;
        try {
            if (host == null) {
                process = GatewayProcess.start(python == null ? GatewayProcess.defaultPython() : python, uri,
                                               startTimeoutMs);
                conn = GatewayConnection.connect("127.0.0.1", process.port(), process.token());
                GatewayProcess p = process;
                conn.setDiagnostics(p::describe);
            } else {
                conn = GatewayConnection.connect(host, port, token);
            }
            Map<String, Object> a = Json.object("uri", uri);
            if (conf != null && !conf.isEmpty()) {
                a.put("conf", conf);
            }
            long ns = Json.getLong(conn.call("namespace.open", a).result, "ns");
            return new ShimNamespace(conn, process, ns, uri, clientId, readWaitMs);
        } catch (IOException | RuntimeException e) {
            if (conn != null) {
                if (process != null) {
                    shutdownGateway(conn);
                }
                conn.close();
            }
            if (process != null) {
                process.stop(2000);
            }
            throw e;
        }
    }

    private static void shutdownGateway(GatewayConnection conn) {
        try {
            conn.call("gateway.shutdown", Collections.emptyMap());
        } catch (IOException | RuntimeException e) {
            // it may exit before answering
        }
    }

    private Map<String, Object> args() {
        return Json.object("ns", handle);
    }

    private Map<String, Object> args(String name) {
        if (name == null) {
            throw new NullPointerException("log name");
        }
        Map<String, Object> a = args();
        a.put("name", name);
        return a;
    }

    private void check() throws IOException {
        if (closed) {
            throw closedError();
        }
    }

    private AlreadyClosedException closedError() {
        return new AlreadyClosedException("the namespace " + uri + " is closed");
    }

    /** @return the namespace URI */
    public String getUri() {
        return uri;
    }

    /** @return the client id given to the builder */
    public String getClientId() {
        return clientId;
    }

    /** @return the connection to the gateway (for diagnostics and tests) */
    public GatewayConnection getGatewayConnection() {
        return conn;
    }

    /** @return the pid of the gateway process this namespace started, or -1 if it uses a running gateway */
    public long getGatewayPid() {
        return process == null ? -1 : process.pid();
    }

    @Override
    public void createLog(String logName) throws IOException {
        check();
        conn.call("namespace.createLog", args(logName));
    }

    @Override
    public void deleteLog(String logName) throws IOException {
        check();
        conn.call("namespace.deleteLog", args(logName));
    }

    @Override
    public CompletableFuture<Void> renameLog(String oldName, String newName) {
        return Futures.failed(new NotYetImplementedException("renameLog"));
    }

    @Override
    public DistributedLogManager openLog(String logName) throws IOException {
        check();
        long log = Json.getLong(conn.call("log.open", args(logName)).result, "log");
        ShimLogManager[] self = new ShimLogManager[1];
        ShimLogManager dlm = new ShimLogManager(conn, log, logName, executor, readWaitMs,
                                                () -> logs.remove(self[0]));
        self[0] = dlm;
        logs.add(dlm);
        if (closed) { // close() may have listed the logs before this one was added
            try {
                dlm.close();
            } catch (IOException | RuntimeException e) {
                // the namespace is closing anyway
            }
            throw closedError();
        }
        return dlm;
    }

    @Override
    public DistributedLogManager openLog(String logName, Optional<DistributedLogConfiguration> logConf,
                                         Optional<?> dynamicLogConf, Optional<?> perStreamStatsLogger)
            throws IOException {
        if (logConf != null && logConf.isPresent() && logConf.get().getKeys().hasNext()) {
            throw new IllegalArgumentException("per-log configuration is not supported by the DistributedLog "
                + "gateway; set the properties on the namespace's configuration (NamespaceBuilder.conf)");
        }
        return openLog(logName);
    }

    @Override
    public boolean logExists(String logName) throws IOException {
        check();
        return Json.getBoolean(conn.call("namespace.logExists", args(logName)).result, "exists");
    }

    @Override
    public Iterator<String> getLogs() throws IOException {
        check();
        return Json.getStrings(conn.call("namespace.getLogs", args()).result, "logs").iterator();
    }

    /**
     * Move the subscriber {@code subscriberId} forward to {@code positions.get(log)} in each log's subscriptions
     * store ({@code namespace.advanceSubscriber}): what {@code dlog subscribers} / {@code dlog lag} show. A lower or
     * equal position changes nothing.
     *
     * @return the logs whose position moved
     * @throws org.apache.distributedlog.exceptions.LogNotFoundException a log does not exist (the others were
     *         advanced)
     * @throws IllegalArgumentException an invalid subscriber id, or an empty {@code positions}
     * @throws IOException the gateway failed or is unreachable
     */
    public List<String> advanceSubscriber(String subscriberId, Map<String, DLSN> positions) throws IOException {
        check();
        Map<String, Object> a = args();
        a.put("subscriber", subscriberId);
        Map<String, Object> pos = new LinkedHashMap<>();
        for (Map.Entry<String, DLSN> e : positions.entrySet()) {
            DLSN d = e.getValue();
            pos.put(e.getKey(), d.getLogSegmentSequenceNo() + "," + d.getEntryId() + "," + d.getSlotId());
        }
        a.put("positions", pos);
        return Json.getStrings(conn.call("namespace.advanceSubscriber", a).result, "moved");
    }

    /**
     * Close the logs, writers (waiting for their writes) and readers opened here, {@code namespace.close}, and
     * the connection; a gateway process started for this namespace gets {@code gateway.shutdown} and is waited
     * for (up to 10 s, then terminated).
     */
    @Override
    public void close() {
        synchronized (this) {
            if (closed) {
                return;
            }
            closed = true;
        }
        try {
            for (ShimLogManager dlm : new ArrayList<>(logs)) {
                try {
                    dlm.close();
                } catch (IOException | RuntimeException e) {
                    // keep closing
                }
            }
            try {
                conn.call("namespace.close", args());
            } catch (IOException | RuntimeException e) {
                // the gateway may be gone already
            }
            if (process != null) {
                shutdownGateway(conn);
            }
        } finally {
            conn.close();
            executor.shutdownNow();
            if (process != null) {
                process.stop(10_000);
            }
            try {
                executor.awaitTermination(1, TimeUnit.SECONDS);
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
            }
        }
    }
}
