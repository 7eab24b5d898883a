package org.apache.distributedlog.api.namespace;

import java.io.IOException;
import java.util.Iterator;
import java.util.Optional;
import java.util.concurrent.CompletableFuture;
import org.apache.distributedlog.DistributedLogConfiguration;
import org.apache.distributedlog.api.DistributedLogManager;
import org.apache.distributedlog.exceptions.InvalidStreamNameException;
import org.apache.distributedlog.exceptions.LogNotFoundException;

/**
 * A namespace: a set of logs located by a URI ({@code distributedlog-local:///abs/path},
 * {@code distributedlog://zk-host:port/path}, ...). Built by {@link NamespaceBuilder}; backed by the Python
 * storage core through a py4j gateway.
 */
public interface Namespace extends AutoCloseable {

    void createLog(String logName) throws InvalidStreamNameException, IOException;

    void deleteLog(String logName) throws InvalidStreamNameException, LogNotFoundException, IOException;

    /**
     * Not supported by the gateway: the future fails with {@code NotYetImplementedException}.
     */
    CompletableFuture<Void> renameLog(String oldName, String newName);

    /**
     * Open a log (created on first write if it does not exist).
     */
    DistributedLogManager openLog(String logName) throws InvalidStreamNameException, IOException;

    /**
     * Open a log. Per-log configuration is not carried by the gateway protocol: a non-empty {@code logConf}
     * fails with {@code IllegalArgumentException} (set the properties on the namespace's configuration instead);
     * the other two arguments (dynamic configuration, stats logger) are ignored.
     */
    DistributedLogManager openLog(String logName,
                                  Optional<DistributedLogConfiguration> logConf,
                                  Optional<?> dynamicLogConf,
                                  Optional<?> perStreamStatsLogger)
            throws InvalidStreamNameException, IOException;

    boolean logExists(String logName) throws IOException;

    Iterator<String> getLogs() throws IOException;

    /**
     * Close the namespace: its open logs, writers and readers, and the gateway connection; a gateway process
     * started by {@link NamespaceBuilder#build()} is stopped.
     */
    @Override
    void close();
}
