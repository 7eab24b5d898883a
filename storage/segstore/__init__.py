"""Segment stores: where the entries of log segments live (local files now; replicated later)."""
