package org.apache.distributedlog.api;

import java.io.Closeable;
import java.io.IOException;
import java.util.List;
import org.apache.distributedlog.LogRecordWithDLSN;
import org.apache.distributedlog.io.AsyncCloseable;

/**
 * A synchronous reader. It fetches up to 1000 records per call to the gateway and serves them from memory.
 *
 * <p>A blocking read ({@code nonBlocking = false}) waits up to {@code readAheadWaitTime} (200 ms unless
 * configured) for a record and returns {@code null} (or an empty list) if none came: the reader is caught up. A
 * non-blocking read returns what is already there.
 */
public interface LogReader extends Closeable, AsyncCloseable {

    LogRecordWithDLSN readNext(boolean nonBlocking) throws IOException;

    List<LogRecordWithDLSN> readBulk(boolean nonBlocking, int numLogRecords) throws IOException;
}
