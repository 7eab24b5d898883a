"""The failures a replicated log exists to survive, as network and process faults between simulated hosts
(ZooKeeper ×3, Ceph mon + 3 OSDs of a size 3 / min_size 2 pool, writers and readers on client hosts), each
checked by the one history checker: every acknowledged record present exactly once, DLSN order equals read order
for every reader, no record of a fenced writer visible after the fence, per-writer order.

Every test prints the checker's line (``CHECK ... OK``) and the writes' availability per fault kind.
"""

from __future__ import annotations

import json
import os
import random
import signal
import time
from pathlib import Path

import pytest

from storage.config import Config
from tests.cluster.clients import CLIENT_CONF
from tests.cluster.scenario import Scenario, median_ms
from tests.cluster.spark_driver import (
    batches,
    check_sink_counts,
    drain_and_collect,
    kill_host,
    start_driver,
)
from tests.cluster.spark_query import CONNECT_BACK_RESTARTS, restart_counts
from tools.cluster import CEPH_HOSTS, ZK_HOSTS, Cluster
from tools.history import availability, resumed_after_heals

pytestmark = pytest.mark.timeout(900)

#: The nemesis's fault kinds: between hosts and of ZooKeeper and Ceph processes, and of the Spark query's worker hosts
#: (a host crash: every process SIGKILLed, the Worker restarted at the heal; a worker cut from the master and driver).
NEMESES = (
    *("partition", "isolate-zk", "isolate-osd", "loss", "delay", "kill-zk", "pause-zk", "kill-osd"),
    *("kill-worker", "partition-worker"),
)
#: The Spark query's input rate (writes/s into ``s-in``): one it outpaces on a loaded 2-core machine.
SPARK_RATE = 10
#: How often the nemesis's Spark query may fail and be started again from its checkpoint.
NEMESIS_RESTARTS = 20


def _resume_bound(conf: dict[str, object]) -> float:
    """Seconds within which a writer writes again after a fault heals, from the client settings: its old ZooKeeper
    session expires (freeing the lock), one metadata retry backoff, an append still in flight times out, the new
    owner's recovery (fencing and reading the open segment) takes at most one more op timeout, one lock attempt,
    and the writer's own pauses before it retries (1 s after a failed open, 0.5 s after a refused lock, 0.5 s
    after closing)."""
    c = Config.from_dict(conf)
    session = float(c.get("zkSessionTimeoutSeconds"))
    zk_backoff = float(c.get("zkRetryStartBackoffMillis")) / 1000
    op = float(c.get("radosOpTimeoutSeconds"))
    lock = float(c.get("lockTimeoutSeconds"))
    return session + zk_backoff + 2 * op + lock + 1.0 + 0.5 + 0.5


def _retriable_errors(errors: list[tuple[str, str, str]]) -> bool:
    return bool(errors) and all(retriable == "True" for _, retriable, _ in errors)


def test_writer_cut_from_zookeeper_but_not_from_ceph_is_fenced_by_the_next_owner(
    healthy_cluster: Cluster, cluster_namespace: str, tmp_path: Path
) -> None:
    """Split brain as DistributedLog's fencing is built for: the writer's host loses ZooKeeper but still reaches
    the storage, while a writer on another host takes the log over. The old writer is frozen (SIGSTOP) at the cut
    with appends queued, so it cannot notice; once it runs again it still reaches Ceph, and its later appends fail
    (guarded appends against the fenced ledger). None is visible, and every record it had acknowledged survives."""
    c = healthy_cluster
    run = Scenario(c, cluster_namespace, tmp_path)
    old = run.writer("client1", "split", "old", "--rate", "300", "--once")
    old.wait_line("ACK", count=3)
    with run.fault("partition", "client1 | zk1 zk2 zk3, old writer frozen"):
        old.proc.send_signal(signal.SIGSTOP)
        c.faults.partition([["client1"], list(ZK_HOSTS)])
        cut_at = time.monotonic()
        new = run.writer("client2", "split", "new", "--rate", "200")
        new.wait_line("OWNER", timeout=120)
        took_over = time.monotonic() - cut_at
        new.wait_line("ACK", count=3)
        old.proc.send_signal(signal.SIGCONT)  # a zombie: it still reaches Ceph, its appends race the fence
        old_status = old.exited(120)  # --once: it stops at its first failure (and all it printed is in)
        new.wait_line("ACK", count=new.acks() // 100 + 2)
    c.heal()
    old_errors = old.errors()
    report = run.finish(["split"])
    print(f"split brain: the new owner took over {took_over:.1f}s after the cut; the old writer saw {old_errors[:2]}")
    assert report.ok, report
    # Its first failure is the fence (the guarded append refused), or, when the machine is slow enough for the
    # append to outlast radosOpTimeoutSeconds, a retriable timeout whose outcome is unknown: either way none of its
    # appends after the fence is visible (stale_visible 0, checked by the checker above).
    fenced = ("WriterFencedError", "LockingError", "TransmitError")
    timed_out = old_errors and old_errors[0][:2] == ("SegmentStoreError", "True") and "timed out" in old_errors[0][2]
    assert old_errors and (old_errors[0][0] in fenced or timed_out), (old_status, old.lines[-8:])
    assert report.counts["stale_visible"] == 0 and report.counts["lost"] == 0


def test_zookeeper_leader_partitioned_away_then_killed(
    healthy_cluster: Cluster, cluster_namespace: str, tmp_path: Path
) -> None:
    """The leader's host is cut off with one client host (the minority), then killed: writers and readers on the
    majority side go on after a bounded pause, the minority's client gets retriable errors only, nothing
    acknowledged is lost."""
    c = healthy_cluster
    leader = c.zk_leader()
    assert leader is not None
    leader_host = leader.host
    others = [h for h in ZK_HOSTS if h != leader_host]
    run = Scenario(c, cluster_namespace, tmp_path)
    major = run.writer("client1", "major", "w-major", "--rate", "200")
    reader = run.reader("client2", "major", "r-major")
    minor = run.writer("client3", "minor", "w-minor", "--rate", "100")
    for w in (major, minor):
        w.wait_line("ACK", count=2)
    reader.wait_line("READING")
    with run.fault("partition", f"{leader_host} client3 | {' '.join(others)} client1 client2"):
        c.faults.partition([[leader_host, "client3"], [*others, "client1", "client2"]])
        before = major.acks()
        major.wait_line("ACK", count=before // 100 + 3, timeout=180)  # the majority goes on
        minor.wait_line("ERROR ", timeout=120)  # the minority is told, retriably
        with run.fault("kill", f"zk leader {leader.name}"):
            c.kill(leader.name)
            before = major.acks()
            major.wait_line("ACK", count=before // 100 + 3, timeout=180)
    c.heal()
    c.wait_zk_quorum(timeout=60)
    minor_errors = minor.errors()
    report = run.finish(["major", "minor"])
    assert report.ok, report
    assert _retriable_errors(minor_errors), minor_errors
    assert run.history is not None
    pause = max((g.length for _, g in availability(run.history, "write", log="major").windows if g), default=0.0)
    print(f"ZooKeeper leader {leader_host} partitioned then killed: majority writer's longest pause {pause:.2f}s")


def test_one_then_two_osd_hosts_isolated(healthy_cluster: Cluster, cluster_namespace: str, tmp_path: Path) -> None:
    """One OSD host isolated: writes go on with two replicas (a pause while Ceph marks the OSD down, shorter than
    the op timeout). Two: the pool is below min_size and writes fail retriably within the op timeout. Healed: the
    writer reopens and goes on. Nothing acknowledged is lost."""
    c = healthy_cluster
    op_timeout = 20  # above Ceph's failure detection (heartbeat grace 4 s + marking down): one OSD lost never fails
    run = Scenario(c, cluster_namespace, tmp_path)
    conf = json.dumps({"radosOpTimeoutSeconds": op_timeout})
    w = run.writer("client1", "osd", "w-osd", "--rate", "200", "--conf", conf)
    w.wait_line("ACK", count=2)
    with run.fault("isolate", "ceph3 (osd.2)"):
        c.faults.isolate(CEPH_HOSTS[2])
        one_at = time.monotonic()
        before = w.acks()
        w.wait_line("ACK", count=before // 100 + 5, timeout=180)  # two replicas are enough
        assert w.errors() == [], "one OSD host lost: writes must go on"
        with run.fault("isolate", "ceph2 (osd.1) too"):
            c.faults.isolate(CEPH_HOSTS[1])
            cut = time.monotonic()
            w.wait_line("ERROR ", timeout=op_timeout * 4)
            failed_after = time.monotonic() - cut
            errors = w.errors()
    c.heal()
    resumed_from = w.acks()
    w.wait_line("ACK", count=resumed_from // 100 + 3, timeout=240)  # after healing, writes resume
    report = run.finish(["osd"])
    one_pause = run.longest_gap(one_at, cut)
    print(
        f"OSD hosts isolated: one: longest write pause {one_pause:.1f}s, no error; two: first error "
        f"{failed_after:.1f}s after the cut (op timeout {op_timeout}s): {errors[0]}"
    )
    assert report.ok, report
    assert _retriable_errors(errors), errors


def test_delay_and_loss_between_writers_and_storage(
    healthy_cluster: Cluster, cluster_namespace: str, tmp_path: Path
) -> None:
    """50 ms ± 20 ms added delay and 5% loss between the writer's host and the storage hosts: correct, slower.
    Reports the acknowledgement latency and rate with and without the faults, from the same run."""
    c = healthy_cluster
    run = Scenario(c, cluster_namespace, tmp_path)
    w = run.writer("client1", "slow", "w-slow", "--rate", "400", "--window", "128")
    w.wait_line("ACK", count=2)
    phase = 20.0
    t0 = time.monotonic()
    time.sleep(phase)
    t1 = time.monotonic()
    with run.fault("delay+loss", "client1 <-> ceph1 ceph2 ceph3: 50±20 ms, 5%"):
        c.faults.delay(["client1"], list(CEPH_HOSTS), ms=50, jitter_ms=20, seed=20261125)
        c.faults.loss(["client1"], list(CEPH_HOSTS), p=0.05)
        time.sleep(phase)
        t2 = time.monotonic()
    c.heal()
    report = run.finish(["slow"])
    assert report.ok, report
    base, slow = run.write_latencies(t0, t1), run.write_latencies(t1 + 2, t2)
    rate_base, rate_slow = run.acked_between(t0, t1) / (t1 - t0), run.acked_between(t1 + 2, t2) / (t2 - t1 - 2)
    print(
        f"delay 50±20 ms + 5% loss to the storage hosts: ack latency median {median_ms(base):.0f} -> "
        f"{median_ms(slow):.0f} ms, rate {rate_base:.0f} -> {rate_slow:.0f} acks/s "
        f"({rate_slow / rate_base if rate_base else 0:.2f}x)"
    )
    assert slow and base


@pytest.mark.heavy
@pytest.mark.timeout(int(float(os.environ.get("DLC_NEMESIS_SECONDS", "60"))) + 1200)
def test_random_nemesis(healthy_cluster: Cluster, cluster_namespace: str, tmp_path: Path) -> None:
    """Several writers and tailing readers, and a Spark streaming query (log ``s-in`` -> exactly-once sink ``s-out``,
    executors on both worker hosts), while a seeded nemesis mixes partitions, isolations, loss, delay, process
    kills/pauses of ZooKeeper servers and OSDs, and crashes and partitions of the Spark worker hosts for
    ``$DLC_NEMESIS_SECONDS`` (CI: a short schedule; `make chaos`: 20 minutes and more). A query that fails is started
    again from its checkpoint, as a user's supervisor would. One checker line; lost, duplicated, reordered,
    stale-visible and the sink's counts all 0."""
    c = healthy_cluster
    seconds = float(os.environ.get("DLC_NEMESIS_SECONDS", "60"))
    seed = int(os.environ.get("DLC_NEMESIS_SEED", "20261125"))
    rng = random.Random(seed)
    run = Scenario(c, cluster_namespace, tmp_path)
    logs = ["n1", "n2", "n3"]
    for i, log in enumerate(logs):
        run.writer(f"client{i + 1}", log, f"w-{log}", "--rate", "100")
        run.reader(f"client{(i + 1) % 3 + 1}", log, f"r-{log}")
    spark_in = run.writer("client1", "s-in", "w-s-in", "--rate", str(SPARK_RATE))
    for cl in run.clients:
        cl.wait_line("OWNER" if cl.name.startswith("w-") else "READING", timeout=120)
    spark_in.wait_line("ACK")  # `s-in` exists: the source refuses a missing log
    checkpoint = tmp_path / "checkpoint"
    conf = {"spark.sql.streaming.minBatchesToRetain": "100000"}
    driver = start_driver(
        run, "client2", checkpoint, conf, "--restarts", str(NEMESIS_RESTARTS), source="s-in", sink="s-out"
    )
    try:
        driver.wait_line("STARTED", timeout=600)
        driver.wait_line("BATCH", timeout=600)  # a loaded 2-core machine: a first batch took 150 s once
        injected: dict[str, int] = {}
        clients = ["client1", "client2", "client3"]
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            kind = rng.choice(NEMESES)
            hold = rng.uniform(3, 12)
            detail = ""
            with run.fault(kind, detail):
                if kind == "partition":
                    side = rng.sample(clients, rng.randint(1, 2))
                    zk_side = rng.sample(list(ZK_HOSTS), 1)
                    c.faults.partition([[*side, *zk_side], [h for h in ZK_HOSTS if h not in zk_side]])
                elif kind == "isolate-zk":
                    c.faults.isolate(rng.choice(ZK_HOSTS))
                elif kind == "isolate-osd":
                    c.faults.isolate(rng.choice(CEPH_HOSTS[1:]))
                elif kind == "loss":
                    c.faults.loss([rng.choice(clients)], None, p=rng.choice([0.05, 0.2]))
                elif kind == "delay":
                    seed_of_delay = rng.randrange(1 << 30)
                    c.faults.delay([rng.choice(clients)], list(CEPH_HOSTS), ms=50, jitter_ms=20, seed=seed_of_delay)
                elif kind == "kill-zk":
                    c.kill(rng.choice([z.name for z in c.zk]))
                elif kind == "pause-zk":
                    c.pause(rng.choice([z.name for z in c.zk]))
                elif kind == "kill-osd":
                    c.kill(rng.choice(["osd.1", "osd.2"]))
                elif kind == "kill-worker":
                    kill_host(c, rng.choice(["worker1", "worker2"]))
                elif kind == "partition-worker":
                    c.faults.partition([[rng.choice(["worker1", "worker2"])], ["master", "client2"]])
                time.sleep(hold)
                c.heal()
            injected[kind] = injected.get(kind, 0) + 1
            time.sleep(rng.uniform(2, 6))
        c.wait_zk_quorum(timeout=60)
        for w in (cl for cl in run.clients if cl.name in {f"w-{log}" for log in logs}):
            w.wait_line("ACK", count=w.acks() // 100 + 2, timeout=300)  # every writer wrote again after the last heal
        spark_in.stop()
        stats = drain_and_collect(run, driver, "client3", checkpoint, source="s-in", sink="s-out")
    finally:
        if driver.proc.poll() is None:
            driver.stop(timeout=60)
    report = run.finish(logs)  # `s-in`'s final read is the collector's
    counts = restart_counts(driver.lines)
    restarts = counts["counted"]
    done = batches(driver)
    bound = _resume_bound(CLIENT_CONF)
    assert run.history is not None
    stalled = resumed_after_heals(run.history, logs, bound)
    print(
        "NEMESIS faults " + json.dumps(injected, sort_keys=True) + f" over {seconds:.0f}s (seed {seed}); "
        f"spark batches={len(done)} rows_in={stats['in']} rows_out={stats['out']} query_restarts={restarts}; "
        f"writes resumed within {bound:.0f}s after {sum(injected.values())} heals: {stalled if stalled else 'yes'}"
    )
    assert report.ok, report
    check_sink_counts(report, stats)
    assert not stalled, stalled
    # Faults of the worker hosts may fail the query: each failure is reported, and restarts it from its checkpoint
    # at most NEMESIS_RESTARTS times (plus, before its first batch, CONNECT_BACK_RESTARTS starts that failed).
    assert counts["restarts"] == restarts and counts["failures"] == counts["counted_failures"], counts
    assert counts["failures"] <= NEMESIS_RESTARTS, counts
    assert restarts - counts["failures"] <= CONNECT_BACK_RESTARTS, counts
