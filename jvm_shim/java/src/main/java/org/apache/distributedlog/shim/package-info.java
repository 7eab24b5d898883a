/**
 * The bridge between DistributedLog's Java API and the Python storage core: a py4j connection to a gateway
 * process ({@code python -m jvm_shim} or {@code dlog gateway}) speaking the protocol of
 * {@code jvm_shim/protocol.py}, and beside it the gateway's data channel ({@code jvm_shim/channel.py}) for the
 * calls that carry records.
 */
package org.apache.distributedlog.shim;
