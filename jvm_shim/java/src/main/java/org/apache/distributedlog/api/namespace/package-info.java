/**
 * DistributedLog's namespace API.
 */
package org.apache.distributedlog.api.namespace;
