package org.apache.distributedlog;

/**
 * DistributedLog's constants used by applications.
 */
public final class DistributedLogConstants {

    private DistributedLogConstants() {
    }

    public static final long INVALID_TXID = -999;
    public static final long EMPTY_LOGSEGMENT_TX_ID = -99;
    public static final long MAX_TXID = Long.MAX_VALUE;
    public static final long SMALL_LOGSEGMENT_THRESHOLD = 10;
    public static final String UNKNOWN_CLIENT_ID = "Unknown-ClientId";
    public static final int LOCAL_REGION_ID = 0;
}
