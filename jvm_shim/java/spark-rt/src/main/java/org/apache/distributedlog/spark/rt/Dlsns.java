package org.apache.distributedlog.spark.rt;

import org.apache.distributedlog.DLSN;

/** The offset text of a DLSN, {@code "lssn,entry,slot"}, as the Python source writes it. */
final class Dlsns {

    /** Where a log without segments starts: {@code (1, 0, 0)}. */
    static final DLSN INITIAL = DLSN.InitialDLSN;

    private Dlsns() {
    }

    static String text(DLSN d) {
        return d.getLogSegmentSequenceNo() + "," + d.getEntryId() + "," + d.getSlotId();
    }

    /**
     * The DLSN of an offset text {@code "lssn,entry,slot"} of log {@code log}.
     *
     * @throws IllegalArgumentException not of that form, or out of range (the message names the log)
     */
    static DLSN parse(Object value, String log) {
        if (!(value instanceof String)) {
            throw new IllegalArgumentException("offset of log '" + log + "' must be a string 'lssn,entry,slot', got "
                + value);
        }
        String[] parts = ((String) value).trim().split(",", -1);
        if (parts.length != 3) {
            throw new IllegalArgumentException("offset of log '" + log + "' must be 'lssn,entry,slot', got '" + value
                + "'");
        }
        long[] v = new long[3];
        for (int i = 0; i < 3; i++) {
            try {
                v[i] = Long.parseLong(parts[i].trim());
            } catch (NumberFormatException e) {
                throw new IllegalArgumentException("offset of log '" + log + "' must be 'lssn,entry,slot' (integers), got '"
                    + value + "'");
            }
        }
        if (v[0] < 0 || v[1] < -1 || v[2] < -1) {
            throw new IllegalArgumentException("offset of log '" + log + "' is out of range: '" + value + "'");
        }
        return new DLSN(v[0], v[1], v[2]);
    }

    static DLSN max(DLSN a, DLSN b) {
        return a.compareTo(b) >= 0 ? a : b;
    }
}
