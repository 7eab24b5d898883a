"""A ZooKeeper disconnect shorter than the session costs a writer nothing; only the session's end (or a fence)
ends its ownership, and then the segment store's fencing is what keeps the old writer from acknowledging anything.

Real ZooKeeper, real disconnects: a private server of this module (so that cutting and expiring disturb no other
test), and a loopback TCP relay between the store's client and the server (:mod:`tests.storage.zk_relay`) that
drops the connection for 1.5 s, well within the 4 s session. While the client is SUSPENDED:

* a held lock stays held: ``check()`` passes, ``is_held()`` stays
  True, and ``confirm()`` (before a metadata write) waits for the reconnection in the same session;
* a sync and an async writer go on writing and acknowledging; a roll (a metadata write) waits for the reconnection
  and says so in the log; nothing fails, everything acknowledged is read back once, in order, at its DLSN, and the
  writers keep their lock (same session, one lock member: never re-acquired).

Why that is safe (the last tests): if the server did expire the session while we were away and another writer took
the log over, that writer's recovery fenced our in-progress ledger first, so our appends fail from then on and
everything we acknowledged before is in the recovered segment. Checked with the history checker
(:mod:`tools.history`: nothing acknowledged lost, nothing of the old writer visible after the new owner's takeover)
and by comparing acknowledged DLSNs with what a reader reads. Once the session is lost (LOST on reconnect, or
disconnected past the session timeout) the lock is not held and writes fail with a ``LockingError`` (retriable: a
reopened writer may take the lock again) or ``WriterFencedError``.
"""

from __future__ import annotations

import functools
import logging
import re
import threading
import time
import uuid
from collections.abc import Iterator
from concurrent.futures import Future
from pathlib import Path

import pytest
from kazoo.client import KazooClient

import storage
from storage import DLSN, LogRecord
from storage.errors import DLError, LockingError, WriteCancelledError, WriterFencedError
from storage.metastore.zookeeper import ZooKeeperLock, ZooKeeperMetadataStore
from tests.storage.observe import GENEROUS_S, finishes, wait_parked_in, wait_until
from tests.storage.test_writer_reader import read_all
from tests.storage.zk_relay import StateLog, TcpRelay
from tests.zk import _SERVER_KEY, ZooKeeperServer, started_server
from tools.history import History, HistoryRecorder, check

ZK_LOGGER = "storage.metastore.zookeeper"
#: zkSessionTimeoutSeconds of the writers under test, and how long the relay cuts their connection.
SESSION_S = 4
CUT_S = 1.5
#: Writer settings: every write its own entry, no TTL purge running in the background during the cuts.
CONF: dict[str, object] = {
    "zkSessionTimeoutSeconds": SESSION_S,
    "lockTimeoutSeconds": 10,
    "writerOutputBufferSize": 0,
    "logSegmentRetentionHours": 0,
}
#: ... and a roll before every write (after the first of a segment): every write completes and starts a segment.
ROLLING: dict[str, object] = {**CONF, "logSegmentRollingMinutes": 0, "maxLogSegmentBytes": 1}
#: Acknowledgements each writer must reach before a cut, and after the reconnection, in the writer tests.
ACKS_BEFORE = 50
ACKS_AFTER = 50


# --- fixtures -------------------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def private_zk() -> Iterator[ZooKeeperServer]:
    """A ZooKeeper server of this module's own (sessions expired and connections cut here disturb no other test)."""
    server = started_server()
    yield server
    server.close()


@pytest.fixture
def relay(private_zk: ZooKeeperServer, request: pytest.FixtureRequest) -> Iterator[TcpRelay]:
    """A relay to the private server (a failed test's report gets the server's log tail)."""
    request.node.stash[_SERVER_KEY] = private_zk
    with TcpRelay(private_zk.hosts) as r:
        yield r


@pytest.fixture
def chroot() -> str:
    return f"/t-{uuid.uuid4().hex[:12]}"


@pytest.fixture(params=["file", "rados"])
def uris(
    private_zk: ZooKeeperServer, relay: TcpRelay, chroot: str, tmp_path: Path, request: pytest.FixtureRequest
) -> tuple[str, str]:
    """(through the relay, straight to the server) URIs of one fresh namespace, bound to local files or to a RADOS
    namespace of its own (the two segment stores' fencing)."""
    direct = f"distributedlog://{private_zk.hosts}{chroot}"
    if request.param == "rados":
        segments = request.getfixturevalue("rados_location").uri()
    else:
        segments = f"file://{tmp_path / 'segments'}"
    storage.bind_namespace(direct, segments=segments)
    return f"distributedlog://{relay.hosts}{chroot}", direct


def _store(hosts: str, root: str, session_s: float = SESSION_S) -> ZooKeeperMetadataStore:
    return ZooKeeperMetadataStore(
        hosts, root, session_timeout_s=session_s, connect_timeout_s=10.0, retry_start_backoff_ms=20
    )


def _expire_at_server(hosts: str, creds: tuple[int, bytes]) -> None:
    """End the session ``creds`` at the server the real way: join it from another client and close it (its
    ephemeral nodes, lock members included, are deleted). Its own client is cut off and cannot steal it back."""
    other = KazooClient(hosts=hosts, client_id=creds, timeout=10.0)
    try:
        other.start(timeout=10.0)
    finally:
        other.stop()
        other.close()


def _lock_of(w: storage.AsyncLogWriter) -> ZooKeeperLock:
    lock = w._h.lock
    assert isinstance(lock, ZooKeeperLock)
    return lock


def _zk(ns: storage.Namespace) -> ZooKeeperMetadataStore:
    store = ns.metastore
    assert isinstance(store, ZooKeeperMetadataStore)
    return store


def _messages(caplog: pytest.LogCaptureFixture, level: int) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.name == ZK_LOGGER and r.levelno == level]


# --- the lock -------------------------------------------------------------------------------------------------
def test_lock_stays_held_through_a_short_disconnect(
    private_zk: ZooKeeperServer, relay: TcpRelay, chroot: str, caplog: pytest.LogCaptureFixture
) -> None:
    """SUSPENDED for 1.5 s of a 4 s session: ``check()`` passes and ``is_held()`` stays True all along (a writer
    goes on), ``confirm()`` waits for the reconnection, saying what waits once it has waited a second, and the
    store comes back in the same session with the same lock member."""
    caplog.set_level(logging.INFO, logger=ZK_LOGGER)
    store = _store(relay.hosts, chroot)
    other = _store(private_zk.hosts, chroot)
    try:
        states = StateLog(store)
        store.create("/l")
        lk = store.lock("/l", "me", 0)
        assert isinstance(lk, ZooKeeperLock)
        sid, member = lk.session_id, lk.member_path.rsplit("/", 1)[1]
        relay.cut()
        try:
            wait_until(lambda: states.saw("SUSPENDED"), "the store to see the disconnect")
            lk.check()
            assert lk.is_held()
            confirming = threading.Thread(target=lk.confirm, args=("the test's metadata write",), daemon=True)
            confirming.start()
            wait_parked_in(confirming, "_await_session")
            wait_until(lambda: _messages(caplog, logging.WARNING), "the WARNING saying what waits")
            assert confirming.is_alive()  # still waiting: ZooKeeper is away
            lk.check()
            assert lk.is_held()
        finally:
            relay.heal()
        finishes(lambda: confirming.join(GENEROUS_S), "confirm() after the reconnection")
        assert not confirming.is_alive()
        assert states.saw("SUSPENDED", "CONNECTED") and "LOST" not in states.states
        creds = store.session_credentials()
        assert creds is not None and creds[0] == sid
        assert lk.is_held() and other.children("/l") == [member]
        lk.check()
        lk.confirm("nothing: connected")  # returns at once
        [warning] = _messages(caplog, logging.WARNING)
        assert warning.startswith("the test's metadata write waits for the connection to ZooKeeper to come back")
        assert any(
            m.startswith("the test's metadata write goes on: ZooKeeper is back")
            for m in _messages(caplog, logging.INFO)
        )
        assert not [m for m in _messages(caplog, logging.WARNING) if "lost ownership" in m]
        lk.release()
    finally:
        store.close()
        other.close()


def test_lock_lost_when_the_session_expires_during_a_disconnect(
    private_zk: ZooKeeperServer, relay: TcpRelay, chroot: str
) -> None:
    """The server ends the session while the client is cut off: the client cannot know, so its lock still counts
    as held (this is the window in which only the segment store's fencing keeps it out) while another client takes
    the lock. On the reconnection the client learns (LOST): ``check()`` and a waiting ``confirm()`` raise a
    ``LockingError`` (retriable: reopening the writer may succeed)."""
    store = _store(relay.hosts, chroot, session_s=30)  # the client itself would wait 30 s before giving up
    other = _store(private_zk.hosts, chroot)
    try:
        states = StateLog(store)
        store.create("/l")
        lk = store.lock("/l", "old", 0)
        assert isinstance(lk, ZooKeeperLock)
        creds = store.session_credentials()
        assert creds is not None
        relay.cut()
        try:
            wait_until(lambda: states.saw("SUSPENDED"), "the store to see the disconnect")
            _expire_at_server(private_zk.hosts, creds)
            taken = other.lock("/l", "new", 10)  # the old member went with its session
            assert lk.is_held()  # the old holder cannot know yet
            lk.check()
            outcome: list[BaseException | None] = []

            def confirm() -> None:
                try:
                    lk.confirm("a stale metadata write")
                    outcome.append(None)
                except BaseException as e:
                    outcome.append(e)

            waiter = threading.Thread(target=confirm, daemon=True)
            waiter.start()
            wait_parked_in(waiter, "_await_session")
        finally:
            relay.heal()
        wait_until(lambda: outcome, "confirm() to end after the reconnection")
        assert isinstance(outcome[0], LockingError) and outcome[0].retriable, outcome  # reopen to go on
        assert states.saw("SUSPENDED", "LOST")
        assert not lk.is_held()
        with pytest.raises(LockingError) as err:
            lk.check()
        assert err.value.retriable is True  # a writer opened again can take the lock
        assert taken.is_held()
        taken.release()
    finally:
        store.close()
        other.close()


def test_lock_lost_when_disconnected_past_the_session_timeout(
    private_zk: ZooKeeperServer, relay: TcpRelay, chroot: str
) -> None:
    """Cut off for longer than its session timeout, a holder counts its lock as lost even before it can reconnect
    (the server has expired the session by then): ``check()`` raises a non-retriable ``LockingError``."""
    store = _store(relay.hosts, chroot, session_s=1)
    try:
        store.create("/l")
        lk = store.lock("/l", "me", 0)
        relay.cut()
        try:
            wait_until(lambda: not lk.is_held(), "the lock to count as lost")
            with pytest.raises(LockingError) as err:
                lk.check()
            assert err.value.retriable is True  # a writer opened again can take the lock
        finally:
            relay.heal()
    finally:
        store.close()


# --- writers --------------------------------------------------------------------------------------------------
class _Load:
    """One writer writing continuously on its own thread: the async writer with up to ``window`` writes in flight,
    the sync writer one record per flush (whose DLSN is that record's). Records (txid, DLSN, whether the store was
    disconnected when the acknowledgement came) and every error."""

    def __init__(self, name: str, writer: storage.AsyncLogWriter | storage.LogWriter, states: StateLog) -> None:
        self.name = name
        self.writer = writer
        self.states = states
        self.acked: list[tuple[int, DLSN, bool]] = []
        self.errors: list[BaseException] = []
        self._mu = threading.Lock()
        self._stop = threading.Event()
        self._window = threading.Semaphore(32)
        self.thread = threading.Thread(target=self._run, name=f"load-{name}", daemon=True)

    def start(self) -> _Load:
        self.thread.start()
        return self

    def acks(self) -> int:
        with self._mu:
            return len(self.acked)

    def wait_for(self, n: int, what: str) -> None:
        """Wait until ``n`` writes are acknowledged (or one failed)."""
        wait_until(lambda: self.acks() >= n or bool(self.errors), f"{self.name} {what}")

    def acked_while_disconnected(self) -> int:
        with self._mu:
            return sum(1 for _t, _d, away in self.acked if away)

    def stop(self) -> None:
        self._stop.set()
        finishes(lambda: self.thread.join(GENEROUS_S), f"the {self.name} load to stop")
        if isinstance(self.writer, storage.AsyncLogWriter):  # every write in flight settles
            for _ in range(32):
                assert self._window.acquire(timeout=GENEROUS_S)

    def _ack(self, txid: int, dlsn: DLSN) -> None:
        with self._mu:
            self.acked.append((txid, dlsn, self.states.suspended))

    def _run(self) -> None:
        txid = 0
        while not self._stop.is_set() and not self.errors:
            txid += 1
            payload = f"{self.name}-{txid}".encode()
            try:
                if isinstance(self.writer, storage.LogWriter):
                    self.writer.write(LogRecord(txid, payload))
                    self._ack(txid, self.writer.flush())
                    continue
                if not self._window.acquire(timeout=GENEROUS_S):
                    raise AssertionError("writes in flight never settled")
                fut = self.writer.write(LogRecord(txid, payload))
            except BaseException as e:
                self.errors.append(e)
                return
            fut.add_done_callback(functools.partial(self._settled, txid=txid))

    def _settled(self, f: Future[DLSN], txid: int) -> None:
        exc = f.exception()
        if exc is None:
            self._ack(txid, f.result())
        else:
            self.errors.append(exc)
        self._window.release()


def _read_back(dlm: storage.LogManager) -> list[tuple[int, DLSN]]:
    return [(r.txid, r.dlsn) for r in read_all(dlm)]


def _assert_read_back_once_in_order(dlm: storage.LogManager, load: _Load) -> None:
    got = _read_back(dlm)
    acked = sorted((t, d) for t, d, _ in load.acked)
    assert [t for t, _ in got] == sorted({t for t, _ in got}), f"{load.name}: txids read twice or out of order"
    assert got == acked, f"{load.name}: read {len(got)} records, acknowledged {len(acked)}"


def test_writers_write_through_a_short_zookeeper_disconnect(
    uris: tuple[str, str], relay: TcpRelay, caplog: pytest.LogCaptureFixture
) -> None:
    """A sync and an async writer write continuously; the connection to ZooKeeper is cut for 1.5 s of a 4 s
    session. No write fails, both writers acknowledge writes while disconnected, every acknowledged record is read
    back once, in order, at its DLSN, and both keep the lock they had (same session, one member each)."""
    caplog.set_level(logging.INFO, logger=ZK_LOGGER)
    via_relay, _direct = uris
    with storage.open_namespace(via_relay, CONF) as ns:
        states = StateLog(_zk(ns))
        sync_dlm, async_dlm = ns.open_log("sync"), ns.open_log("async")
        sync_w, async_w = sync_dlm.open_writer(), async_dlm.open_async_writer()
        locks = [_lock_of(sync_w._w), _lock_of(async_w)]
        sid = locks[0].session_id
        loads = [_Load("sync", sync_w, states).start(), _Load("async", async_w, states).start()]
        for load in loads:
            load.wait_for(ACKS_BEFORE, "writing")
        relay.cut()
        try:
            wait_until(lambda: states.suspended, "the store to see the disconnect")
            time.sleep(CUT_S)  # the blip: the writers keep going
        finally:
            relay.heal()
        wait_until(lambda: states.saw("SUSPENDED", "CONNECTED") and not states.suspended, "the reconnection")
        after = [load.acks() for load in loads]
        for load, n in zip(loads, after, strict=True):
            load.wait_for(n + ACKS_AFTER, "going on")
        for load in loads:
            load.stop()
        assert [load.errors for load in loads] == [[], []]
        for load in loads:
            assert load.acked_while_disconnected() > 0, f"{load.name} acknowledged nothing while disconnected"
        # never re-acquired: the same session and one lock member each, the same writers all along
        assert "LOST" not in states.states
        creds = _zk(ns).session_credentials()
        assert creds is not None and creds[0] == sid
        for lock in locks:
            assert lock.is_held() and lock.session_id == sid
            assert ns.metastore.children(lock.path) == [lock.member_path.rsplit("/", 1)[1]]
        assert sync_w._w.ownership_held() and async_w.ownership_held()
        sync_w.close()
        async_w.close()
        _assert_read_back_once_in_order(sync_dlm, loads[0])
        _assert_read_back_once_in_order(async_dlm, loads[1])
    assert not [m for m in _messages(caplog, logging.WARNING) if "lost ownership" in m]


def test_a_roll_during_a_short_disconnect_waits_for_zookeeper(
    uris: tuple[str, str], relay: TcpRelay, caplog: pytest.LogCaptureFixture
) -> None:
    """A write that must roll (complete the segment, start the next: metadata writes) while ZooKeeper is away waits
    for the reconnection, saying what waits, then goes on; another log's writer of the same namespace keeps
    acknowledging meanwhile. Nothing fails; everything is read back."""
    caplog.set_level(logging.INFO, logger=ZK_LOGGER)
    via_relay, _direct = uris
    with storage.open_namespace(via_relay, CONF) as ns:
        states = StateLog(_zk(ns))
        roll_dlm, other_dlm = ns.open_log("roll", ROLLING), ns.open_log("other")  # "roll" rolls before every write
        roller, other_w = roll_dlm.open_async_writer(), other_dlm.open_async_writer()
        first = roller.write(LogRecord(1, b"roll-1")).result(GENEROUS_S)
        other = _Load("other", other_w, states).start()
        other.wait_for(ACKS_BEFORE, "writing")
        second: list[Future[DLSN]] = []
        relay.cut()
        try:
            wait_until(lambda: states.suspended, "the store to see the disconnect")
            rolling = threading.Thread(target=lambda: second.append(roller.write(LogRecord(2, b"roll-2"))))
            rolling.start()
            wait_parked_in(rolling, "confirm", "_zk_lock.py")  # the roll waits for ZooKeeper
            acks_while_waiting = other.acks()
            wait_until(lambda: other.acks() > acks_while_waiting, "the other writer acknowledging meanwhile")
            wait_until(lambda: _messages(caplog, logging.WARNING), "the WARNING saying what waits")
            time.sleep(max(0.0, CUT_S - 1.0))  # a 1.5 s blip at least (the WARNING comes after 1 s of waiting)
        finally:
            relay.heal()
        finishes(lambda: rolling.join(GENEROUS_S), "the rolling write after the reconnection")
        assert second and second[0].result(GENEROUS_S) == DLSN(2, 0, 0)
        other.wait_for(other.acks() + ACKS_AFTER, "going on")
        other.stop()
        assert other.errors == []
        roller.write(LogRecord(3, b"roll-3")).result(GENEROUS_S)  # and it rolls again, connected
        roller.close()
        other_w.close()
        assert first == DLSN(1, 0, 0)
        assert _read_back(roll_dlm) == [(1, DLSN(1, 0, 0)), (2, DLSN(2, 0, 0)), (3, DLSN(3, 0, 0))]
        _assert_read_back_once_in_order(other_dlm, other)
        assert "LOST" not in states.states
    [warning] = _messages(caplog, logging.WARNING)
    assert re.match(r"completing log segment 1 of 'roll' waits for the connection to ZooKeeper to come back", warning)
    assert any(m.startswith("completing log segment 1 of 'roll' goes on") for m in _messages(caplog, logging.INFO))


def test_rolling_writers_survive_repeated_short_disconnects(uris: tuple[str, str], relay: TcpRelay) -> None:
    """Writers that roll before every write spend most of their time in ZooKeeper requests, so a cut lands
    anywhere: before a metadata write (it waits), during one (its outcome is unknown: looked up after the
    reconnection, then done again if it was not applied), between two. Three 1.5 s cuts: no write fails and
    everything acknowledged is read back once, in order."""
    via_relay, _direct = uris
    # a read that a cut fails is retried after zkRetryStartBackoffMillis (5 s by default): shorter here, for speed
    with storage.open_namespace(via_relay, {**ROLLING, "zkRetryStartBackoffMillis": 100}) as ns:
        states = StateLog(_zk(ns))
        sync_dlm, async_dlm = ns.open_log("sync"), ns.open_log("async")
        sync_w, async_w = sync_dlm.open_writer(), async_dlm.open_async_writer()
        loads = [_Load("sync", sync_w, states).start(), _Load("async", async_w, states).start()]
        for _cut in range(3):
            for load in loads:
                load.wait_for(load.acks() + 10, "writing")
            relay.cut()
            try:
                wait_until(lambda: states.suspended, "the store to see the disconnect")
                time.sleep(CUT_S)
            finally:
                relay.heal()
            wait_until(lambda: not states.suspended, "the reconnection")
        for load in loads:
            load.wait_for(load.acks() + 10, "going on")
            load.stop()
        assert [load.errors for load in loads] == [[], []]
        assert "LOST" not in states.states
        sync_w.close()
        async_w.close()
        _assert_read_back_once_in_order(sync_dlm, loads[0])
        _assert_read_back_once_in_order(async_dlm, loads[1])


# --- safety: the session does expire while disconnected, and another writer takes over ------------------------
def test_session_expired_while_disconnected_new_owner_takes_over(
    uris: tuple[str, str], relay: TcpRelay, private_zk: ZooKeeperServer, tmp_path: Path
) -> None:
    """Writer A writes continuously; its connection is cut; the server ends A's session while A cannot hear of it
    (A's own timeout is 30 s, so A still counts its lock as held), and writer B takes the log over. A keeps writing
    all along. B's recovery fences A's ledger: A acknowledges nothing invoked after B's takeover, everything A
    acknowledged is read back at its DLSN, before B's records. After the reconnection A learns that its session is
    gone (LOST): its writes fail for good (non-retriable). History-checked (:mod:`tools.history`)."""
    via_relay, direct = uris
    history = tmp_path / "history"
    rec = HistoryRecorder(history, "test")
    ns_a = storage.open_namespace(via_relay, {**CONF, "zkSessionTimeoutSeconds": 30})
    ns_b = storage.open_namespace(direct, CONF)
    try:
        states = StateLog(_zk(ns_a))
        a = ns_a.open_log("log").open_async_writer()
        rec.owner("log", writer="A")
        a_lock = _lock_of(a)
        a_load = _HistoryLoad(a, rec, "A")
        a_load.start()
        wait_until(lambda: a_load.acks() >= ACKS_BEFORE, "A writing")
        creds = _zk(ns_a).session_credentials()
        assert creds is not None
        relay.cut()
        try:
            wait_until(lambda: states.suspended, "A's store to see the disconnect")
            n = a_load.acks()
            wait_until(lambda: a_load.acks() >= n + 20, "A acknowledging while disconnected")
            _expire_at_server(private_zk.hosts, creds)
            b = finishes(lambda: ns_b.open_log("log").open_async_writer(), "B taking the log over")
            rec.owner("log", writer="B")
            b_owned_at = time.monotonic()
            assert a_lock.is_held()  # A cannot know: only the fence keeps it out now
            wait_until(lambda: a_load.failures(), "A's appends to fail (its ledger is fenced)")
            b_acked = []
            for i in range(20):
                txid = b.last_txid + 1
                value = f"B-{i}"
                rec.invoke(f"B-{i}", "write", value, log="log", txid=txid, writer="B")
                dlsn = b.write(LogRecord(txid, value.encode())).result(GENEROUS_S)
                rec.ok(f"B-{i}", dlsn=dlsn, txid=txid)
                b_acked.append((txid, dlsn))
        finally:
            relay.heal()
        wait_until(lambda: states.saw("SUSPENDED", "LOST"), "A's store to learn its session is gone")
        wait_until(lambda: not a_lock.is_held(), "A's lock to count as lost")
        with pytest.raises(LockingError) as late:  # WriterFencedError (a LockingError) or LockingError itself
            a.write(LogRecord(a.last_txid + 1, b"A-late"))
        # fenced (not retriable: another writer owns the log) or the lock lost with the session (retriable: open a
        # writer again); either way nothing more of A's is acknowledged
        assert isinstance(late.value, WriterFencedError) or late.value.retriable
        a_load.stop()
        a.close()  # logs what it cannot do; the segment is B's now
        b.close()
        with rec:
            records = read_all(ns_b.open_log("log"))
            for r in records:
                rec.final_read("log", r.payload, r.dlsn, r.txid, seq=r.sequence_id)
    finally:
        ns_a.close()
        ns_b.close()
    report = check(History.load(history))
    print(report.line())
    assert report.ok, str(report)
    assert report.counts["lost"] == 0 and report.counts["stale_visible"] == 0
    # the same, straight: A acknowledged nothing it was asked after B took over...
    late_acks = [(t, d) for t, d, invoked_at in a_load.acked if invoked_at > b_owned_at]
    assert late_acks == [], late_acks
    # ... and everything it acknowledged is read back at its DLSN, before B's records, which follow in order
    read = [(r.txid, r.dlsn) for r in records]
    a_acked = sorted((t, d) for t, d, _ in a_load.acked)
    assert a_acked and set(a_acked) <= set(read)
    assert max(d for _, d in a_acked) < min(d for _, d in b_acked)
    assert read[-len(b_acked) :] == b_acked
    assert [d for _, d in read] == sorted(d for _, d in read) and len(set(read)) == len(read)


class _HistoryLoad:
    """Writer A for the history: continuous async writes (up to 32 in flight), each recorded (invoke, then ok /
    fail / info); it keeps trying after failures (every one refused at once), until stopped."""

    def __init__(self, w: storage.AsyncLogWriter, rec: HistoryRecorder, name: str) -> None:
        self.w, self.rec, self.name = w, rec, name
        self.acked: list[tuple[int, DLSN, float]] = []  # txid, DLSN, when the write was invoked
        self._failures = 0
        self._mu = threading.Lock()
        self._stop = threading.Event()
        self._window = threading.Semaphore(32)
        self._thread = threading.Thread(target=self._run, name=f"history-load-{name}", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def acks(self) -> int:
        with self._mu:
            return len(self.acked)

    def failures(self) -> int:
        with self._mu:
            return self._failures

    def stop(self) -> None:
        self._stop.set()
        finishes(lambda: self._thread.join(GENEROUS_S), f"{self.name} to stop")
        for _ in range(32):
            assert self._window.acquire(timeout=GENEROUS_S)

    def _run(self) -> None:
        n = 0
        while not self._stop.is_set():
            if not self._window.acquire(timeout=0.1):
                continue
            n += 1
            txid = self.w.last_txid + 1
            value, op = f"{self.name}-{n}", f"{self.name}-{n}"
            self.rec.invoke(op, "write", value, log="log", txid=txid, writer=self.name)
            invoked_at = time.monotonic()
            try:
                fut = self.w.write(LogRecord(txid, value.encode()))
            except DLError as e:  # refused at once: nothing was buffered
                self.rec.fail(op, error=e)
                self._window.release()
                with self._mu:
                    self._failures += 1
                self._stop.wait(0.05)
                continue
            fut.add_done_callback(functools.partial(self._settled, op=op, txid=txid, invoked_at=invoked_at))

    def _settled(self, f: Future[DLSN], op: str, txid: int, invoked_at: float) -> None:
        exc = f.exception()
        if exc is None:
            dlsn = f.result()
            self.rec.ok(op, dlsn=dlsn, txid=txid)
            with self._mu:
                self.acked.append((txid, dlsn, invoked_at))
        else:
            if isinstance(exc, WriteCancelledError):
                self.rec.fail(op, error=exc)
            else:
                self.rec.info(op, error=exc)  # may be durable: recovery decided
            with self._mu:
                self._failures += 1
        self._window.release()
