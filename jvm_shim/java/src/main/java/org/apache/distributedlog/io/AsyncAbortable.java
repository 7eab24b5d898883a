package org.apache.distributedlog.io;

import java.util.concurrent.CompletableFuture;

/**
 * A resource that is aborted asynchronously (released without completing pending work).
 */
public interface AsyncAbortable {

    /**
     * Abort the resource.
     *
     * @return a future completed when the resource is aborted
     */
    CompletableFuture<Void> asyncAbort();
}
