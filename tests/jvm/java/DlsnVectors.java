import java.util.ArrayList;
import java.util.List;
import org.apache.distributedlog.DLSN;

/**
 * DLSN serialization vectors of the Java shim, to compare with Python's {@code storage.DLSN}.
 *
 * <pre>
 * usage: java DlsnVectors [lssn,entry,slot ...]     (no arguments: the spec's vectors, §1.4)
 * stdout, one line per DLSN:
 *   V &lt;lssn,entry,slot&gt; &lt;serialize()&gt; &lt;serializeBytes() as hex&gt; &lt;ok|MISMATCH&gt;
 *       ok: deserialize(serialize()) and deserializeBytes(serializeBytes()) give the DLSN back, and the version-0
 *       form (200 bytes) round-trips too
 * then:
 *   BAD baddlsn &lt;exception class of DLSN.deserialize("baddlsn")&gt;
 *   ORDER &lt;ok|MISMATCH&gt;     (InvalidDLSN &lt; NonInclusiveLowerBound &lt; InitialDLSN &lt; (1,0,1) &lt; (1,1,0) &lt; (2,0,0))
 * </pre>
 */
public final class DlsnVectors {

    public static void main(String[] args) {
        List<DLSN> dlsns = new ArrayList<>();
        if (args.length == 0) {
            dlsns.add(DLSN.InitialDLSN);
            dlsns.add(DLSN.NonInclusiveLowerBound);
            dlsns.add(DLSN.InvalidDLSN);
            dlsns.add(new DLSN(99, 88, 77));
        } else {
            for (String a : args) {
                String[] p = a.split(",");
                dlsns.add(new DLSN(Long.parseLong(p[0]), Long.parseLong(p[1]), Long.parseLong(p[2])));
            }
        }
        for (DLSN d : dlsns) {
            String b64 = d.serialize();
            byte[] bytes = d.serializeBytes();
            boolean ok = DLSN.deserialize(b64).equals(d)
                && DLSN.deserializeBytes(bytes).equals(d)
                && DLSN.deserialize(d.serialize(DLSN.VERSION0)).equals(d)
                && DLSN.deserializeBytes(d.serializeBytes(DLSN.VERSION0)).equals(d)
                && d.serializeBytes(DLSN.VERSION0).length == 200
                && bytes.length == 25;
            StringBuilder hex = new StringBuilder();
            for (byte b : bytes) {
                hex.append(String.format("%02x", b & 0xff));
            }
            System.out.println("V " + d.getLogSegmentSequenceNo() + "," + d.getEntryId() + "," + d.getSlotId() + " "
                + b64 + " " + hex + " " + (ok ? "ok" : "MISMATCH"));
        }
        try {
            DLSN.deserialize("baddlsn");
            System.out.println("BAD baddlsn none");
        } catch (RuntimeException e) {
            System.out.println("BAD baddlsn " + e.getClass().getName());
        }
        DLSN[] order = {DLSN.InvalidDLSN, DLSN.NonInclusiveLowerBound, DLSN.InitialDLSN, new DLSN(1, 0, 1),
            new DLSN(1, 1, 0), new DLSN(2, 0, 0)};
        boolean sorted = true;
        for (int i = 1; i < order.length; i++) {
            sorted &= order[i - 1].compareTo(order[i]) < 0 && order[i].compareTo(order[i - 1]) > 0;
        }
        System.out.println("ORDER " + (sorted ? "ok" : "MISMATCH"));
    }
}
