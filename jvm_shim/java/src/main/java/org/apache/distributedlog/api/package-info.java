/**
 * DistributedLog's API: the log manager, writers and readers.
 */
package org.apache.distributedlog.api;
