"""Real JVMs through the shim: Java test programs (``tests/jvm/java/*.java``, compiled once per module against
:func:`jvm_shim.jar_path`) start their own gateway processes and use the same logs as Python.

Covers issue 11's "must show" list:

* a Java program writes 10,000 records sync and 10,000 async; Python reads them back with exact DLSNs (the
  async ones Java printed), txids, sequence ids 0..19999 and payloads; Python writes and Java reads them
  back (``ShimReader``) exactly; once on the embedded backend and once on ZooKeeper + RADOS;
* ``DLSN.serialize()`` equal on both sides for the spec's vectors and a few more;
* a Java writer holds a log (``ShimOwnership``): a Python writer fails with ``OwnershipAcquireFailedError``;
  SIGKILL of the JVM makes its gateway exit on its own (parent watch), frees the ownership, and a new Python
  writer recovers every record Java saw acknowledged, at its DLSN;
* each Python-side error reaches Java as its DistributedLog exception class, with the Python message, and the
  error envelope's details through the getters (``getCurrentOwner()``, ``getTxnId()``, ``getLastTxnId()``);
* ``ShimBench`` (bench/bench_jvm.py's Java side) runs.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

import jvm_shim
import storage
from storage import DLSN, LogRecord
from storage.segstore.rados import RadosLocation
from tests.jvm.jdk import Jdk
from tests.zk import ZooKeeperServer

ROOT = Path(__file__).resolve().parents[2]
JAVA_TESTS = Path(__file__).resolve().parent / "java"
N = 10_000


class Java:
    """The compiled test programs and how to run them (with the JDK's ``java``)."""

    def __init__(self, classes: Path, jdk: Jdk, jvm_args: tuple[str, ...] = ()) -> None:
        self.classes = classes
        self.jdk = jdk
        self.jvm_args = jvm_args
        #: stderr of every :meth:`run` so far
        self.stderr = ""
        self.classpath = os.pathsep.join([str(jvm_shim.jar_path()), str(jvm_shim.py4j_jar()), str(classes)])
        self.env = dict(os.environ)
        self.env["DLOG_PYTHON"] = sys.executable
        self.env["PYTHONPATH"] = str(ROOT) + os.pathsep + self.env.get("PYTHONPATH", "")

    def with_args(self, *jvm_args: str) -> Java:
        """The same programs run with these JVM options too."""
        return Java(self.classes, self.jdk, self.jvm_args + jvm_args)

    def command(self, main: str, *args: str) -> list[str]:
        return [self.jdk.java, *self.jvm_args, "-cp", self.classpath, main, *args]

    def run(self, main: str, *args: str, check: bool = True, timeout: float = 120) -> list[str]:
        p = subprocess.run(
            self.command(main, *args), env=self.env, capture_output=True, text=True, timeout=timeout, check=False
        )
        self.stderr += p.stderr
        if check and p.returncode != 0:
            raise AssertionError(
                f"{main} exited {p.returncode}\nstdout: {p.stdout[-3000:]}\nstderr: {p.stderr[-3000:]}"
            )
        return p.stdout.splitlines()

    def popen(self, main: str, *args: str) -> subprocess.Popen[str]:
        return subprocess.Popen(
            self.command(main, *args),
            env=self.env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            stdin=subprocess.DEVNULL,
            text=True,
        )


@pytest.fixture(scope="module")
def java(tmp_path_factory: pytest.TempPathFactory, jdk: Jdk) -> Java:
    """The test programs compiled; every test here needs it, so without a JDK they fail (never skip)."""
    out = tmp_path_factory.mktemp("java-classes")
    sources = sorted(str(p) for p in JAVA_TESTS.glob("*.java"))
    subprocess.run(
        [jdk.javac, "--release", "17", "-cp", str(jvm_shim.jar_path()), "-d", str(out), *sources],
        check=True,
        capture_output=True,
        timeout=120,
    )
    return Java(out, jdk)


def java_payload(t: int) -> bytes:
    """``ShimRoundTrip``'s payload of txid ``t``."""
    if t % 1000 == 0:
        return b""
    return f"java-{t}".encode() + bytes([0, 0xFF, t & 0xFF])


def py_payload(t: int) -> bytes:
    return b"" if t % 997 == 0 else f"py-{t}".encode() + bytes([t & 0xFF, 0]) * (t % 7)


def parse_r_lines(lines: list[str]) -> list[tuple[int, int, DLSN, bytes]]:
    out = []
    for line in lines:
        if line.startswith("R "):
            _, txid, seq, dlsn, hexed = line.split(" ")
            out.append((int(txid), int(seq), DLSN.parse(dlsn), b"" if hexed == "-" else bytes.fromhex(hexed)))
    return out


def round_trip(java: Java, uri: str) -> None:
    # Java writes: 10,000 records with LogWriter, then 10,000 with AsyncLogWriter.
    lines = java.run("ShimRoundTrip", uri, "java-rt", str(N), str(N))
    writes = [line.split(" ") for line in lines if line.startswith("W ")]
    assert [int(w[1]) for w in writes] == list(range(1, 2 * N + 1))
    async_dlsns = {int(w[1]): DLSN.parse(w[2]) for w in writes[N:]}
    assert len(async_dlsns) == N
    (last,) = [line for line in lines if line.startswith("LAST ")]
    _, last_dlsn, last_txid, count = last.split(" ")
    assert (int(last_txid), int(count)) == (2 * N, 2 * N)

    with storage.open_namespace(uri) as ns, ns.open_log("java-rt") as dlm:
        with dlm.open_reader(DLSN.INITIAL) as r:
            got = []
            while len(got) < 2 * N:
                batch = r.read_bulk(1000)
                assert batch, f"caught up after {len(got)} records"
                got.extend(batch)
            assert r.read_next(non_blocking=True) is None
        assert [rec.txid for rec in got] == list(range(1, 2 * N + 1))
        assert [rec.sequence_id for rec in got] == list(range(2 * N))
        assert all(rec.payload == java_payload(rec.txid) for rec in got)
        assert {rec.txid: rec.dlsn for rec in got[N:]} == async_dlsns
        assert got[-1].dlsn == DLSN.parse(last_dlsn) == dlm.last_dlsn()
        assert sorted({rec.dlsn for rec in got}) == [rec.dlsn for rec in got]  # distinct and ascending
        print(
            f"java->python: {len(got)} records, txids 1..{got[-1].txid}, sequence ids 0..{got[-1].sequence_id}, "
            f"{len(async_dlsns)} async DLSNs equal to Java's, last {got[-1].dlsn}"
        )

        # Python writes 10,000 sync + 10,000 async on a new log; Java reads them back.
        with ns.open_log("py-rt") as pdlm:
            written: list[tuple[int, DLSN]] = []
            with pdlm.open_writer() as w:
                for t in range(1, N + 1):
                    w.write(LogRecord(t, py_payload(t)))
                w.flush()
            with pdlm.open_reader(DLSN.INITIAL) as r:
                sync_part = r.read_bulk(N)
                while len(sync_part) < N:
                    sync_part.extend(r.read_bulk(N - len(sync_part)))
            written.extend((rec.txid, rec.dlsn) for rec in sync_part)
            aw = pdlm.open_async_writer()
            try:
                futures = [aw.write(LogRecord(t, py_payload(t))) for t in range(N + 1, 2 * N + 1)]
                aw.flush().result()
                written.extend((N + 1 + i, f.result()) for i, f in enumerate(futures))
            finally:
                aw.close()
    for mode in ([], ["--async", f"--max={2 * N}"]):
        lines = java.run("ShimReader", uri, "py-rt", *mode)
        read = parse_r_lines(lines)
        assert lines[-1] == f"END {2 * N}"
        assert [(t, d) for t, _, d, _ in read] == written
        assert [s for _, s, _, _ in read] == list(range(2 * N))
        assert all(p == py_payload(t) for t, _, _, p in read)
        print(
            f"python->java{' (async reader)' if mode else ''}: {len(read)} records, exact txids/DLSNs/"
            f"sequence ids 0..{read[-1][1]}/payloads"
        )


@pytest.mark.parametrize("transport", ["data-channel", "py4j"])
def test_round_trip_embedded(java: Java, tmp_path: Path, transport: str) -> None:
    """Records travel over the gateway's data channel by default, and over py4j alone when the JVM is told
    not to use it (``-Ddlog.shim.dataChannel=false``, or a gateway without one): same results either way."""
    jvm = java.with_args("-Ddlog.shim.trace=true", *(["-Ddlog.shim.dataChannel=false"] if transport == "py4j" else []))
    round_trip(jvm, f"distributedlog-local://{tmp_path / 'ns'}")
    traced = [line.split() for line in jvm.stderr.splitlines() if line.startswith("[dlog-shim] ")]
    used = {(t[2], t[4]) for t in traced}  # (op, transport) of every call of ShimRoundTrip and ShimReader
    for op in ("writer.write", "writer.await", "reader.read"):  # the calls that carry records
        assert {t for o, t in used if o == op} == {transport}, (op, used)
    assert ("reader.open", "py4j") in used and ("writer.open", "py4j") in used  # control calls: py4j


def test_round_trip_zookeeper_rados(
    java: Java, zk_server: ZooKeeperServer, zk_chroot: str, rados_location: RadosLocation
) -> None:
    uri = f"distributedlog://{zk_server.hosts}{zk_chroot}"
    storage.bind_namespace(uri, segments=rados_location.uri())
    round_trip(java, uri)


#: DistributedLog's own DLSN test vector (DLSN(99,88,77)), DLSN's constants, and a few more (large, negative,
#: 2^63-1 parts).
VECTORS = [
    DLSN(99, 88, 77),
    DLSN.INITIAL,
    DLSN.NON_INCLUSIVE_LOWER_BOUND,
    DLSN.INVALID,
    DLSN(0, 0, 0),
    DLSN(1, 2, 3),
    DLSN(12345678901, 987654321, 4096),
    DLSN(2**63 - 1, 2**63 - 1, 2**63 - 1),
    DLSN(-5, -6, -7),
]


def test_dlsn_serialize_equal(java: Java) -> None:
    lines = java.run("DlsnVectors", *(f"{d.lssn},{d.entry_id},{d.slot_id}" for d in VECTORS))
    vs = [line.split(" ") for line in lines if line.startswith("V ")]
    assert len(vs) == len(VECTORS)
    for d, (_, text, b64, hexed, ok) in zip(VECTORS, vs, strict=True):
        assert DLSN.parse(text) == d
        assert ok == "ok"
        assert b64 == d.serialize(), d
        assert bytes.fromhex(hexed) == d.to_bytes(), d
        assert DLSN.deserialize(b64) == d
    defaults = java.run("DlsnVectors")  # the Java program's own list (constants and (99,88,77))
    for _, text, b64, _, _ in (line.split(" ") for line in defaults if line.startswith("V ")):
        assert b64 == DLSN.parse(text).serialize()
    assert "ORDER ok" in defaults
    print(f"DLSN.serialize equal on both sides for {len(VECTORS)} vectors: " + ", ".join(v[1] for v in vs))


def _gateway_gone(pid: int, timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except (FileNotFoundError, ProcessLookupError):
            return True
        if state in ("Z", "X"):
            return True
        time.sleep(0.05)
    return False


def test_ownership_and_sigkill(java: Java, tmp_path: Path) -> None:
    uri = f"distributedlog-local://{tmp_path / 'ns'}"
    proc = java.popen("ShimOwnership", uri, "owned", "--records=200", "--every-ms=5")
    acks: dict[int, DLSN] = {}
    gateway_pid = -1
    try:
        assert proc.stdout is not None
        holding = False
        for line in proc.stdout:
            parts = line.split()
            if parts[0] == "GATEWAY":
                gateway_pid = int(parts[1])
            elif parts[0] == "ACK":
                acks[int(parts[1])] = DLSN.parse(parts[2])
            elif parts[0] == "HOLDING":
                holding = True
                break
            elif parts[0] == "E":
                raise AssertionError(line)
        assert holding and gateway_pid > 0

        with storage.open_namespace(uri, {"lockTimeoutSeconds": 0}) as ns, ns.open_log("owned") as dlm:
            with pytest.raises(storage.OwnershipAcquireFailedError) as e:
                dlm.open_writer()
            print(f"python writer while Java holds the log: {type(e.value).__name__}: {e.value}")

        # Java keeps writing (one record every 5 ms): kill it mid-stream, once it acknowledged 50 more
        for line in proc.stdout:
            parts = line.split()
            if parts[0] == "ACK":
                acks[int(parts[1])] = DLSN.parse(parts[2])
                if len(acks) >= 250:
                    break
            elif parts[0] == "E":
                raise AssertionError(line)
        assert len(acks) >= 250, "Java stopped writing"
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(timeout=10)
        for line in proc.stdout:  # what Java printed before dying
            parts = line.split()
            if len(parts) == 3 and parts[0] == "ACK":
                acks[int(parts[1])] = DLSN.parse(parts[2])
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert _gateway_gone(gateway_pid, 60), f"gateway {gateway_pid} still running after its JVM was killed"
    assert len(acks) >= 250

    with storage.open_namespace(uri, {"lockTimeoutSeconds": 5}) as ns, ns.open_log("owned") as dlm:
        with dlm.open_writer() as w:  # ownership is free again
            w.write(LogRecord(max(acks) + 1000, b"after"))
            w.flush()
        with dlm.open_reader(DLSN.INITIAL) as r:
            recs = []
            while (batch := r.read_bulk(1000, non_blocking=True)) or not recs:
                recs.extend(batch)
        found = {rec.txid: rec for rec in recs}
        for txid, dlsn in acks.items():
            assert found[txid].dlsn == dlsn, txid
            assert found[txid].payload == f"own-{txid}".encode()
        print(
            f"SIGKILL: gateway {gateway_pid} exited on its own; new writer recovered all {len(acks)} acknowledged "
            f"records at their DLSNs ({len(recs)} records in the log)"
        )


#: case -> (Java exception class, Python class reported by RemoteError or "-")
ERRORS = {
    "invalid-name": ("InvalidStreamNameException", "InvalidStreamNameError"),
    "log-not-found": ("LogNotFoundException", "LogNotFoundError"),
    "log-exists": ("LogExistsException", "LogExistsError"),
    "log-empty": ("LogEmptyException", "LogEmptyError"),
    "ownership": ("OwnershipAcquireFailedException", "OwnershipAcquireFailedError"),
    "txid-out-of-order": ("TransactionIdOutOfOrderException", "TransactionIdOutOfOrderError"),
    "record-too-long": ("LogRecordTooLongException", "LogRecordTooLongError"),
    "write-after-eos": ("EndOfStreamException", "EndOfStreamError"),
    "read-after-eos": ("EndOfStreamException", "EndOfStreamError"),
}


def python_messages(tmp_path: Path) -> dict[str, str]:
    """The messages the Python storage core gives for ShimErrors' cases (same log names, fresh namespace)."""
    msgs: dict[str, str] = {}

    uri = f"distributedlog-local://{tmp_path / 'pyns'}"
    with storage.open_namespace(uri, {"lockTimeoutSeconds": 0}) as ns:
        try:
            ns.create_log("bad name")
        except storage.DLError as e:
            msgs["invalid-name"] = str(e)
        try:
            ns.delete_log("errs-missing")
        except storage.DLError as e:
            msgs["log-not-found"] = str(e)
        ns.create_log("errs-exists")
        try:
            ns.create_log("errs-exists")
        except storage.DLError as e:
            msgs["log-exists"] = str(e)
        ns.create_log("errs-empty")
        try:
            ns.open_log("errs-empty").last_dlsn()
        except storage.DLError as e:
            msgs["log-empty"] = str(e)
        with ns.open_log("errs-order") as dlm, dlm.open_writer() as w:
            try:
                w.write(LogRecord(10, b"\x01"))
                w.write(LogRecord(5, b"\x02"))
                w.flush()
            except storage.DLError as e:
                msgs["txid-out-of-order"] = str(e)
        with ns.open_log("errs-long") as dlm, dlm.open_writer() as w:
            try:
                w.write(LogRecord(1, bytes(2 << 20)))
                w.flush()
            except storage.DLError as e:
                msgs["record-too-long"] = str(e)
    return msgs


def test_errors_reach_java(java: Java, tmp_path: Path) -> None:
    lines = java.run("ShimErrors", f"distributedlog-local://{tmp_path / 'ns'}", "errs")
    got = {}
    for line in lines:
        assert not line.startswith("NOERROR"), line
        if line.startswith("E "):
            _, case, jcls, pycls, code, message = line.split(" ", 5)
            got[case] = (jcls, pycls, code, message)
    expected_msgs = python_messages(tmp_path)
    for case, (jcls, pycls) in ERRORS.items():
        g = got[case]
        assert g[0] == f"org.apache.distributedlog.exceptions.{jcls}", (case, g)
        assert g[1] == pycls, (case, g)
        py_cls = getattr(storage, pycls)
        assert g[2] == str(py_cls.code), (case, g)
        if case in expected_msgs:
            assert expected_msgs[case] in g[3], (case, expected_msgs[case], g[3])
        print(f"{case}: {g[0]} (Python {g[1]}, code {g[2]}): {g[3]}")
    # the error envelope's details, through the exceptions' getters
    details = {line.split(" ")[1]: line.split(" ")[2:] for line in lines if line.startswith("D ")}
    (owner,) = details["ownership"]
    assert owner.startswith("currentOwner=vm:") and owner.removeprefix("currentOwner=") in got["ownership"][3]
    assert details["txid-out-of-order"] == ["txnId=5", "lastTxnId=10"]
    print(f"details: ownership {owner}; txid-out-of-order {' '.join(details['txid-out-of-order'])}")
    # raised before Python (argument checks) or on the Java side
    assert got["negative-txid"][0] == "java.lang.IllegalArgumentException"
    assert got["invalid-config"][0] == "java.lang.IllegalArgumentException"
    assert "noSuchKey" in got["invalid-config"][3]
    assert got["closed-writer"][0] == "org.apache.distributedlog.exceptions.AlreadyClosedException"


def test_bench_program_runs(java: Java, tmp_path: Path) -> None:
    """``ShimBench`` (bench/bench_jvm.py's Java side), small: its RATE lines and the records it wrote."""
    uri = f"distributedlog-local://{tmp_path / 'ns'}"
    lines = java.run("ShimBench", uri, "b", "2000", "100", "2", "--warmup=500", "writerOutputBufferSize=65536")
    rates = [line.split(" ") for line in lines if line.startswith("RATE ")]
    assert [r[1:3] for r in rates] == [["1", "2000"], ["2", "2000"]] and all(float(r[4]) > 0 for r in rates)
    with storage.open_namespace(uri) as ns:
        for log in ("b-warmup", "b-1", "b-2"):
            with ns.open_log(log) as dlm:
                assert dlm.record_count() == (500 if log == "b-warmup" else 2000)
                assert dlm.last_txid() == (500 if log == "b-warmup" else 2000)
