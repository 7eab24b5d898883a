"""Segment stores: where the entries of log segments live (local files, or Ceph RADOS objects)."""
