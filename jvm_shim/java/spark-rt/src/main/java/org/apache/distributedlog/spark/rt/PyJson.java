package org.apache.distributedlog.spark.rt;

import java.util.Map;

/**
 * JSON text written byte for byte as Python's {@code json.dumps} writes it by default: {@code ", "} and
 * {@code ": "} separators, every character outside printable ASCII escaped ({@code ensure_ascii}).
 *
 * <p>Why this stays beside the shim's {@code org.apache.distributedlog.shim.Json} (which parses everything this
 * source reads): that one writes compact JSON for the gateway protocol ({@code ","}, {@code ":"}, non-ASCII as it
 * is). The texts written here must equal the Python source's to the byte: the offsets (the JSON that
 * {@code format("distributedlog")} writes into a checkpoint) and the input of the SHA-256 behind the default
 * subscriber id (which must give the Python source's id for the same logs).
 */
final class PyJson {

    private PyJson() {
    }

    /** A JSON string literal, escaped as Python's {@code json.dumps} (ensure_ascii) escapes it. */
    static String quote(String s) {
        StringBuilder sb = new StringBuilder(s.length() + 2).append('"');
        for (int i = 0; i < s.length(); i++) {
            char c = s.charAt(i);
            switch (c) {
                case '"': sb.append("\\\""); break;
                case '\\': sb.append("\\\\"); break;
                case '\n': sb.append("\\n"); break;
                case '\r': sb.append("\\r"); break;
                case '\t': sb.append("\\t"); break;
                case '\b': sb.append("\\b"); break;
                case '\f': sb.append("\\f"); break;
                default:
                    if (c < 0x20 || c > 0x7e) {
                        sb.append(String.format("\\u%04x", (int) c));
                    } else {
                        sb.append(c);
                    }
            }
        }
        return sb.append('"').toString();
    }

    /** {@code {"k": "v", ...}} in the map's order. */
    static String writeStringMap(Map<String, String> m) {
        StringBuilder sb = new StringBuilder("{");
        boolean first = true;
        for (Map.Entry<String, String> e : m.entrySet()) {
            if (!first) {
                sb.append(", ");
            }
            first = false;
            sb.append(quote(e.getKey())).append(": ").append(quote(e.getValue()));
        }
        return sb.append('}').toString();
    }
}
