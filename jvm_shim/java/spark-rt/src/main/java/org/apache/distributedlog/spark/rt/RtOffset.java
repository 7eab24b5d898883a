package org.apache.distributedlog.spark.rt;

import java.util.Collections;
import java.util.LinkedHashMap;
import java.util.Map;
import java.util.TreeMap;
import org.apache.distributedlog.DLSN;
import org.apache.distributedlog.shim.Json;
import org.apache.spark.sql.connector.read.streaming.Offset;

/**
 * The source's offset: for each log, the DLSN of the next record to read, as JSON
 * {@code {"<log>": "lssn,entry,slot"}} with the logs sorted: the same JSON the Python source
 * {@code format("distributedlog")} writes.
 */
final class RtOffset extends Offset {

    /** log -> DLSN, sorted by log. */
    final Map<String, DLSN> positions;

    RtOffset(Map<String, DLSN> positions) {
        this.positions = Collections.unmodifiableMap(new TreeMap<>(positions));
    }

    @Override
    public String json() {
        Map<String, String> m = new LinkedHashMap<>();
        for (Map.Entry<String, DLSN> e : positions.entrySet()) {
            m.put(e.getKey(), Dlsns.text(e.getValue()));
        }
        return PyJson.writeStringMap(m);
    }

    /**
     * The offset of a checkpointed JSON text.
     *
     * @throws IllegalArgumentException not a JSON object of offset strings
     */
    static RtOffset fromJson(String json) {
        Object doc = Json.parse(json);
        if (!(doc instanceof Map)) {
            throw new IllegalArgumentException("source offset must be a JSON object {log: 'lssn,entry,slot'}, got "
                + json);
        }
        Map<String, DLSN> m = new TreeMap<>();
        for (Map.Entry<?, ?> e : ((Map<?, ?>) doc).entrySet()) {
            String log = String.valueOf(e.getKey());
            m.put(log, Dlsns.parse(e.getValue(), log));
        }
        return new RtOffset(m);
    }
}
