package org.apache.distributedlog.spark.rt;

import java.io.Serializable;
import java.nio.charset.StandardCharsets;
import java.security.MessageDigest;
import java.security.NoSuchAlgorithmException;
import java.util.ArrayList;
import java.util.Collections;
import java.util.LinkedHashMap;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.TreeMap;
import java.util.regex.Pattern;
import java.util.regex.PatternSyntaxException;
import org.apache.distributedlog.shim.Json;

/**
 * The options of {@code format("distributedlog-rt")}, checked when the query is defined. Names and meanings are
 * those of the Python source {@code format("distributedlog")} where they apply; the options that only make sense
 * for micro-batches of bounded size (rate limits, partition sizing, ending positions) are refused with an
 * {@link IllegalArgumentException} naming the option, as is any unknown option.
 */
final class RtOptions implements Serializable {

    private static final long serialVersionUID = 1L;

    /** The short name of the source. */
    static final String FORMAT = "distributedlog-rt";

    /** Options {@code dlog.<key>}: DistributedLog configuration of the namespace the source opens. */
    static final String CONF_PREFIX = "dlog.";

    /** Every option this source takes (canonical spelling). */
    static final List<String> OPTIONS = List.of("uri", "streams", "streamPattern", "startingOffsets", "startingTxId",
        "failOnDataLoss", "subscriberId", "path");

    /** The Python source's options this one refuses, with why. */
    static final Map<String, String> REFUSED;

    static {
        Map<String, String> m = new LinkedHashMap<>();
        String rate = "rate limits do not apply: in real-time mode every record is read as soon as it is written "
            + "(use format(\"distributedlog\") for rate-limited micro-batches)";
        for (String k : List.of("maxRecordsPerTrigger", "maxBytesPerTrigger", "minRecordsPerTrigger",
                "maxTriggerDelay")) {
            m.put(k, rate);
        }
        String sizing = "partitions are fixed: one input partition per log";
        for (String k : List.of("maxRecordsPerPartition", "minPartitions", "minRecordsPerPartition",
                "maxPartitions")) {
            m.put(k, sizing);
        }
        String ending = "a stream has no end (read a time or position range with spark.read.format(\"distributedlog\"))";
        m.put("endingOffsets", ending);
        m.put("endingTxId", ending);
        REFUSED = Collections.unmodifiableMap(m);
    }

    /** Where a log starts when {@code startingOffsets} is earliest, latest or names it. */
    enum StartKind { EARLIEST, LATEST, JSON, TXID }

    final String uri;
    /** The logs named by {@code streams} (deduplicated, in order), or null with {@link #streamPattern}. */
    final List<String> streams;
    final String streamPattern;
    final StartKind start;
    /** {@code startingOffsets} JSON: log -> "earliest" | "latest" | DLSN text (sorted by log). */
    final Map<String, String> startPerLog;
    final long startingTxId;
    final boolean failOnDataLoss;
    final String subscriberId;
    /** {@code dlog.<key>} options (key without the prefix, as the user spelled it). */
    final Map<String, String> conf;

    private transient Pattern compiled;

    private RtOptions(String uri, List<String> streams, String streamPattern, StartKind start,
                      Map<String, String> startPerLog, long startingTxId, boolean failOnDataLoss, String subscriberId,
                      Map<String, String> conf) {
        this.uri = uri;
        this.streams = streams;
        this.streamPattern = streamPattern;
        this.start = start;
        this.startPerLog = startPerLog;
        this.startingTxId = startingTxId;
        this.failOnDataLoss = failOnDataLoss;
        this.subscriberId = subscriberId;
        this.conf = conf;
    }

    /** True if {@code log} is one of this source's logs. */
    boolean matches(String log) {
        if (streams != null) {
            return streams.contains(log);
        }
        if (compiled == null) {
            compiled = Pattern.compile(streamPattern);
        }
        return compiled.matcher(log).matches();
    }

    private static IllegalArgumentException bad(String msg) {
        return new IllegalArgumentException(msg);
    }

    /**
     * Check and parse the options ({@code options} as Spark gives them: keys in the user's spelling or
     * lower-cased; names are compared case-insensitively).
     *
     * @throws IllegalArgumentException a missing {@code uri}; both or neither of {@code streams} /
     *         {@code streamPattern}; an empty log name or a bad regex; malformed {@code startingOffsets} or a log
     *         there that is not one of the source's; {@code startingOffsets} with {@code startingTxId}; a bad
     *         number, boolean or subscriber id; an option this source refuses or does not know (naming it)
     */
    static RtOptions parse(Map<String, String> options) {
        Map<String, String> canonical = new LinkedHashMap<>();
        for (String name : OPTIONS) {
            canonical.put(name.toLowerCase(Locale.ROOT), name);
        }
        Map<String, String> opts = new TreeMap<>();
        Map<String, String> conf = new TreeMap<>();
        for (Map.Entry<String, String> e : options.entrySet()) {
            String key = e.getKey();
            String low = key.toLowerCase(Locale.ROOT);
            if (low.startsWith(CONF_PREFIX)) {
                String k = key.substring(CONF_PREFIX.length());
                if (k.isEmpty()) {
                    throw bad("option " + key + ": a DistributedLog configuration key must follow 'dlog.'");
                }
                conf.put(k, e.getValue());
                continue;
            }
            for (Map.Entry<String, String> r : REFUSED.entrySet()) {
                if (r.getKey().toLowerCase(Locale.ROOT).equals(low)) {
                    throw bad("option " + r.getKey() + " is not supported by format " + FORMAT + ": " + r.getValue());
                }
            }
            if (!canonical.containsKey(low)) {
                throw bad("unknown option " + key + " for format " + FORMAT + "; valid options: "
                    + String.join(", ", OPTIONS.subList(0, OPTIONS.size() - 1)) + " and dlog.<key>");
            }
            opts.put(canonical.get(low), e.getValue());
        }
        String uri = opts.getOrDefault("uri", "").trim();
        if (uri.isEmpty()) {
            throw bad("option uri is required: the namespace URI, e.g. distributedlog-local:///abs/path");
        }
        String streamsRaw = opts.get("streams");
        String patternRaw = opts.get("streamPattern");
        if (streamsRaw != null && patternRaw != null) {
            throw bad("options streams and streamPattern are exclusive: give exactly one of them");
        }
        if (streamsRaw == null && patternRaw == null) {
            throw bad("one of the options streams (comma-separated log names) or streamPattern is required");
        }
        List<String> streams = null;
        if (streamsRaw != null) {
            LinkedHashSet<String> names = new LinkedHashSet<>();
            for (String n : streamsRaw.split(",", -1)) {
                String name = n.trim();
                if (name.isEmpty()) {
                    throw bad("option streams must be a comma-separated list of log names, got '" + streamsRaw + "'");
                }
                names.add(name);
            }
            streams = Collections.unmodifiableList(new ArrayList<>(names));
        } else {
            if (patternRaw.trim().isEmpty()) {
                throw bad("option streamPattern must be a non-empty regular expression");
            }
            try {
                Pattern.compile(patternRaw);
            } catch (PatternSyntaxException e) {
                throw bad("option streamPattern is not a valid regular expression (" + e.getDescription() + "): '"
                    + patternRaw + "'");
            }
        }

        String startRaw = opts.get("startingOffsets");
        String txidRaw = opts.get("startingTxId");
        if (startRaw != null && txidRaw != null) {
            throw bad("options startingOffsets and startingTxId are exclusive: give at most one");
        }
        StartKind kind = StartKind.LATEST;
        Map<String, String> perLog = new TreeMap<>();
        long txid = -1;
        if (txidRaw != null) {
            String t = txidRaw.trim();
            if (!t.matches("[+]?[0-9]{1,19}")) {
                throw bad("option startingTxId must be an integer >= 0, got '" + txidRaw + "'");
            }
            try {
                txid = Long.parseLong(t.startsWith("+") ? t.substring(1) : t);
            } catch (NumberFormatException e) {
                throw bad("option startingTxId must be an integer >= 0, got '" + txidRaw + "'");
            }
            kind = StartKind.TXID;
        } else if (startRaw != null) {
            String text = startRaw.trim();
            String low = text.toLowerCase(Locale.ROOT);
            if (low.equals("earliest")) {
                kind = StartKind.EARLIEST;
            } else if (low.equals("latest")) {
                kind = StartKind.LATEST;
            } else if (low.startsWith("committed:")) {
                throw bad("option startingOffsets='committed:<log>' is not supported by format " + FORMAT
                    + " (it reads the commits of format(\"distributedlog\")'s sink): give 'earliest', 'latest' or "
                    + "JSON offsets");
            } else if (text.startsWith("{")) {
                Object doc;
                try {
                    doc = Json.parse(text);
                } catch (IllegalArgumentException e) {
                    throw bad("option startingOffsets is not valid JSON (" + e.getMessage() + "): '" + startRaw + "'");
                }
                if (!(doc instanceof Map)) {
                    throw bad("option startingOffsets must be a JSON object {log: position}, got '" + startRaw + "'");
                }
                for (Map.Entry<?, ?> e : ((Map<?, ?>) doc).entrySet()) {
                    String log = String.valueOf(e.getKey());
                    Object v = e.getValue();
                    if (v instanceof String && (((String) v).trim().equalsIgnoreCase("earliest")
                            || ((String) v).trim().equalsIgnoreCase("latest"))) {
                        perLog.put(log, ((String) v).trim().toLowerCase(Locale.ROOT));
                    } else {
                        try {
                            perLog.put(log, Dlsns.text(Dlsns.parse(v, log)));
                        } catch (IllegalArgumentException ex) {
                            throw bad("option startingOffsets: " + ex.getMessage());
                        }
                    }
                }
                kind = StartKind.JSON;
            } else {
                throw bad("option startingOffsets must be 'earliest', 'latest' or a JSON object "
                    + "{\"log\": \"lssn,entry,slot\" | \"earliest\" | \"latest\"}, got '" + startRaw + "'");
            }
        }

        boolean failOnDataLoss = true;
        String fodl = opts.get("failOnDataLoss");
        if (fodl != null) {
            String t = fodl.trim().toLowerCase(Locale.ROOT);
            if (!t.equals("true") && !t.equals("false")) {
                throw bad("option failOnDataLoss must be 'true' or 'false', got '" + fodl + "'");
            }
            failOnDataLoss = t.equals("true");
        }

        String subscriber = opts.get("subscriberId");
        if (subscriber == null) {
            subscriber = defaultSubscriberId(uri, streams, patternRaw);
        } else {
            subscriber = subscriber.trim();
            boolean badChar = subscriber.chars().anyMatch(c -> c == '/' || c < 0x20 || (c >= 0x7f && c <= 0x9f));
            if (subscriber.isEmpty() || subscriber.length() > 255 || badChar || subscriber.equals(".")
                    || subscriber.equals("..")) {
                throw bad("option subscriberId: invalid subscriber id '" + subscriber + "' (1 to 255 characters, "
                    + "no '/' or control characters, not '.' or '..')");
            }
        }
        RtOptions parsed = new RtOptions(uri, streams, streams == null ? patternRaw : null, kind,
            Collections.unmodifiableMap(perLog), txid, failOnDataLoss, subscriber, Collections.unmodifiableMap(conf));
        for (String log : perLog.keySet()) {
            if (!parsed.matches(log)) {
                String what = streams != null ? "streams " + streams : "streamPattern '" + patternRaw + "'";
                throw bad("option startingOffsets names log '" + log + "', which is not one of " + what);
            }
        }
        return parsed;
    }

    /**
     * {@code spark-} and 16 hex digits of the SHA-256 of {@code json.dumps([uri, streams, pattern])}: the same id
     * the Python source gives a query reading the same logs of the same namespace.
     */
    static String defaultSubscriberId(String uri, List<String> streams, String pattern) {
        StringBuilder sb = new StringBuilder("[").append(PyJson.quote(uri)).append(", ");
        if (streams == null) {
            sb.append("null");
        } else {
            sb.append('[');
            for (int i = 0; i < streams.size(); i++) {
                sb.append(i == 0 ? "" : ", ").append(PyJson.quote(streams.get(i)));
            }
            sb.append(']');
        }
        sb.append(", ").append(pattern == null ? "null" : PyJson.quote(pattern)).append(']');
        try {
            byte[] h = MessageDigest.getInstance("SHA-256").digest(sb.toString().getBytes(StandardCharsets.UTF_8));
            StringBuilder hex = new StringBuilder("spark-");
            for (int i = 0; i < 8; i++) {
                hex.append(String.format("%02x", h[i] & 0xff));
            }
            return hex.toString();
        } catch (NoSuchAlgorithmException e) {
            throw new IllegalStateException("SHA-256 is not available", e);
        }
    }
}
