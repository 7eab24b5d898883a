"""DistributedLog's bytes, byte for byte: DLSN, log records, record sets, the records of an entry, enveloped entries,
log segment metadata (znode data); and the Arrow columns the sink encodes and the source decodes. Pure functions and
value types: this layer imports nothing of the project but the errors."""
