package org.apache.distributedlog.shim;

import java.io.IOException;
import java.util.Collections;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
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
 * <p>One table ({@code ROWS}) holds a row per Python class: the class, the DistributedLog status code its Java
 * exception stands for (or none), and the exception's constructor. Both lookups are built from it: by Python class,
 * and by status code for classes this JVM does not know.
 *
 * <table>
 * <caption>Python error → Java exception (status code of the by-code lookup)</caption>
 * <tr><th>Python class</th><th>Java exception</th><th>status code</th></tr>
 * <tr><td>DLError</td><td>DLException</td><td>-</td></tr>
 * <tr><td>InvalidStreamNameError</td><td>InvalidStreamNameException</td><td>INVALID_STREAM_NAME</td></tr>
 * <tr><td>LogNotFoundError</td><td>LogNotFoundException</td><td>LOG_NOT_FOUND</td></tr>
 * <tr><td>LogExistsError</td><td>LogExistsException</td><td>LOG_EXISTS</td></tr>
 * <tr><td>LogEmptyError</td><td>LogEmptyException</td><td>LOG_EMPTY</td></tr>
 * <tr><td>InvalidArgumentError, InvalidConfigError</td><td>java.lang.IllegalArgumentException (as DistributedLog
 * throws for bad arguments and configuration)</td><td>-</td></tr>
 * <tr><td>LockingError, WriterFencedError</td><td>LockingException</td><td>LOCKING_EXCEPTION</td></tr>
 * <tr><td>OwnershipAcquireFailedError</td><td>OwnershipAcquireFailedException</td><td>FOUND</td></tr>
 * <tr><td>WriteError</td><td>WriteException</td><td>WRITE_EXCEPTION</td></tr>
 * <tr><td>WriteCancelledError</td><td>WriteCancelledException</td><td>WRITE_CANCELLED_EXCEPTION</td></tr>
 * <tr><td>TransmitError</td><td>BKTransmitException</td><td>BK_TRANSMIT_ERROR</td></tr>
 * <tr><td>StreamNotReadyError</td><td>StreamNotReadyException</td><td>STREAM_NOT_READY</td></tr>
 * <tr><td>OverCapacityError</td><td>OverCapacityException</td><td>OVER_CAPACITY</td></tr>
 * <tr><td>TransactionIdOutOfOrderError</td><td>TransactionIdOutOfOrderException</td>
 * <td>TRANSACTION_OUT_OF_ORDER</td></tr>
 * <tr><td>EndOfStreamError</td><td>EndOfStreamException</td><td>END_OF_STREAM</td></tr>
 * <tr><td>LogRecordTooLongError</td><td>LogRecordTooLongException</td><td>TOO_LARGE_RECORD</td></tr>
 * <tr><td>AlreadyTruncatedTransactionError</td><td>DLSNAlreadyTruncatedException (an
 * AlreadyTruncatedTransactionException)</td><td>TRUNCATED_TRANSACTION</td></tr>
 * <tr><td>CorruptedEntryError</td><td>ChecksumFailedException</td><td>CHECKSUM_FAILED</td></tr>
 * <tr><td>InvalidEnvelopedEntryError</td><td>InvalidEnvelopedEntryException</td><td>INVALID_ENVELOPED_ENTRY</td></tr>
 * <tr><td>ReadCancelledError</td><td>ReadCancelledException</td><td>READ_CANCELLED_EXCEPTION</td></tr>
 * <tr><td>LogReadError</td><td>LogReadException</td><td>LOG_READ_ERROR</td></tr>
 * <tr><td>IdleReaderError</td><td>IdleReaderException</td><td>-</td></tr>
 * <tr><td>MetadataError and its subclasses but one</td><td>MetadataException</td><td>METADATA_EXCEPTION</td></tr>
 * <tr><td>UnsupportedMetadataVersionError</td><td>UnsupportedMetadataVersionException</td>
 * <td>UNSUPPORTED_METADATA_VERSION</td></tr>
 * <tr><td>LogSegmentNotFoundError</td><td>LogSegmentNotFoundException</td><td>LOG_SEGMENT_NOT_FOUND</td></tr>
 * <tr><td>LogSegmentIsTruncatedError</td><td>LogSegmentIsTruncatedException</td><td>LOG_SEGMENT_IS_TRUNCATED</td></tr>
 * <tr><td>SegmentStoreError, LedgerNotFoundError, ColdStoreError, ColdObjectNotFoundError, NamespaceNotFoundError
 * </td><td>DLException (through DLError)</td><td>-</td></tr>
 * <tr><td>IllegalStateError</td><td>DLIllegalStateException</td><td>ILLEGAL_STATE</td></tr>
 * <tr><td>AlreadyClosedError</td><td>AlreadyClosedException</td><td>ALREADY_CLOSED</td></tr>
 * <tr><td>UnexpectedError (also any non-DLError Python exception)</td><td>UnexpectedException</td>
 * <td>UNEXPECTED</td></tr>
 * <tr><td>DLInterruptedError</td><td>DLInterruptedException</td><td>INTERRUPTED</td></tr>
 * </table>
 *
 * <p>A Python class with no row is looked up through its Python parents (the table {@link #PYTHON_PARENTS}
 * mirrors {@code storage/errors.py}); a class unknown to this table too is mapped by its status code, else to
 * {@link DLException}. Every exception carries the Python message unchanged, the status code the Python error
 * carries (or the Java class's own), and {@link DLException#getRemoteError()}.
 */
public final class Errors {

    private Errors() {
    }

    /** A row of the table: a Python class, the status code of its Java exception (or null), the constructor. */
    private static final class Row {
        final String pythonClass;
        final Integer code;
        final Function<RemoteError, Exception> make;

        Row(String pythonClass, Integer code, Function<RemoteError, Exception> make) {
            this.pythonClass = pythonClass;
            this.code = code;
            this.make = make;
        }
    }

    private static Row row(String pythonClass, Integer code, Function<RemoteError, Exception> make) {
        return new Row(pythonClass, code, make);
    }

    /** The table: every Python class with a Java exception of its own. */
    private static final List<Row> ROWS = List.of(
        row("DLError", null, DLException::new),
        row("InvalidStreamNameError", StatusCode.INVALID_STREAM_NAME, InvalidStreamNameException::new),
        row("LogNotFoundError", StatusCode.LOG_NOT_FOUND, LogNotFoundException::new),
        row("LogExistsError", StatusCode.LOG_EXISTS, LogExistsException::new),
        row("LogEmptyError", StatusCode.LOG_EMPTY, LogEmptyException::new),
        row("InvalidArgumentError", null, e -> new IllegalArgumentException(e.getMessage())),
        row("LockingError", StatusCode.LOCKING_EXCEPTION, LockingException::new),
        row("OwnershipAcquireFailedError", StatusCode.FOUND, OwnershipAcquireFailedException::new),
        row("WriteError", StatusCode.WRITE_EXCEPTION, WriteException::new),
        row("WriteCancelledError", StatusCode.WRITE_CANCELLED_EXCEPTION, WriteCancelledException::new),
        row("TransmitError", StatusCode.BK_TRANSMIT_ERROR, BKTransmitException::new),
        row("StreamNotReadyError", StatusCode.STREAM_NOT_READY, StreamNotReadyException::new),
        row("OverCapacityError", StatusCode.OVER_CAPACITY, OverCapacityException::new),
        row("TransactionIdOutOfOrderError", StatusCode.TRANSACTION_OUT_OF_ORDER,
            TransactionIdOutOfOrderException::new),
        row("EndOfStreamError", StatusCode.END_OF_STREAM, EndOfStreamException::new),
        row("LogRecordTooLongError", StatusCode.TOO_LARGE_RECORD, LogRecordTooLongException::new),
        row("AlreadyTruncatedTransactionError", StatusCode.TRUNCATED_TRANSACTION,
            DLSNAlreadyTruncatedException::new),
        row("CorruptedEntryError", StatusCode.CHECKSUM_FAILED, ChecksumFailedException::new),
        row("InvalidEnvelopedEntryError", StatusCode.INVALID_ENVELOPED_ENTRY, InvalidEnvelopedEntryException::new),
        row("ReadCancelledError", StatusCode.READ_CANCELLED_EXCEPTION, ReadCancelledException::new),
        row("LogReadError", StatusCode.LOG_READ_ERROR, LogReadException::new),
        row("IdleReaderError", null, IdleReaderException::new),
        row("MetadataError", StatusCode.METADATA_EXCEPTION, MetadataException::new),
        row("UnsupportedMetadataVersionError", StatusCode.UNSUPPORTED_METADATA_VERSION,
            UnsupportedMetadataVersionException::new),
        row("LogSegmentNotFoundError", StatusCode.LOG_SEGMENT_NOT_FOUND, LogSegmentNotFoundException::new),
        row("LogSegmentIsTruncatedError", StatusCode.LOG_SEGMENT_IS_TRUNCATED, LogSegmentIsTruncatedException::new),
        row("IllegalStateError", StatusCode.ILLEGAL_STATE, DLIllegalStateException::new),
        row("AlreadyClosedError", StatusCode.ALREADY_CLOSED, AlreadyClosedException::new),
        row("UnexpectedError", StatusCode.UNEXPECTED, UnexpectedException::new),
        row("DLInterruptedError", StatusCode.INTERRUPTED, DLInterruptedException::new));

    /** {@link #ROWS} by Python class. */
    private static final Map<String, Function<RemoteError, Exception>> BY_CLASS = new HashMap<>();
    /** {@link #ROWS} by status code (the rows that have one). */
    private static final Map<Integer, Function<RemoteError, Exception>> BY_CODE = new HashMap<>();
    /** Python class -> its Python parent class, as in {@code storage/errors.py}. */
    static final Map<String, String> PYTHON_PARENTS;

    static {
        for (Row r : ROWS) {
            if (BY_CLASS.put(r.pythonClass, r.make) != null
                || r.code != null && BY_CODE.put(r.code, r.make) != null) {
                throw new IllegalStateException("two rows for " + r.pythonClass + " or its code " + r.code);
            }
        }

        Map<String, String> p = new LinkedHashMap<>();
        for (String c : new String[] {"InvalidStreamNameError", "LogNotFoundError", "LogExistsError", "LogEmptyError",
            "InvalidArgumentError", "LockingError", "WriteError", "StreamNotReadyError", "OverCapacityError",
            "TransactionIdOutOfOrderError", "EndOfStreamError", "LogRecordTooLongError",
            "AlreadyTruncatedTransactionError", "CorruptedEntryError", "ReadCancelledError", "LogReadError",
            "IdleReaderError", "MetadataError", "LogSegmentNotFoundError", "LogSegmentIsTruncatedError",
            "SegmentStoreError", "IllegalStateError", "UnexpectedError", "DLInterruptedError",
            "NamespaceNotFoundError"}) {
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
        p.put("MetadataPermissionError", "MetadataError");
        p.put("NodeExistsError", "MetadataError");
        p.put("NoNodeError", "MetadataError");
        p.put("UnsupportedMetadataVersionError", "MetadataError");
        p.put("LedgerNotFoundError", "SegmentStoreError");
        p.put("ColdStoreError", "SegmentStoreError");
        p.put("ColdObjectNotFoundError", "ColdStoreError");
        p.put("AlreadyClosedError", "IllegalStateError");
        p.put("WriterStateExpiredError", "AlreadyTruncatedTransactionError");
        PYTHON_PARENTS = Collections.unmodifiableMap(p);
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
     * {@link IOException}. Public for the Spark Real-Time Mode source, which rethrows the failures of futures it
     * waits for with a timeout.
     *
     * @throws IOException {@code e} itself, or {@code e} wrapped; never returns normally
     */
    public static IOException rethrow(Throwable e) throws IOException {
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
