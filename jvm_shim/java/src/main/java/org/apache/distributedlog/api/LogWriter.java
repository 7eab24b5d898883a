package org.apache.distributedlog.api;

import java.io.Closeable;
import java.io.IOException;
import java.util.List;
import org.apache.distributedlog.LogRecord;
import org.apache.distributedlog.io.Abortable;

/**
 * A synchronous writer. {@link #write} buffers (records travel to the gateway in batches, up to 256 KiB per
 * call); {@link #flush()} and {@link #commit()} wait until everything written so far is durable and visible to
 * readers. A write that fails is reported by the next {@code write}, {@code flush}, {@code commit} or
 * {@code close}.
 */
public interface LogWriter extends Closeable, Abortable {

    /**
     * Write a record (buffered).
     *
     * @throws IOException an error of an earlier write, or the writer is closed
     */
    void write(LogRecord record) throws IOException;

    /**
     * Write records (buffered).
     *
     * @return the number of records written
     */
    @Deprecated
    int writeBulk(List<LogRecord> records) throws IOException;

    /**
     * Make everything written so far durable and visible.
     *
     * @return the highest transaction id written
     */
    long flush() throws IOException;

    /**
     * Same as {@link #flush()}.
     *
     * @return the highest transaction id written
     */
    long commit() throws IOException;

    /**
     * Flush, then seal the log with an end-of-stream marker; later writes fail with
     * {@code EndOfStreamException}.
     */
    void markEndOfStream() throws IOException;
}
