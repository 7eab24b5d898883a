package org.apache.distributedlog.spark.rt;

import java.util.Map;
import java.util.Set;
import org.apache.spark.sql.connector.catalog.SupportsRead;
import org.apache.spark.sql.connector.catalog.Table;
import org.apache.spark.sql.connector.catalog.TableCapability;
import org.apache.spark.sql.connector.catalog.TableProvider;
import org.apache.spark.sql.connector.expressions.Transform;
import org.apache.spark.sql.connector.read.Scan;
import org.apache.spark.sql.connector.read.ScanBuilder;
import org.apache.spark.sql.connector.read.streaming.MicroBatchStream;
import org.apache.spark.sql.sources.DataSourceRegister;
import org.apache.spark.sql.types.DataTypes;
import org.apache.spark.sql.types.StructField;
import org.apache.spark.sql.types.StructType;
import org.apache.spark.sql.util.CaseInsensitiveStringMap;

/**
 * {@code spark.readStream.format("distributedlog-rt")}: DistributedLog logs as a streaming source that takes part
 * in Spark's Real-Time Mode ({@code trigger(realTime="5 seconds")}), where Python data sources cannot. Plain
 * micro-batch triggers work too. The rows are those of {@code format("distributedlog")}:
 *
 * <pre>
 * stream STRING NOT NULL, dlsn STRUCT&lt;lssn: BIGINT, entry_id: BIGINT, slot_id: BIGINT&gt; NOT NULL,
 * txid BIGINT NOT NULL, sequence_id BIGINT NOT NULL, value BINARY
 * </pre>
 *
 * Options: see {@link RtOptions}.
 */
public final class DistributedLogRealTimeSource implements TableProvider, DataSourceRegister {

    /** The source's fixed row schema (the Python source's). */
    public static final StructType SCHEMA = new StructType(new StructField[] {
        DataTypes.createStructField("stream", DataTypes.StringType, false),
        DataTypes.createStructField("dlsn", new StructType(new StructField[] {
            DataTypes.createStructField("lssn", DataTypes.LongType, true),
            DataTypes.createStructField("entry_id", DataTypes.LongType, true),
            DataTypes.createStructField("slot_id", DataTypes.LongType, true)}), false),
        DataTypes.createStructField("txid", DataTypes.LongType, false),
        DataTypes.createStructField("sequence_id", DataTypes.LongType, false),
        DataTypes.createStructField("value", DataTypes.BinaryType, true)});

    @Override
    public String shortName() {
        return RtOptions.FORMAT;
    }

    /**
     * The fixed schema, once the options are checked and the namespace opened (when the DataFrame is defined).
     *
     * @throws IllegalArgumentException a bad option (named), an unknown {@code dlog.<key>} or bad value, or a log
     *         of {@code streams} that does not exist
     * @throws java.io.UncheckedIOException the namespace cannot be opened (it does not exist, or the gateway
     *         cannot be started)
     */
    @Override
    public StructType inferSchema(CaseInsensitiveStringMap options) {
        RtOptions opts = RtOptions.parse(options.asCaseSensitiveMap());
        RtStream.checkLogsExist(opts);
        return SCHEMA;
    }

    @Override
    public Table getTable(StructType schema, Transform[] partitioning, Map<String, String> properties) {
        return new RtTable(RtOptions.parse(properties));
    }

    /** The table: readable as a stream only. */
    static final class RtTable implements Table, SupportsRead {
        private final RtOptions opts;

        RtTable(RtOptions opts) {
            this.opts = opts;
        }

        @Override
        public String name() {
            return "distributedlog-rt[" + opts.uri + "]";
        }

        @Override
        public StructType schema() {
            return SCHEMA;
        }

        @Override
        public Set<TableCapability> capabilities() {
            return Set.of(TableCapability.MICRO_BATCH_READ);
        }

        @Override
        public ScanBuilder newScanBuilder(CaseInsensitiveStringMap options) {
            RtOptions o = RtOptions.parse(options.asCaseSensitiveMap());
            return () -> new RtScan(o);
        }
    }

    /** The scan: a {@link RtStream}, its initial offsets kept in the given checkpoint folder. */
    static final class RtScan implements Scan {
        private final RtOptions opts;

        RtScan(RtOptions opts) {
            this.opts = opts;
        }

        @Override
        public StructType readSchema() {
            return SCHEMA;
        }

        @Override
        public String description() {
            return "distributedlog-rt " + opts.uri;
        }

        @Override
        public MicroBatchStream toMicroBatchStream(String checkpointLocation) {
            return new RtStream(opts, checkpointLocation);
        }
    }
}
