package org.apache.distributedlog;

import java.nio.ByteBuffer;
import java.util.Base64;

/**
 * DistributedLog Sequence Number: the position {@code (logSegmentSequenceNo, entryId, slotId)} of a record in a
 * log, ordered lexicographically with signed comparison.
 *
 * <p>{@link #serialize()} is standard base64 (with {@code =} padding) of the 25-byte version-1 layout: one
 * version byte ({@code 1}) then the three longs big-endian; byte-identical to the Python
 * {@code storage.DLSN.serialize()}. {@link #deserialize(String)} is lenient like commons-codec: it accepts the
 * standard and the URL-safe alphabet, skips other characters and stops at the first {@code =}.
 */
public class DLSN implements Comparable<DLSN> {

    public static final byte VERSION0 = (byte) 0;
    public static final byte VERSION1 = (byte) 1;

    /** The first possible record of a log: {@code (1, 0, 0)}. */
    public static final DLSN InitialDLSN = new DLSN(1, 0, 0);
    /** Sorts just before {@link #InitialDLSN}: {@code (1, 0, -1)}. */
    public static final DLSN NonInclusiveLowerBound = new DLSN(1, 0, -1);
    /** "No DLSN": {@code (0, -1, -1)}. */
    public static final DLSN InvalidDLSN = new DLSN(0, -1, -1);

    static final byte CUR_VERSION = VERSION1;
    /** Length of a version-0 serialization (sic: DistributedLog counts bits here, {@code 3 * 64 + 8}). */
    static final int VERSION0_LEN = Long.SIZE * 3 + Byte.SIZE;
    /** Length of a version-1 serialization: 25 bytes. */
    static final int VERSION1_LEN = Long.SIZE * 3 / Byte.SIZE + 1;

    private final long logSegmentSequenceNo;
    private final long entryId;
    private final long slotId;

    public DLSN(long logSegmentSequenceNo, long entryId, long slotId) {
        this.logSegmentSequenceNo = logSegmentSequenceNo;
        this.entryId = entryId;
        this.slotId = slotId;
    }

    public long getLogSegmentSequenceNo() {
        return logSegmentSequenceNo;
    }

    public long getEntryId() {
        return entryId;
    }

    public long getSlotId() {
        return slotId;
    }

    @Override
    public int compareTo(DLSN that) {
        if (this.logSegmentSequenceNo != that.logSegmentSequenceNo) {
            return this.logSegmentSequenceNo < that.logSegmentSequenceNo ? -1 : 1;
        } else if (this.entryId != that.entryId) {
            return this.entryId < that.entryId ? -1 : 1;
        } else {
            return Long.compare(this.slotId, that.slotId);
        }
    }

    /**
     * @return the version-1 binary form (25 bytes)
     */
    public byte[] serializeBytes() {
        return serializeBytes(CUR_VERSION);
    }

    /**
     * @param version {@link #VERSION0} (200 bytes: the 25 bytes then zeros) or {@link #VERSION1} (25 bytes)
     * @return the binary form
     */
    public byte[] serializeBytes(byte version) {
        if (version != VERSION0 && version != VERSION1) {
            throw new IllegalArgumentException("Unknown DLSN serialization version " + version);
        }
        byte[] data = new byte[version == VERSION0 ? VERSION0_LEN : VERSION1_LEN];
        ByteBuffer bb = ByteBuffer.wrap(data);
        bb.put(version);
        bb.putLong(logSegmentSequenceNo);
        bb.putLong(entryId);
        bb.putLong(slotId);
        return data;
    }

    /**
     * @return standard base64 of the version-1 binary form
     */
    public String serialize() {
        return serialize(CUR_VERSION);
    }

    public String serialize(byte version) {
        return Base64.getEncoder().encodeToString(serializeBytes(version));
    }

    /**
     * Parse the base64 form (leniently, like commons-codec's {@code decodeBase64}).
     *
     * @throws IllegalArgumentException if the decoded bytes are not a valid DLSN serialization
     */
    public static DLSN deserialize(String dlsn) {
        return deserializeBytes(lenientBase64Decode(dlsn));
    }

    /**
     * Parse a version-0 base64 form only.
     *
     * @throws IllegalArgumentException if it is not a version-0 serialization
     */
    public static DLSN deserialize0(String dlsn) {
        byte[] data = lenientBase64Decode(dlsn);
        if (data.length != VERSION0_LEN || data[0] != VERSION0) {
            throw new IllegalArgumentException("Invalid version zero DLSN " + hex(data));
        }
        return deserializeBytes(data);
    }

    /**
     * Parse the binary form: version 0 needs exactly 200 bytes, version 1 exactly 25.
     *
     * @throws IllegalArgumentException on an unknown version or a wrong length
     */
    public static DLSN deserializeBytes(byte[] data) {
        if (data == null || data.length == 0) {
            throw new IllegalArgumentException("Invalid DLSN : empty input");
        }
        ByteBuffer bb = ByteBuffer.wrap(data);
        byte version = bb.get();
        if (VERSION0 == version) {
            if (VERSION0_LEN != data.length) {
                throw new IllegalArgumentException("Invalid version zero DLSN " + hex(data));
            }
        } else if (VERSION1 == version) {
            if (VERSION1_LEN != data.length) {
                throw new IllegalArgumentException("Invalid version one DLSN " + hex(data));
            }
        } else {
            throw new IllegalArgumentException("Invalid DLSN : version = " + version + ", " + hex(data));
        }
        return new DLSN(bb.getLong(), bb.getLong(), bb.getLong());
    }

    @Override
    public String toString() {
        return "DLSN{"
            + "logSegmentSequenceNo=" + logSegmentSequenceNo
            + ", entryId=" + entryId
            + ", slotId=" + slotId
            + '}';
    }

    @Override
    public boolean equals(Object o) {
        if (this == o) {
            return true;
        }
        if (!(o instanceof DLSN)) {
            return false;
        }
        DLSN that = (DLSN) o;
        return logSegmentSequenceNo == that.logSegmentSequenceNo && entryId == that.entryId && slotId == that.slotId;
    }

    @Override
    public int hashCode() {
        int result = (int) (logSegmentSequenceNo ^ (logSegmentSequenceNo >>> 32));
        result = 31 * result + (int) (entryId ^ (entryId >>> 32));
        result = 31 * result + (int) (slotId ^ (slotId >>> 32));
        return result;
    }

    /**
     * @return {@code (lssn, entryId, slotId + 1)}
     */
    public DLSN getNextDLSN() {
        return new DLSN(logSegmentSequenceNo, entryId, slotId + 1);
    }

    /**
     * @return {@code (lssn + 1, 0, 0)}
     */
    public DLSN positionOnTheNextLedger() {
        return new DLSN(logSegmentSequenceNo + 1, 0, 0);
    }

    private static String hex(byte[] data) {
        StringBuilder sb = new StringBuilder(data.length * 2);
        for (byte b : data) {
            sb.append(Character.forDigit((b >> 4) & 0xF, 16)).append(Character.forDigit(b & 0xF, 16));
        }
        return sb.toString();
    }

    /** commons-codec's decoding: both alphabets, other characters skipped, the first '=' ends the input. */
    private static byte[] lenientBase64Decode(String text) {
        if (text == null) {
            throw new IllegalArgumentException("Invalid DLSN : null");
        }
        java.io.ByteArrayOutputStream out = new java.io.ByteArrayOutputStream(text.length() * 3 / 4 + 3);
        int acc = 0;
        int n = 0;
        for (int i = 0; i < text.length(); i++) {
            char ch = text.charAt(i);
            if (ch == '=') {
                break;
            }
            int v;
            if (ch >= 'A' && ch <= 'Z') {
                v = ch - 'A';
            } else if (ch >= 'a' && ch <= 'z') {
                v = ch - 'a' + 26;
            } else if (ch >= '0' && ch <= '9') {
                v = ch - '0' + 52;
            } else if (ch == '+' || ch == '-') {
                v = 62;
            } else if (ch == '/' || ch == '_') {
                v = 63;
            } else {
                continue;
            }
            acc = (acc << 6) | v;
            n++;
            if (n == 4) {
                out.write((acc >> 16) & 0xFF);
                out.write((acc >> 8) & 0xFF);
                out.write(acc & 0xFF);
                acc = 0;
                n = 0;
            }
        }
        if (n == 2) {
            out.write((acc >> 4) & 0xFF);
        } else if (n == 3) {
            out.write((acc >> 10) & 0xFF);
            out.write((acc >> 2) & 0xFF);
        }
        return out.toByteArray();
    }
}
