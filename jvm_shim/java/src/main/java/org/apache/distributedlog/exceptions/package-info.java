/**
 * DistributedLog's exceptions. Errors raised by the Python storage core behind the gateway arrive as the class
 * matching their Python class; see {@code org.apache.distributedlog.shim.Errors} for the table.
 */
package org.apache.distributedlog.exceptions;
