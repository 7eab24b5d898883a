package org.apache.distributedlog.shim;

import java.io.IOException;
import java.util.Collections;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.Map;
import java.util.function.Function;
import org.apache.distributedlog.exceptions.AlreadyClosedException;
import org.apache.distributedlog.exceptions.BKTransmitException;
import org.apache.distributedlog.exceptions.ChecksumFailedException;
import org.apache.distributedlog.exceptions.DLException;
import org.apache.distributedlog.exceptions.DLIllegalStateException;
import org.apache.distributedlog.exceptions.DLInterruptedException;
import org.apache.distributedlog.exceptions.DLSNAlreadyTruncatedException;
import org.apache.distributedlog.exceptions.EndOfStreamException;
import org.apache.distributedlog.exceptions.IdleReaderException;
import org.apache.distributedlog.exceptions.InvalidEnvelopedEntryException;
import org.apache.distributedlog.exceptions.InvalidStreamNameException;
import org.apache.distributedlog.exceptions.LockingException;
import org.apache.distributedlog.exceptions.LogEmptyException;
import org.apache.distributedlog.exceptions.LogExistsException;
import org.apache.distributedlog.exceptions.LogNotFoundException;
import org.apache.distributedlog.exceptions.LogReadException;
import org.apache.distributedlog.exceptions.LogRecordTooLongException;
import org.apache.distributedlog.exceptions.LogSegmentIsTruncatedException;
import org.apache.distributedlog.exceptions.LogSegmentNotFoundException;
import org.apache.distributedlog.exceptions.MetadataException;
import org.apache.distributedlog.exceptions.OverCapacityException;
import org.apache.distributedlog.exceptions.OwnershipAcquireFailedException;
import org.apache.distributedlog.exceptions.ReadCancelledException;
import org.apache.distributedlog.exceptions.StatusCode;
import org.apache.distributedlog.exceptions.StreamNotReadyException;
import org.apache.distributedlog.exceptions.TransactionIdOutOfOrderException;
import org.apache.distributedlog.exceptions.UnexpectedException;
import org.apache.distributedlog.exceptions.UnsupportedMetadataVersionException;
import org.apache.distributedlog.exceptions.WriteCancelledException;
import org.apache.distributedlog.exceptions.WriteException;

/**
 * Maps a Python {@code storage.errors} class to its DistributedLog Java exception.
 *
 * <table>
 * <caption>Python error → Java exception</caption>
 * <tr><td>DLError</td><td>DLException</td></tr>
 * <tr><td>InvalidStreamNameError</td><td>InvalidStreamNameException</td></tr>
 * <tr><td>LogNotFoundError</td><td>LogNotFoundException</td></tr>
 * <tr><td>LogExistsError</td><td>LogExistsException</td></tr>
 * <tr><td>LogEmptyError</td><td>LogEmptyException</td></tr>
 * <tr><td>InvalidArgumentError, InvalidConfigError</td><td>java.lang.IllegalArgumentException (as DistributedLog
 * throws for bad arguments and configuration)</td></tr>
 * <tr><td>LockingError, WriterFencedError</td><td>LockingException</td></tr>
 * <tr><td>OwnershipAcquireFailedError</td><td>OwnershipAcquireFailedException</td></tr>
 * <tr><td>WriteError</td><td>WriteException</td></tr>
 * <tr><td>WriteCancelledError</td><td>WriteCancelledException</td></tr>
 * <tr><td>TransmitError</td><td>BKTransmitException</td></tr>
 * <tr><td>StreamNotReadyError</td><td>StreamNotReadyException</td></tr>
 * <tr><td>OverCapacityError</td><td>OverCapacityException</td></tr>
 * <tr><td>TransactionIdOutOfOrderError</td><td>TransactionIdOutOfOrderException</td></tr>
 * <tr><td>EndOfStreamError</td><td>EndOfStreamException</td></tr>
 * <tr><td>LogRecordTooLongError</td><td>LogRecordTooLongException</td></tr>
 * <tr><td>AlreadyTruncatedTransactionError</td><td>DLSNAlreadyTruncatedException (an
 * AlreadyTruncatedTransactionException)</td></tr>
 * <tr><td>CorruptedEntryError</td><td>ChecksumFailedException</td></tr>
 * <tr><td>InvalidEnvelopedEntryError</td><td>InvalidEnvelopedEntryException</td></tr>
 * <tr><td>ReadCancelledError</td><td>ReadCancelledException</td></tr>
 * <tr><td>LogReadError</td><td>LogReadException</td></tr>
 * <tr><td>IdleReaderError</td><td>IdleReaderException</td></tr>
 * <tr><td>MetadataError and its subclasses but one</td><td>MetadataException</td></tr>
 * <tr><td>UnsupportedMetadataVersionError</td><td>UnsupportedMetadataVersionException</td></tr>
 * <tr><td>LogSegmentNotFoundError</td><td>LogSegmentNotFoundException</td></tr>
 * <tr><td>LogSegmentIsTruncatedError</td><td>LogSegmentIsTruncatedException</td></tr>
 * <tr><td>SegmentStoreError, LedgerNotFoundError</td><td>DLException</td></tr>
 * <tr><td>IllegalStateError</td><td>DLIllegalStateException</td></tr>
 * <tr><td>AlreadyClosedError</td><td>AlreadyClosedException</td></tr>
 * <tr><td>UnexpectedError (also any non-DLError Python exception)</td><td>UnexpectedException</td></tr>
 * <tr><td>DLInterruptedError</td><td>DLInterruptedException</td></tr>
 * </table>
 *
 * <p>A Python class with no entry is looked up through its Python parents (the table {@link #PYTHON_PARENTS}
 * mirrors {@code storage/errors.py}); a class unknown to this table too is mapped by its status code, else to
 * {@link DLException}. Every exception carries the Python message unchanged, the status code the Python error
 * carries (or the Java class's own), and {@link DLException#getRemoteError()}.
 */
public final class Errors {

    private Errors() {
    }

    private static final Map<String, Function<RemoteError, Exception>> BY_CLASS = new HashMap<>();
    /** Python class -> its Python parent class, as in {@code storage/errors.py}. */
    static final Map<String, String> PYTHON_PARENTS;
    private static final Map<Integer, Function<RemoteError, Exception>> BY_CODE = new HashMap<>();

    static {
        BY_CLASS.put("DLError", DLException::new);
        BY_CLASS.put("InvalidStreamNameError", InvalidStreamNameException::new);
        BY_CLASS.put("LogNotFoundError", LogNotFoundException::new);
        BY_CLASS.put("LogExistsError", LogExistsException::new);
        BY_CLASS.put("LogEmptyError", LogEmptyException::new);
        BY_CLASS.put("InvalidArgumentError", e -> new IllegalArgumentException(e.getMessage()));
        BY_CLASS.put("LockingError", LockingException::new);
        BY_CLASS.put("OwnershipAcquireFailedError", OwnershipAcquireFailedException::new);
        BY_CLASS.put("WriteError", WriteException::new);
        BY_CLASS.put("WriteCancelledError", WriteCancelledException::new);
        BY_CLASS.put("TransmitError", BKTransmitException::new);
        BY_CLASS.put("StreamNotReadyError", StreamNotReadyException::new);
        BY_CLASS.put("OverCapacityError", OverCapacityException::new);
        BY_CLASS.put("TransactionIdOutOfOrderError", TransactionIdOutOfOrderException::new);
        BY_CLASS.put("EndOfStreamError", EndOfStreamException::new);
        BY_CLASS.put("LogRecordTooLongError", LogRecordTooLongException::new);
        BY_CLASS.put("AlreadyTruncatedTransactionError", DLSNAlreadyTruncatedException::new);
        BY_CLASS.put("CorruptedEntryError", ChecksumFailedException::new);
        BY_CLASS.put("InvalidEnvelopedEntryError", InvalidEnvelopedEntryException::new);
        BY_CLASS.put("ReadCancelledError", ReadCancelledException::new);
        BY_CLASS.put("LogReadError", LogReadException::new);
        BY_CLASS.put("IdleReaderError", IdleReaderException::new);
        BY_CLASS.put("MetadataError", MetadataException::new);
        BY_CLASS.put("UnsupportedMetadataVersionError", UnsupportedMetadataVersionException::new);
        BY_CLASS.put("LogSegmentNotFoundError", LogSegmentNotFoundException::new);
        BY_CLASS.put("LogSegmentIsTruncatedError", LogSegmentIsTruncatedException::new);
        BY_CLASS.put("IllegalStateError", DLIllegalStateException::new);
        BY_CLASS.put("AlreadyClosedError", AlreadyClosedException::new);
        BY_CLASS.put("UnexpectedError", UnexpectedException::new);
        BY_CLASS.put("DLInterruptedError", DLInterruptedException::new);

        Map<String, String> p = new LinkedHashMap<>();
        for (String c : new String[] {"InvalidStreamNameError", "LogNotFoundError", "LogExistsError", "LogEmptyError",
            "InvalidArgumentError", "LockingError", "WriteError", "StreamNotReadyError", "OverCapacityError",
            "TransactionIdOutOfOrderError", "EndOfStreamError", "LogRecordTooLongError",
            "AlreadyTruncatedTransactionError", "CorruptedEntryError", "ReadCancelledError", "LogReadError",
            "IdleReaderError", "MetadataError", "LogSegmentNotFoundError", "LogSegmentIsTruncatedError",
            "SegmentStoreError", "IllegalStateError", "UnexpectedError", "DLInterruptedError"}) {
            p.put(c, "DLError");
        }
        p.put("InvalidConfigError", "InvalidArgumentError");
        p.put("OwnershipAcquireFailedError", "LockingError");
        p.put("WriterFencedError", "LockingError");
        p.put("WriteCancelledError", "WriteError");
        p.put("TransmitError", "WriteError");
        p.put("InvalidEnvelopedEntryError", "CorruptedEntryError");
        p.put("MetadataConnectionError", "MetadataError");
        p.put("MetadataVersionError", "MetadataError");
        p.put("NodeExistsError", "MetadataError");
        p.put("NoNodeError", "MetadataError");
        p.put("UnsupportedMetadataVersionError", "MetadataError");
        p.put("LedgerNotFoundError", "SegmentStoreError");
        p.put("AlreadyClosedError", "IllegalStateError");
        PYTHON_PARENTS = Collections.unmodifiableMap(p);

        BY_CODE.put(StatusCode.INVALID_STREAM_NAME, InvalidStreamNameException::new);
        BY_CODE.put(StatusCode.LOG_NOT_FOUND, LogNotFoundException::new);
        BY_CODE.put(StatusCode.LOG_EXISTS, LogExistsException::new);
        BY_CODE.put(StatusCode.LOG_EMPTY, LogEmptyException::new);
        BY_CODE.put(StatusCode.LOCKING_EXCEPTION, LockingException::new);
        BY_CODE.put(StatusCode.FOUND, OwnershipAcquireFailedException::new);
        BY_CODE.put(StatusCode.WRITE_EXCEPTION, WriteException::new);
        BY_CODE.put(StatusCode.WRITE_CANCELLED_EXCEPTION, WriteCancelledException::new);
        BY_CODE.put(StatusCode.BK_TRANSMIT_ERROR, BKTransmitException::new);
        BY_CODE.put(StatusCode.STREAM_NOT_READY, StreamNotReadyException::new);
        BY_CODE.put(StatusCode.OVER_CAPACITY, OverCapacityException::new);
        BY_CODE.put(StatusCode.TRANSACTION_OUT_OF_ORDER, TransactionIdOutOfOrderException::new);
        BY_CODE.put(StatusCode.END_OF_STREAM, EndOfStreamException::new);
        BY_CODE.put(StatusCode.TOO_LARGE_RECORD, LogRecordTooLongException::new);
        BY_CODE.put(StatusCode.TRUNCATED_TRANSACTION, DLSNAlreadyTruncatedException::new);
        BY_CODE.put(StatusCode.CHECKSUM_FAILED, ChecksumFailedException::new);
        BY_CODE.put(StatusCode.INVALID_ENVELOPED_ENTRY, InvalidEnvelopedEntryException::new);
        BY_CODE.put(StatusCode.READ_CANCELLED_EXCEPTION, ReadCancelledException::new);
        BY_CODE.put(StatusCode.LOG_READ_ERROR, LogReadException::new);
        BY_CODE.put(StatusCode.METADATA_EXCEPTION, MetadataException::new);
        BY_CODE.put(StatusCode.UNSUPPORTED_METADATA_VERSION, UnsupportedMetadataVersionException::new);
        BY_CODE.put(StatusCode.LOG_SEGMENT_NOT_FOUND, LogSegmentNotFoundException::new);
        BY_CODE.put(StatusCode.LOG_SEGMENT_IS_TRUNCATED, LogSegmentIsTruncatedException::new);
        BY_CODE.put(StatusCode.ILLEGAL_STATE, DLIllegalStateException::new);
        BY_CODE.put(StatusCode.ALREADY_CLOSED, AlreadyClosedException::new);
        BY_CODE.put(StatusCode.INTERRUPTED, DLInterruptedException::new);
        BY_CODE.put(StatusCode.UNEXPECTED, UnexpectedException::new);
    }

    /**
     * The Java exception for an error of the gateway: an {@link IOException} (a {@link DLException} or
     * {@link IdleReaderException}), or {@link IllegalArgumentException} for the Python
     * {@code InvalidArgumentError} family.
     *
     * @param error the gateway's error description
     * @return the exception (not thrown)
     */
    public static Exception toException(RemoteError error) {
        String cls = error.getPythonClass();
        for (int depth = 0; cls != null && depth < 32; depth++) {
            Function<RemoteError, Exception> f = BY_CLASS.get(cls);
            if (f != null) {
                return f.apply(error);
            }
            cls = PYTHON_PARENTS.get(cls);
        }
        if (error.getCode() != null) {
            Function<RemoteError, Exception> f = BY_CODE.get(error.getCode());
            if (f != null) {
                return f.apply(error);
            }
        }
        return new DLException(error);
    }

    /**
     * Throw {@code e} as it is if it is an {@link IOException} or unchecked, else wrapped in an
     * {@link IOException}.
     */
    static IOException rethrow(Throwable e) throws IOException {
        if (e instanceof IOException) {
            throw (IOException) e;
        }
        if (e instanceof RuntimeException) {
            throw (RuntimeException) e;
        }
        if (e instanceof Error) {
            throw (Error) e;
        }
        throw new IOException(e);
    }
}
