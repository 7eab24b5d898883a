package org.apache.distributedlog.spark.rt;

import java.io.IOException;
import java.net.URI;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import org.apache.distributedlog.DistributedLogConfiguration;
import org.apache.distributedlog.api.namespace.Namespace;
import org.apache.distributedlog.api.namespace.NamespaceBuilder;

/**
 * The namespaces of this JVM, one per URI and configuration, opened through DistributedLog's Java API on first
 * use: the driver and every executor JVM start one gateway process each ({@code python -m jvm_shim}, interpreter
 * {@code $DLOG_PYTHON}, else {@code $PYSPARK_PYTHON}, else {@code python3}) and share it between the tasks they
 * run. They are closed when the JVM shuts down.
 */
final class Namespaces {

    private static final Map<String, Namespace> OPEN = new ConcurrentHashMap<>();

    static {
        Thread hook = new Thread(Namespaces::closeAll, "dlog-rt-namespaces-close");
        Runtime.getRuntime().addShutdownHook(hook);
    }

    private Namespaces() {
    }

    private static String key(String uri, Map<String, String> conf) {
        return uri + "\u0000" + conf;
    }

    /**
     * The namespace {@code uri} with the configuration {@code conf}, opened once per JVM.
     *
     * @throws IllegalArgumentException a bad URI or configuration key/value (the gateway checks them)
     * @throws IOException the gateway cannot be started or reached, or the namespace does not exist
     */
    static Namespace get(String uri, Map<String, String> conf) throws IOException {
        String k = key(uri, conf);
        Namespace ns = OPEN.get(k);
        if (ns != null) {
            return ns;
        }
        synchronized (Namespaces.class) {
            ns = OPEN.get(k);
            if (ns == null) {
                DistributedLogConfiguration c = new DistributedLogConfiguration();
                for (Map.Entry<String, String> e : conf.entrySet()) {
                    c.setProperty(e.getKey(), e.getValue());
                }
                ns = NamespaceBuilder.newBuilder().uri(URI.create(uri)).conf(c).clientId("spark-rt").build();
                OPEN.put(k, ns);
            }
            return ns;
        }
    }

    /** Forget (and close) a namespace whose gateway broke, so the next {@link #get} opens a new one. */
    static void discard(String uri, Map<String, String> conf, Namespace ns) {
        if (OPEN.remove(key(uri, conf), ns)) {
            try {
                ns.close();
            } catch (RuntimeException e) {
                // it is broken already
            }
        }
    }

    static void closeAll() {
        List<Namespace> all = new ArrayList<>(OPEN.values());
        OPEN.clear();
        for (Namespace ns : all) {
            try {
                ns.close();
            } catch (RuntimeException e) {
                // closing at exit: nothing to do
            }
        }
    }
}
