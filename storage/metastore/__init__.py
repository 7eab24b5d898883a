"""Metadata stores: a versioned tree of nodes (embedded SQLite or ZooKeeper)."""
