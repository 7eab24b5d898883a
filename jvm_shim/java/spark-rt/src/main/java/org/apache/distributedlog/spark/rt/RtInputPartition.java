package org.apache.distributedlog.spark.rt;

import java.util.Map;
import org.apache.spark.sql.connector.read.InputPartition;

/**
 * One log from a position: up to {@code end} (exclusive) in a micro-batch, unbounded in real-time mode
 * ({@code hasEnd} false). {@code location}, when set, is the executor the log's tasks run on batch after batch
 * (Spark's {@code executor_<host>_<id>}), so an executor's open readers and writers of the log are used again.
 */
final class RtInputPartition implements InputPartition {

    private static final long serialVersionUID = 1L;

    final String uri;
    final Map<String, String> conf;
    final String log;
    final long[] start;
    final boolean hasEnd;
    final long[] end;
    final boolean failOnDataLoss;
    final String location;

    RtInputPartition(String uri, Map<String, String> conf, String log, long[] start, long[] end,
                     boolean failOnDataLoss, String location) {
        this.uri = uri;
        this.conf = conf;
        this.log = log;
        this.start = start;
        this.hasEnd = end != null;
        this.end = end;
        this.failOnDataLoss = failOnDataLoss;
        this.location = location;
    }

    @Override
    public String[] preferredLocations() {
        return location == null ? new String[0] : new String[] {location};
    }
}
