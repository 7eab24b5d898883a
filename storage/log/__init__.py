"""Internals of the storage core: layout, namespace, log manager, writers, readers, retention."""
