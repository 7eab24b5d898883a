"""DistributedLog's write proxy: many producers on many machines write one log through ``dlog proxy``
processes (gRPC), exactly once per producer (see CONTRACT.md §7)."""
