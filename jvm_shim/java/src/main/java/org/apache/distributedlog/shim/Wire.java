package org.apache.distributedlog.shim;

import java.nio.ByteBuffer;
import java.util.ArrayList;
import java.util.List;
import org.apache.distributedlog.DLSN;
import org.apache.distributedlog.LogRecord;
import org.apache.distributedlog.LogRecordWithDLSN;

/**
 * The binary layouts of the gateway protocol (big-endian) and the text form of DLSNs.
 */
final class Wire {

    private Wire() {
    }

    /** Per record to write: i64 txid, i32 n. */
    static final int WRITE_HEAD = 12;
    /** Per DLSN: i64 lssn, i64 entry, i64 slot. */
    static final int DLSN_SIZE = 24;
    /** Per record read: i64 lssn, entry, slot, txid, sequence id, i32 n. */
    static final int READ_HEAD = 44;

    /** {@code "lssn,entry,slot"}. */
    static String toText(DLSN d) {
        return d.getLogSegmentSequenceNo() + "," + d.getEntryId() + "," + d.getSlotId();
    }

    /** Parse {@code "lssn,entry,slot"}; {@code null} stays {@code null}. */
    static DLSN parseText(String s) {
        if (s == null) {
            return null;
        }
        String[] parts = s.split(",");
        if (parts.length != 3) {
            throw new IllegalArgumentException("gateway sent a malformed DLSN '" + s + "'");
        }
        return new DLSN(Long.parseLong(parts[0].trim()), Long.parseLong(parts[1].trim()),
                        Long.parseLong(parts[2].trim()));
    }

    static int encodedSize(LogRecord r) {
        return WRITE_HEAD + r.getPayload().length;
    }

    /** Records to write: repeated i64 txid, i32 n, n bytes. */
    static byte[] encodeRecords(List<? extends LogRecord> records, int totalBytes) {
        ByteBuffer bb = ByteBuffer.allocate(totalBytes);
        for (LogRecord r : records) {
            byte[] p = r.getPayload();
            bb.putLong(r.getTransactionId());
            bb.putInt(p.length);
            bb.put(p);
        }
        if (bb.hasRemaining()) {
            throw new IllegalStateException("record batch size mismatch");
        }
        return bb.array();
    }

    /** DLSNs: repeated i64 lssn, entry, slot. */
    static List<DLSN> decodeDlsns(byte[] data) {
        if (data.length % DLSN_SIZE != 0) {
            throw new IllegalArgumentException("gateway sent " + data.length + " bytes of DLSNs");
        }
        ByteBuffer bb = ByteBuffer.wrap(data);
        List<DLSN> out = new ArrayList<>(data.length / DLSN_SIZE);
        while (bb.hasRemaining()) {
            out.add(new DLSN(bb.getLong(), bb.getLong(), bb.getLong()));
        }
        return out;
    }

    /** Records read: repeated i64 lssn, entry, slot, txid, sequence id, i32 n, n bytes. */
    static List<LogRecordWithDLSN> decodeRead(byte[] data) {
        ByteBuffer bb = ByteBuffer.wrap(data);
        List<LogRecordWithDLSN> out = new ArrayList<>();
        while (bb.hasRemaining()) {
            if (bb.remaining() < READ_HEAD) {
                throw new IllegalArgumentException("gateway sent a truncated record header at byte " + bb.position());
            }
            DLSN d = new DLSN(bb.getLong(), bb.getLong(), bb.getLong());
            long txid = bb.getLong();
            long seq = bb.getLong();
            int n = bb.getInt();
            if (n < 0 || n > bb.remaining()) {
                throw new IllegalArgumentException("gateway sent a record of " + n + " bytes past the data");
            }
            byte[] payload = new byte[n];
            bb.get(payload);
            out.add(new LogRecordWithDLSN(d, txid, payload, seq));
        }
        return out;
    }
}
