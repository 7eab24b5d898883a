"""Simulated hosts on one machine (network namespaces), the components that run on them and network faults.

Modules: :mod:`~tools.netsim.hosts` (namespaces, bridge, running commands in a host),
:mod:`~tools.netsim.procs` (state file, PID checks, component handles), :mod:`~tools.netsim.zookeeper`,
:mod:`~tools.netsim.ceph`, :mod:`~tools.netsim.spark` (the components), :mod:`~tools.netsim.faults`
(partitions, loss, delay; records) with :mod:`~tools.netsim.delayer` (NFQUEUE delay, stdlib only),
:mod:`~tools.netsim.sweep` (cleanup) and :mod:`~tools.netsim.cli`. The front is :mod:`tools.cluster`.
Stdlib only; Linux; root; Debian packages ``iptables nftables`` (plus ZooKeeper, Ceph, a JDK, pyspark).

Measured on a 2-core VM (Debian 12, kernel 6.18 without netem):

* ``up`` (12 hosts, ZooKeeper ×3, mon + 3 OSDs, Spark master + 2 workers): 17.5-29.7 s (hosts 0.5 s; Ceph
  14-24 s, slower than the 4.5 s on loopback because six JVMs start at the same time; ZooKeeper quorum ready
  by then; Spark workers registered 0.5-10 s later); ``down`` 2.8-3.4 s; ``cleanup`` after a killed harness
  3.5 s.
* RSS idle: 1.0 GB (ZooKeeper 64-67 MiB each, mon 39, OSDs 51 each, Spark master 216, workers 210 each);
  1.6 GB while a Spark job from a client host runs (driver + 2 executors). Driver session on client1
  ready after 41 s (with the cluster busy), a 4-task job then ran on both worker hosts in 9.8 s.
* Faults take effect with the next packet (rules are installed in 0.2-0.4 s by the CLI, ~20 ms per host
  from Python); heal (all rules flushed in every host, delayers stopped) 1-1.5 s.
* Partition (DROP): connects time out; ``reject``: EHOSTUNREACH in 0.4 ms. Root namespace to a host:
  EHOSTUNREACH in 0.2 ms (the unreachable route).
* Random loss p=0.3: 27.7 % of 1000 datagrams dropped. Delay 50±20 ms each way: UDP RTT 0.03 -> 100-102 ms
  median (min 69, max 132), TCP connect 114-116 ms; 0.05 ms after heal.
* ZooKeeper (tickTime 200): leader SIGKILL -> new leader 0.4-0.5 s, the restarted one back as follower in
  1.6-3.1 s; leader isolated -> new leader on the majority 1.7 s, the isolated one stops serving at the same
  time; heal -> full quorum 0.8 s; leader SIGSTOP -> new leader 2.1 s; SIGCONT -> quorum 0.7 s.
* Ceph: OSD SIGKILL -> marked down 0.4-0.7 s; OSD host isolated -> marked down 5.9-9.7 s, up 0.4-1.0 s after
  heal; OSD SIGSTOP -> down 7.6 s, up 1.2 s after SIGCONT.
"""
