package org.apache.distributedlog.bench;

import java.io.FileWriter;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.io.Writer;
import java.nio.ByteBuffer;
import java.time.Instant;
import org.apache.spark.sql.ForeachWriter;
import org.apache.spark.sql.Row;

/**
 * A Real-Time Mode sink that writes nothing: each row's {@code value} starts with the producer's write time
 * (nanoseconds since the epoch, big-endian); the task appends "stamp write" to a file of its own as the row arrives.
 * It measures what Spark and the source cost before any sink work.
 */
public final class LatencyProbe extends ForeachWriter<Row> {
    private static final long serialVersionUID = 1L;

    private final String dir;
    private transient Writer out;

    /** Rows are stamped into files under {@code dir} (one per task attempt). */
    public LatencyProbe(String dir) {
        this.dir = dir;
    }

    static long nowNanos() {
        Instant t = Instant.now();
        return t.getEpochSecond() * 1_000_000_000L + t.getNano();
    }

    @Override
    public boolean open(long partitionId, long epochId) {
        try {
            out = new FileWriter(dir + "/probe-" + partitionId + "-" + epochId + "-" + System.nanoTime(), true);
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
        return true;
    }

    @Override
    public void process(Row row) {
        long now = nowNanos();
        byte[] value = row.getAs("value");
        long written = ByteBuffer.wrap(value, 0, 8).getLong();
        try {
            out.write(now + " " + written + "\n");
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
    }

    @Override
    public void close(Throwable errorOrNull) {
        try {
            if (out != null) {
                out.close();
            }
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
    }
}
