package org.apache.distributedlog;

import java.io.IOException;
import java.io.InputStream;
import java.io.Reader;
import java.net.URL;
import java.util.Collections;
import java.util.Iterator;
import java.util.LinkedHashMap;
import java.util.Map;
import java.util.Properties;

/**
 * DistributedLog's configuration: a set of properties with DistributedLog's camelCase keys (for example
 * {@code lockTimeoutSeconds}, {@code writerOutputBufferSize}, {@code enableImmediateFlush}). They are passed, as
 * they are, to the Python storage core when the namespace is opened ({@code namespace.open}'s {@code conf}), which
 * validates them: an unknown key or a bad value fails {@code build()} with {@code IllegalArgumentException} naming
 * the key, a DistributedLog key the project does not implement is accepted with a warning.
 *
 * <p>Only the properties set here are sent; the Python defaults apply to the others.
 */
public class DistributedLogConfiguration implements Cloneable {

    private final Map<String, Object> props = new LinkedHashMap<>();

    public DistributedLogConfiguration() {
    }

    // --- generic properties -------------------------------------------------------------

    public DistributedLogConfiguration setProperty(String key, Object value) {
        if (value == null) {
            props.remove(key);
        } else {
            props.put(key, value);
        }
        return this;
    }

    public void addProperty(String key, Object value) {
        setProperty(key, value);
    }

    public void clearProperty(String key) {
        props.remove(key);
    }

    public Object getProperty(String key) {
        return props.get(key);
    }

    public boolean containsKey(String key) {
        return props.containsKey(key);
    }

    public Iterator<String> getKeys() {
        return Collections.unmodifiableSet(props.keySet()).iterator();
    }

    public String getString(String key, String defaultValue) {
        Object v = props.get(key);
        return v == null ? defaultValue : String.valueOf(v);
    }

    public int getInt(String key, int defaultValue) {
        Object v = props.get(key);
        if (v == null) {
            return defaultValue;
        }
        return v instanceof Number ? ((Number) v).intValue() : Integer.parseInt(String.valueOf(v).trim());
    }

    public long getLong(String key, long defaultValue) {
        Object v = props.get(key);
        if (v == null) {
            return defaultValue;
        }
        return v instanceof Number ? ((Number) v).longValue() : Long.parseLong(String.valueOf(v).trim());
    }

    public boolean getBoolean(String key, boolean defaultValue) {
        Object v = props.get(key);
        if (v == null) {
            return defaultValue;
        }
        return v instanceof Boolean ? (Boolean) v : Boolean.parseBoolean(String.valueOf(v).trim());
    }

    /**
     * @return a copy of the properties set, as sent to the gateway
     */
    public Map<String, Object> toMap() {
        return new LinkedHashMap<>(props);
    }

    /**
     * Load properties from a properties file (for example {@code conf/distributedlog.conf}); values are kept as
     * text and converted by the Python side.
     */
    public void loadConf(URL confURL) throws IOException {
        try (InputStream in = confURL.openStream()) {
            Properties p = new Properties();
            p.load(in);
            putAll(p);
        }
    }

    /** Load properties from a reader in properties-file syntax. */
    public void loadConf(Reader reader) throws IOException {
        Properties p = new Properties();
        p.load(reader);
        putAll(p);
    }

    /** Set every property of a properties file, its value trimmed (as text). */
    private void putAll(Properties p) {
        for (String k : p.stringPropertyNames()) {
            props.put(k, p.getProperty(k).trim());
        }
    }

    /** Copy every property of {@code other} into this configuration. */
    public void loadConf(DistributedLogConfiguration other) {
        props.putAll(other.props);
    }

    /**
     * Checks nothing on the Java side: the gateway validates the properties when the namespace is opened.
     */
    public void validate() {
    }

    @Override
    public DistributedLogConfiguration clone() {
        DistributedLogConfiguration c = new DistributedLogConfiguration();
        c.props.putAll(props);
        return c;
    }

    // --- typed accessors with DistributedLog's names ------------------------------------------

    public DistributedLogConfiguration setImmediateFlushEnabled(boolean enabled) {
        return setProperty("enableImmediateFlush", enabled);
    }

    public DistributedLogConfiguration setOutputBufferSize(int opBufferSize) {
        return setProperty("writerOutputBufferSize", opBufferSize);
    }

    public DistributedLogConfiguration setPeriodicFlushFrequencyMilliSeconds(int flushFrequencyMs) {
        return setProperty("periodicFlushFrequencyMilliSeconds", flushFrequencyMs);
    }

    public DistributedLogConfiguration setMinDelayBetweenImmediateFlushMs(int minDelayMs) {
        return setProperty("minimumDelayBetweenImmediateFlushMilliSeconds", minDelayMs);
    }

    public DistributedLogConfiguration setLockTimeout(long lockTimeout) {
        return setProperty("lockTimeoutSeconds", lockTimeout);
    }

    public long getLockTimeoutMilliSeconds() {
        return getLong("lockTimeoutSeconds", 30) * 1000L;
    }

    public DistributedLogConfiguration setReadAheadMaxRecords(int readAheadMaxEntries) {
        return setProperty("readAheadMaxRecords", readAheadMaxEntries);
    }

    public DistributedLogConfiguration setReadAheadBatchSize(int readAheadBatchSize) {
        return setProperty("readAheadBatchSize", readAheadBatchSize);
    }

    public DistributedLogConfiguration setReadAheadWaitTime(int readAheadWaitTime) {
        return setProperty("readAheadWaitTime", readAheadWaitTime);
    }

    /**
     * @return how long a blocking read of a {@code LogReader} waits for new records, in milliseconds (200
     *         unless set)
     */
    public int getReadAheadWaitTime() {
        return getInt("readAheadWaitTime", 200);
    }

    public DistributedLogConfiguration setMaxLogSegmentBytes(long maxBytes) {
        return setProperty("maxLogSegmentBytes", maxBytes);
    }

    public DistributedLogConfiguration setLogSegmentRollingIntervalMinutes(int time) {
        return setProperty("logSegmentRollingMinutes", time);
    }

    public DistributedLogConfiguration setRetentionPeriodHours(int retentionHours) {
        return setProperty("logSegmentRetentionHours", retentionHours);
    }

    public DistributedLogConfiguration setExplicitTruncationByApplication(boolean enabled) {
        return setProperty("explicitTruncationByApp", enabled);
    }

    public DistributedLogConfiguration setCompressionType(String compressionType) {
        return setProperty("compressionType", compressionType);
    }

    public DistributedLogConfiguration setCreateStreamIfNotExists(boolean enabled) {
        return setProperty("createStreamIfNotExists", enabled);
    }

    public DistributedLogConfiguration setDurableWriteEnabled(boolean enabled) {
        return setProperty("isDurableWriteEnabled", enabled);
    }

    public DistributedLogConfiguration setIgnoreTruncationStatus(boolean ignoreTruncationStatus) {
        return setProperty("ignoreTruncationStatus", ignoreTruncationStatus);
    }

    public DistributedLogConfiguration setPerWriterOutstandingWriteLimit(int limit) {
        return setProperty("perWriterOutstandingWriteLimit", limit);
    }

    public DistributedLogConfiguration setGlobalOutstandingWriteLimit(int limit) {
        return setProperty("globalOutstandingWriteLimit", limit);
    }

    public DistributedLogConfiguration setLogFlushTimeoutSeconds(int logFlushTimeoutSeconds) {
        return setProperty("logFlushTimeoutSeconds", logFlushTimeoutSeconds);
    }

    public DistributedLogConfiguration setZKSessionTimeoutSeconds(int zkSessionTimeoutSeconds) {
        return setProperty("zkSessionTimeoutSeconds", zkSessionTimeoutSeconds);
    }

    public DistributedLogConfiguration setReaderIdleErrorThresholdMillis(int thresholdMillis) {
        return setProperty("readerIdleErrorThresholdMillis", thresholdMillis);
    }

    public DistributedLogConfiguration setEnableReadAhead(boolean enableReadAhead) {
        return setProperty("enableReadAhead", enableReadAhead);
    }
}
