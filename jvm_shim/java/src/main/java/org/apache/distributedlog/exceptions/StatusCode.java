package org.apache.distributedlog.exceptions;

/**
 * DistributedLog's status codes (the {@code code} of {@link DLException}).
 */
public interface StatusCode {
    int SUCCESS = 200;
    int CLIENT_CLOSED = 301;
    int FOUND = 302;
    int REQUEST_DENIED = 403;
    int TOO_LARGE_RECORD = 413;
    int INTERNAL_SERVER_ERROR = 500;
    int NOT_IMPLEMENTED = 501;
    int ALREADY_CLOSED = 502;
    int SERVICE_UNAVAILABLE = 503;
    int LOCKING_EXCEPTION = 504;
    int ZOOKEEPER_ERROR = 505;
    int METADATA_EXCEPTION = 506;
    int BK_TRANSMIT_ERROR = 507;
    int FLUSH_TIMEOUT = 508;
    int LOG_EMPTY = 509;
    int LOG_NOT_FOUND = 510;
    int TRUNCATED_TRANSACTION = 511;
    int END_OF_STREAM = 512;
    int TRANSACTION_OUT_OF_ORDER = 513;
    int WRITE_EXCEPTION = 514;
    int STREAM_UNAVAILABLE = 515;
    int WRITE_CANCELLED_EXCEPTION = 516;
    int OVER_CAPACITY = 517;
    int STREAM_NOT_READY = 518;
    int REGION_UNAVAILABLE = 519;
    int INVALID_ENVELOPED_ENTRY = 520;
    int UNSUPPORTED_METADATA_VERSION = 521;
    int LOG_EXISTS = 522;
    int CHECKSUM_FAILED = 523;
    int TOO_MANY_STREAMS = 524;
    int LOG_SEGMENT_NOT_FOUND = 525;
    int END_OF_LOG_SEGMENT = 526;
    int LOG_SEGMENT_IS_TRUNCATED = 527;
    int UNEXPECTED = 600;
    int INTERRUPTED = 601;
    int INVALID_STREAM_NAME = 602;
    int ILLEGAL_STATE = 603;
    int RETRYABLE_READ = 1000;
    int LOG_READ_ERROR = 1001;
    int READ_CANCELLED_EXCEPTION = 1002;
}
