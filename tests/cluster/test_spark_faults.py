"""Spark standalone on two worker hosts: a streaming query ZooKeeper + RADOS -> exactly-once sink while one worker
host is killed and the other partitioned for a while. The query recovers, and its output equals its input exactly
once, judged by the history checker (``tools.history``: ``sink_missing``, ``sink_duplicated``, ``sink_invented``,
``sink_reordered``, ``sink_partial``, all 0), next to the writer's own checks of the input log.

Layout: a writer on ``client1`` appends to log ``in`` (``tests/cluster/clients.py writer``, recording its history);
the driver (``tests/cluster/spark_query.py run``) on ``client2`` runs against the standalone master on ``master``,
one executor on each of ``worker1``/``worker2``; executors read ``in`` from RADOS and stage ``out`` in RADOS, the
driver publishes each batch (ZooKeeper). Faults, each started while a task runs on that host: every process of
``worker1`` SIGKILLed (Worker JVM, executor JVM, Python workers: a host crash), later the Worker restarted
(``heal``); then ``worker2`` cut from the master and the driver for 15 s. Prints the checker's ``CHECK`` line and a
``SPARK`` line: batches, rows, the query's longest stall around each fault, how long after the heal worker1 had an
executor again and the next batch completed after the partition.
"""

from __future__ import annotations

import contextlib
import time
from pathlib import Path

import pytest

from tests.cluster.scenario import Client, Scenario
from tests.cluster.spark_driver import (
    batches,
    check_sink_counts,
    drain_and_collect,
    kill_host,
    stall,
    start_driver,
    wait_batches,
    wait_executors,
)
from tests.cluster.spark_query import restart_counts
from tests.storage.observe import wait_until
from tools.cluster import Cluster
from tools.netsim.hosts import netns_pids

pytestmark = [pytest.mark.heavy, pytest.mark.timeout(1200)]  # with the cluster's start (minutes on a loaded machine)

#: Driver settings beyond the cluster's (``spark.master``, ``spark.driver.host``/``bindAddress``): the checkpoint
#: keeps every batch's offsets (the default keeps 100), from which the collector derives each output record's batch
#: and each batch's row count. Nothing else: Spark's defaults recover from both faults (a task lost with worker1's
#: executor is not counted against ``spark.task.maxFailures``: the master reports the worker lost; the partition is
#: shorter than ``spark.network.timeout``, so worker2's executor is kept and its task finishes after the heal).
SPARK_CONF = {"spark.sql.streaming.minBatchesToRetain": "1000"}
PARTITION_SECONDS = 15.0
#: Writes a second into ``in``: low enough that the query outpaces it on a loaded 2-core machine (a micro-batch of up
#: to 200 rows in two tasks, one per executor, takes 2-10 s there).
RATE = 10


def _environ(pid: int) -> dict[str, str]:
    raw = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
    return dict(kv.decode(errors="replace").split("=", 1) for kv in raw if b"=" in kv)


def _python_workers(c: Cluster, host: str) -> dict[int, list[str]]:
    """``{pid: command line}`` of the PySpark worker processes (``pyspark.daemon`` and the workers it forks) on
    ``host``."""
    found = {}
    for pid in netns_pids(c.network.host(host).netns):
        with contextlib.suppress(OSError):
            argv = Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace").split("\0")
            if any(a.startswith("pyspark.") for a in argv):
                found[pid] = argv
    return found


def _maps_librados(pid: int) -> bool:
    """Whether process ``pid`` has Ceph's ``librados`` mapped (it imported the RADOS binding)."""
    try:
        return "librados" in Path(f"/proc/{pid}/maps").read_text()
    except OSError:
        return False


def _check_python_workers(c: Cluster, host: str, timeout: float = 120.0) -> None:
    """The executor's Python workers on ``host`` run the venv's interpreter, and one of them loaded Ceph's RADOS
    binding (they read ``in`` from RADOS and stage ``out`` there: the query working already proves they could).
    Waits until the executor there ran a task (its Python workers start with its first task)."""
    wait_until(
        lambda: any(_maps_librados(pid) for pid in _python_workers(c, host)),
        f"a Python worker on {host} with librados loaded",
        timeout,
        0.5,
    )
    workers = _python_workers(c, host)
    assert all(argv[0] == c.python for argv in workers.values()), (host, workers)


def _running_tasks(c: Cluster, host: str) -> set[str]:
    """The task ids (TIDs) the newest executor on ``host`` runs now, from its log (``Running task ... (TID n)``
    minus ``Finished task ... (TID n)``)."""
    logs = list((c.directory / "spark" / f"spark-{host}" / "work").glob("app-*/*/stderr"))
    if not logs:
        return set()
    newest = max(logs, key=lambda p: p.stat().st_mtime)
    running: set[str] = set()
    with contextlib.suppress(OSError):
        for ln in newest.read_text(errors="replace").splitlines():
            if "(TID " in ln:
                tid = ln.rsplit("(TID ", 1)[1].split(")", 1)[0]
                if " Running task " in ln:
                    running.add(tid)
                elif " Finished task " in ln:
                    running.discard(tid)
    return running


def _wait_task_running(c: Cluster, driver: Client, host: str, timeout: float = 120.0) -> set[str]:
    """Wait until the executor on ``host`` runs a task (so that the fault catches one); return the TIDs."""
    tids: set[str] = set()

    def running() -> bool:
        tids.update(_running_tasks(c, host))
        assert driver.proc.poll() is None, f"the driver exited: {driver.lines[-15:]}"
        return bool(tids)

    wait_until(running, f"a task running on {host}", timeout, 0.02)
    return tids


def test_streaming_query_survives_a_killed_and_a_partitioned_worker_host(
    healthy_cluster: Cluster, cluster_namespace: str, tmp_path: Path
) -> None:
    c = healthy_cluster
    t_begin = time.monotonic()
    w1, w2 = c.hosts["worker1"], c.hosts["worker2"]
    assert (Path(c.python).parent.parent / "pyvenv.cfg").is_file(), f"{c.python} is no virtualenv's interpreter"
    for worker in c.spark_workers:  # the Workers hand PYSPARK_PYTHON to the executors they launch
        pid = worker.pid()
        assert pid is not None
        assert _environ(pid).get("PYSPARK_PYTHON") == c.python, worker.name
    run = Scenario(c, cluster_namespace, tmp_path)
    writer = run.writer("client1", "in", "w-in", "--rate", str(RATE))
    writer.wait_line("OWNER")
    writer.wait_line("ACK")  # `in` exists: the source refuses a missing log
    checkpoint = tmp_path / "checkpoint"  # every host sees it: one file system
    driver = start_driver(run, "client2", checkpoint, SPARK_CONF)
    try:
        wait_executors(driver, {w1, w2}, 0.0, timeout=240)  # the query starts meanwhile
        driver.wait_line("STARTED", timeout=240)
        wait_batches(driver, 2, 0.0, timeout=240)
        # The executors' Python workers run the venv's interpreter on both worker hosts; they read `in` from RADOS
        # and stage `out` there, so the query working at all proves they load Ceph's RADOS binding (and librados is
        # mapped in them).
        for host in ("worker1", "worker2"):
            _check_python_workers(c, host)

        # --- fault 1: worker1's host crashes; later its Worker comes back (heal) ---------------------------------
        tids_killed = _wait_task_running(c, driver, "worker1")
        with run.fault("kill", "worker1 host: Worker, executor, Python workers"):
            t_kill = time.monotonic()
            killed = kill_host(c, "worker1")
            wait_batches(driver, 2, t_kill, timeout=180)  # the query goes on with worker2's executor alone
            time.sleep(max(0.0, t_kill + 5 - time.monotonic()))
            t_heal1 = time.monotonic()
            c.heal()  # starts the Worker on worker1 again; it registers with the master
        back = wait_executors(driver, {w1, w2}, t_heal1, timeout=180)  # the master gives the app an executor there
        _check_python_workers(c, "worker1")  # the new executor's, on the restarted host, once it ran a task
        wait_batches(driver, 2, back, timeout=180)

        # --- fault 2: worker2's host cut from the master and the driver (not from ZooKeeper or Ceph) ------------
        tids_cut = _wait_task_running(c, driver, "worker2")
        with run.fault("partition", "worker2 | master client2"):
            t_cut = time.monotonic()
            c.faults.partition([["worker2"], ["master", "client2"]])
            time.sleep(PARTITION_SECONDS)
            t_heal2 = time.monotonic()
            c.heal()
        first_after_heal2 = wait_batches(driver, 2, t_heal2, timeout=240)

        # --- drain and check ---------------------------------------------------------------------------------
        writer.stop()
        # One reader of both logs records `in` as its final read and as the sink's input, `out` as the sink's output.
        stats = drain_and_collect(run, driver, "client3", checkpoint)
    finally:
        if driver.proc.poll() is None:
            driver.stop(timeout=60)
        for cl in run.clients:
            if cl.proc.poll() is None:
                cl.stop()
    report = run.finish([])  # `in`'s final read is the collector's

    done = batches(driver)
    counts = restart_counts(driver.lines)
    lost_tasks = [
        ln.split("TaskSetManager: ", 1)[-1][:240]
        for ln in driver.lines
        if "TaskSetManager" in ln and ("Lost task" in ln or "executor exited" in ln)
    ]
    stall_kill = stall(done, t_kill, t_heal1)
    stall_cut = stall(done, t_cut, first_after_heal2)
    print(
        f"SPARK batches={len(done)} with_rows={sum(1 for b in done if b[1] > 0)} "
        f"rows_in={stats['in']} rows_out={stats['out']} killed_processes={killed} "
        f"kill_worker1: tasks_running={len(tids_killed)} stall={stall_kill:.1f}s "
        f"executor_back_after_heal={back - t_heal1:.1f}s; "
        f"partition_worker2: tasks_running={len(tids_cut)} cut={PARTITION_SECONDS:.0f}s stall={stall_cut:.1f}s "
        f"first_batch_after_heal={first_after_heal2 - t_heal2:.1f}s; lost_tasks={len(lost_tasks)} "
        f"({stats['drained']}) query_restarts={counts['restarts']} failures={counts['failures']} "
        f"test={time.monotonic() - t_begin:.0f}s"
    )
    for ln in lost_tasks:
        print("  " + ln)
    assert report.ok, report
    assert report.counts["lost"] == 0 and report.counts["duplicated"] == 0, report
    check_sink_counts(report, stats)
    # Spark's own task retries absorb both faults: the query never failed (the driver would have started it again
    # from its checkpoint and said so).
    assert counts["failures"] == 0 and counts["counted_failures"] == 0, counts
