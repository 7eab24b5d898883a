package org.apache.distributedlog.exceptions;

import org.apache.distributedlog.shim.RemoteError;

/**
 * Thrown when a transaction id is negative, {@code MAX_TXID}, or below the log's last transaction id.
 */
public class TransactionIdOutOfOrderException extends DLException {

    private static final long serialVersionUID = 1L;

    public static final long INVALID_TXID = -999;

    private final long lastTxnId;
    private final long txnId;

    public TransactionIdOutOfOrderException(long smallerTxnId, long lastTxnId) {
        super(StatusCode.TRANSACTION_OUT_OF_ORDER,
              "Received smaller txn id " + smallerTxnId + ", last txn id is " + lastTxnId);
        this.lastTxnId = lastTxnId;
        this.txnId = smallerTxnId;
    }

    public TransactionIdOutOfOrderException(long invalidTxnId) {
        super(StatusCode.TRANSACTION_OUT_OF_ORDER,
              "The txn id " + invalidTxnId + " is invalid and will break the sequence");
        this.lastTxnId = INVALID_TXID;
        this.txnId = invalidTxnId;
    }

    /**
     * An error raised by the Python storage core, carried across the gateway with its message.
     *
     * @param error the gateway's error description
     */
    public TransactionIdOutOfOrderException(RemoteError error) {
        super(StatusCode.TRANSACTION_OUT_OF_ORDER, error);
        Long last = error.getDetailLong("last_txid");
        Long txid = error.getDetailLong("txid");
        this.lastTxnId = last == null ? INVALID_TXID : last;
        this.txnId = txid == null ? INVALID_TXID : txid;
    }

    /**
     * @return the log's last transaction id (for an error from the gateway: its {@code last_txid} detail), or
     *         {@link #INVALID_TXID} when unknown
     */
    public long getLastTxnId() {
        return lastTxnId;
    }

    /**
     * @return the rejected transaction id (for an error from the gateway: its {@code txid} detail), or
     *         {@link #INVALID_TXID} when unknown
     */
    public long getTxnId() {
        return txnId;
    }
}
