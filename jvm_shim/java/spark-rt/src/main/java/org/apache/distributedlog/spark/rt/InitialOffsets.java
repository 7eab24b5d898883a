package org.apache.distributedlog.spark.rt;

import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.nio.charset.StandardCharsets;
import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.fs.FSDataOutputStream;
import org.apache.hadoop.fs.FileSystem;
import org.apache.hadoop.fs.Path;
import org.apache.spark.sql.SparkSession;

/**
 * The start of batch 0, kept in the source's checkpoint folder ({@code <checkpoint>/sources/<n>/0}, JSON as the
 * offsets), as Spark's Kafka source keeps its initial offsets: a query that fails before batch 0 is committed
 * restarts from the same positions, not from whatever {@code latest} means by then.
 */
final class InitialOffsets {

    private final Path file;

    InitialOffsets(String checkpointLocation) {
        this.file = new Path(checkpointLocation, "0");
    }

    private static Configuration hadoopConf() {
        return SparkSession.active().sparkContext().hadoopConfiguration();
    }

    /** The recorded offsets, or null if none were. */
    RtOffset read() throws IOException {
        FileSystem fs = file.getFileSystem(hadoopConf());
        if (!fs.exists(file)) {
            return null;
        }
        try (InputStream in = fs.open(file)) {
            ByteArrayOutputStream buf = new ByteArrayOutputStream();
            in.transferTo(buf);
            String text = buf.toString(StandardCharsets.UTF_8).trim();
            try {
                return RtOffset.fromJson(text);
            } catch (IllegalArgumentException e) {
                throw new IOException("the initial offsets in " + file + " are not valid (" + e.getMessage()
                    + "): start the query with a new checkpoint location", e);
            }
        }
    }

    /**
     * Record {@code offset} unless offsets were recorded already; returns the ones that are recorded now.
     */
    RtOffset writeOnce(RtOffset offset) throws IOException {
        FileSystem fs = file.getFileSystem(hadoopConf());
        fs.mkdirs(file.getParent());
        Path tmp = new Path(file.getParent(), ".0." + java.util.UUID.randomUUID() + ".tmp");
        try (FSDataOutputStream out = fs.create(tmp, false)) {
            writeAll(out, offset.json().getBytes(StandardCharsets.UTF_8));
        }
        boolean renamed = false;
        try {
            renamed = fs.rename(tmp, file);
        } finally {
            if (!renamed) {
                fs.delete(tmp, false);
            }
        }
        if (renamed) {
            return offset;
        }
        RtOffset existing = read();
        if (existing == null) {
            throw new IOException("cannot record the initial offsets in " + file);
        }
        return existing;
    }

    private static void writeAll(OutputStream out, byte[] data) throws IOException {
        out.write(data);
    }
}
