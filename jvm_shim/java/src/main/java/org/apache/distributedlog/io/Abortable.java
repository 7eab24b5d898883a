package org.apache.distributedlog.io;

import java.io.IOException;

/**
 * A resource that is aborted (released without completing pending work).
 */
public interface Abortable {

    /**
     * Abort the resource.
     *
     * @throws IOException if aborting fails
     */
    void abort() throws IOException;
}
