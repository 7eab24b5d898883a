package org.apache.distributedlog.io;

import java.util.concurrent.CompletableFuture;

/**
 * A resource that is closed asynchronously.
 */
public interface AsyncCloseable {

    /**
     * Close the resource.
     *
     * @return a future completed when the resource is closed
     */
    CompletableFuture<Void> asyncClose();
}
