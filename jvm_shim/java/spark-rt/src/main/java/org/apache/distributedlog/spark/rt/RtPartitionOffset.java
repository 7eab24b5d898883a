package org.apache.distributedlog.spark.rt;

import org.apache.spark.sql.connector.read.streaming.PartitionOffset;

/** Where one log's reading task stands: the DLSN after the last record it returned (or its start). */
final class RtPartitionOffset implements PartitionOffset {

    private static final long serialVersionUID = 1L;

    final String log;
    final long lssn;
    final long entryId;
    final long slotId;

    RtPartitionOffset(String log, long lssn, long entryId, long slotId) {
        this.log = log;
        this.lssn = lssn;
        this.entryId = entryId;
        this.slotId = slotId;
    }

    @Override
    public String toString() {
        return log + "@" + lssn + "," + entryId + "," + slotId;
    }
}
