"""Apache DistributedLog's core library in Python (public API re-exported here as it lands)."""
