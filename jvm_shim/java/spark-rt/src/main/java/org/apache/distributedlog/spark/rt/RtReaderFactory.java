package org.apache.distributedlog.spark.rt;

import java.io.IOException;
import java.io.UncheckedIOException;
import org.apache.spark.sql.catalyst.InternalRow;
import org.apache.spark.sql.connector.read.InputPartition;
import org.apache.spark.sql.connector.read.PartitionReader;
import org.apache.spark.sql.connector.read.PartitionReaderFactory;

/** Opens a {@link RtPartitionReader} per partition (on the executors). */
final class RtReaderFactory implements PartitionReaderFactory {

    private static final long serialVersionUID = 1L;

    @Override
    public PartitionReader<InternalRow> createReader(InputPartition partition) {
        try {
            return new RtPartitionReader((RtInputPartition) partition);
        } catch (IOException e) {
            throw new UncheckedIOException("cannot open log '" + ((RtInputPartition) partition).log + "' of "
                + ((RtInputPartition) partition).uri + ": " + e.getMessage(), e);
        }
    }
}
