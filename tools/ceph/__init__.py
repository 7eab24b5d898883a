"""The throw-away Ceph cluster harness behind :mod:`tools.ceph_cluster` (import from there: it is the public
front, with the command line), by concern:

* :mod:`tools.ceph.base`: :class:`~tools.ceph.base.CephClusterError`, :class:`~tools.ceph.base.Placement`, the
  programs needed, a cluster's settings, paths and placements, running the ``ceph``/``rados`` tools;
* :mod:`tools.ceph.conf`: ``ceph.conf``, ``cluster.json``, the cephx keyrings, the ports;
* :mod:`tools.ceph.daemons`: the mon and OSD processes: making, starting, PIDs, stopping, killing;
* :mod:`tools.ceph.health`: waiting for OSDs up and PGs active+clean, reviving failed OSDs;
* :mod:`tools.ceph.rgw`: the S3 gateway (``radosgw``) of a test cluster, for the cold storage tests;
* :mod:`tools.ceph.cluster`: :class:`~tools.ceph.cluster.CephCluster`: start, wipe, a handle on an existing one;
* :mod:`tools.ceph.cli`: the command line (``python tools/ceph_cluster.py start|status|...``).

Stdlib only, any Python >= 3.10. The modules never import :mod:`tools.ceph_cluster` (run as a script, it is
``__main__``: importing it again would make a second copy of its classes).
"""
