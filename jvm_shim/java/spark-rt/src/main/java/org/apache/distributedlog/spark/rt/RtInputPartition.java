package org.apache.distributedlog.spark.rt;

import java.util.Map;
import org.apache.spark.sql.connector.read.InputPartition;

/**
 * One log from a position: up to {@code end} (exclusive) in a micro-batch, unbounded in real-time mode
 * ({@code hasEnd} false).
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

    RtInputPartition(String uri, Map<String, String> conf, String log, long[] start, long[] end,
                     boolean failOnDataLoss) {
        this.uri = uri;
        this.conf = conf;
        this.log = log;
        this.start = start;
        this.hasEnd = end != null;
        this.end = end;
        this.failOnDataLoss = failOnDataLoss;
    }
}
