"""The ``dlog`` CLI against embedded and ZooKeeper namespaces: outputs, exit codes, bad input, and
``tail`` following a log until SIGINT/SIGTERM.

Most calls run in-process through the ``dlog`` fixture (``tests/cli/conftest.py``): ``dlog._entry.run``, the same
function the console script calls, with stdin/stdout/stderr and the environment swapped for the call; that saves
an interpreter start per call (~0.5 s locally, seconds on a loaded CI machine). What needs a real executable runs
one: ``test_console_script`` (the console-script entry point and ``main()``'s ``sys.exit``; it also checks that
the in-process runner gives the same results), :class:`Tail` (signals to a following ``tail``) and
``test_closed_stdout_and_progress_bar`` (a reader that goes away, a terminal on stderr). The executable is the
installed ``dlog`` console script next to ``sys.executable`` when there is one, else ``python -m dlog`` (the same
entry point).
"""

from __future__ import annotations

import os
import pty
import queue
import re
import signal
import subprocess
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from kazoo.client import KazooClient

import storage
from storage import DLSN, LogRecord
from tests.cli.conftest import Dlog, dlog_command
from tests.zk import ZooKeeperServer

RECORD_LINE = re.compile(r"^Record \(txn = (\d+), bytes = (\d+), dlsn = (-?\d+,-?\d+,-?\d+), sequence id = (-?\d+)\)$")


def parse_records(out: str) -> list[tuple[int, DLSN, str]]:
    """(txid, dlsn, payload line) of every record ``dump``/``tail`` printed."""
    lines = out.splitlines()
    recs = []
    for i, line in enumerate(lines):
        m = RECORD_LINE.match(line)
        if m:
            assert lines[i - 1] == "-" * 48
            recs.append((int(m.group(1)), DLSN.parse(m.group(3)), lines[i + 1] if i + 1 < len(lines) else ""))
    return recs


def show_fields(out: str) -> dict[str, str]:
    return dict(line.split(": ", 1) for line in out.splitlines() if ": " in line and "\t" not in line)


def segment_lines(out: str) -> dict[int, dict[str, str]]:
    segs = {}
    for line in out.splitlines():
        if "\t: " in line:
            lssn, rest = line.split("\t: ", 1)
            segs[int(lssn)] = dict(kv.split("=", 1) for kv in rest.split(" "))
    return segs


# --- no namespace needed -------------------------------------------------------------------------
COMMANDS = [
    [],
    ["bind"],
    ["list"],
    ["create"],
    ["delete"],
    ["show"],
    ["count"],
    ["dump"],
    ["tail"],
    ["write"],
    ["truncate"],
    ["seal"],
    ["dlsn"],
    ["dlsn", "encode"],
    ["dlsn", "decode"],
    ["bench"],
    ["subscribers"],
    ["lag"],
    ["purge"],
    ["stats"],
]


def test_help_on_every_command(dlog: Dlog) -> None:
    for cmd in COMMANDS:
        r = dlog(*cmd, "--help").ok()
        assert r.out.startswith(f"Usage: {' '.join(['dlog', *cmd])} "), r.out
        assert "--help" in r.out
    top = dlog("--help").ok().out
    for cmd in COMMANDS[1:]:
        if len(cmd) == 1:
            assert f"  {cmd[0]} " in top


def test_console_script(dlog: Dlog, dlog_exe: Dlog, tmp_path: Path) -> None:
    """The real console script: ``main()`` exits with what ``run()`` returned (0, 2 on a usage error, 1 on an
    error), and the in-process runner of the other tests gives the very same results."""
    version = dlog_exe("--version").ok()
    assert version.lines == [f"dlog {storage.__version__}"] and version.err == ""
    usage = dlog_exe("--uri", str(tmp_path / "ns"), "frobnicate").error(2, "no such command")
    missing = dlog_exe("--uri", str(tmp_path / "ns"), "show", "a").error(1, "does not exist")
    assert not (tmp_path / "ns").exists()
    assert dlog("--version") == version
    assert dlog("--uri", str(tmp_path / "ns"), "frobnicate") == usage
    assert dlog("--uri", str(tmp_path / "ns"), "show", "a") == missing


def test_dlsn_encode_decode(dlog: Dlog) -> None:
    assert dlog("dlsn", "encode", "1,0,0").ok().out == "AQAAAAAAAAABAAAAAAAAAAAAAAAAAAAAAA==\n"
    assert dlog("dlsn", "decode", "AQAAAAAAAAABAAAAAAAAAAAAAAAAAAAAAA==").ok().out == "1,0,0\n"
    d = DLSN(3, 7, -1)
    assert dlog("dlsn", "encode", "3,7,-1").ok().out.strip() == d.serialize()
    assert dlog("dlsn", "decode", d.serialize()).ok().out.strip() == "3,7,-1"
    assert dlog("dlsn", "encode", "--hex", "1,0,0").ok().out.strip() == DLSN.INITIAL.to_bytes().hex()
    # bad input: usage errors (exit 2), one line each
    dlog("dlsn", "encode", "1,x,0").error(2, "invalid DLSN")
    dlog("dlsn", "encode", "1,0").error(2, "invalid DLSN")
    dlog("dlsn", "decode", "!!!").error(2, "invalid serialized DLSN")
    dlog("dlsn", "decode", "AQAA").error(2, "invalid serialized DLSN")
    dlog("dlsn", "encode").error(2, "missing argument")


def test_usage_errors(dlog: Dlog, tmp_path: Path) -> None:
    dlog("list").error(2, "--uri", "DLOG_URI")
    dlog("show", "x").error(2, "--uri")
    dlog("--uri", str(tmp_path / "ns"), "frobnicate").error(2, "no such command")
    dlog("--uri", str(tmp_path / "ns"), "list", "--bogus").error(2, "no such option")
    dlog("--uri", str(tmp_path / "ns"), "dump").error(2, "missing argument")
    r = dlog()  # no command: help on stderr, usage exit code
    assert r.rc == 2 and "Usage: dlog" in r.err and r.out == ""
    dlog("--uri", "mysql://x/y", "list").error(1, "unsupported namespace URI")
    dlog("--uri", "distributedlog://127.0.0.1:1", "list").error(1, "needs a path")


def test_conf_file(dlog: Dlog, tmp_path: Path) -> None:
    uri = f"distributedlog-local://{tmp_path / 'ns'}"
    conf = tmp_path / "dl.conf"
    conf.write_text("# one record per entry\nwriterOutputBufferSize=0\n")
    r = dlog("--uri", uri, "--conf", str(conf), "write", "--create", "a", input="x\ny\nz\n").ok()
    assert r.out == "wrote 3 records, txid 1..3, last DLSN 1,2,0\n"  # unbuffered: an entry per record
    r = dlog("--uri", uri, "write", "a", input="p\nq\n").ok()
    assert r.out == "wrote 2 records, txid 4..5, last DLSN 2,0,1\n"  # default buffer: one entry
    r = dlog("--uri", uri, "write", "a", input="w\n", env={"DLOG_CONF": str(conf)}).ok()
    assert r.out == "wrote 1 records, txid 6..6, last DLSN 3,0,0\n"
    dlog("--uri", uri, "--conf", str(tmp_path / "missing.conf"), "list").error(1, "not found")
    conf.write_text("writerOutputBufferSize=lots\n")
    dlog("--uri", uri, "--conf", str(conf), "list").error(1, "writerOutputBufferSize")
    conf.write_text("noSuchKey=1\n")
    dlog("--uri", uri, "--conf", str(conf), "list").error(1, "noSuchKey")


def test_bench_without_uri(dlog: Dlog) -> None:
    r = dlog("bench", "-n", "200", "-s", "16").ok()
    assert r.err == ""
    assert r.lines[0].split() == ["phase", "records", "bytes", "seconds", "records/s", "MiB/s"]
    assert [ln.split()[:3] for ln in r.lines[1:]] == [["write", "200", "3200"], ["read", "200", "3200"]]
    dlog("bench", "-n", "0").error(2, "-n")


# --- on both backends ----------------------------------------------------------------------------
def test_create_list_delete(dlog: Dlog, ns_uri: str) -> None:
    r = dlog("--uri", ns_uri, "create", "a", "b", "nested/c").ok()
    assert r.lines == ["created a", "created b", "created nested/c"]
    assert dlog("--uri", ns_uri, "list").ok().lines == ["a", "b", "nested/c"]
    assert dlog("list", env={"DLOG_URI": ns_uri}).ok().lines == ["a", "b", "nested/c"]
    dlog("--uri", ns_uri, "create", "a").error(1, "exist")
    dlog("--uri", ns_uri, "create", "bad name").error(1, "invalid log name")
    dlog("--uri", ns_uri, "create", ".hidden").error(1, "reserved")
    assert dlog("--uri", ns_uri, "delete", "b").ok().out == "deleted b\n"
    dlog("--uri", ns_uri, "delete", "b").error(1, "does not exist")
    assert dlog("-u", ns_uri, "list").ok().lines == ["a", "nested/c"]
    with storage.open_namespace(ns_uri) as ns:
        assert ns.list_logs() == ["a", "nested/c"]


def test_write_show_count_dump(dlog: Dlog, ns_uri: str) -> None:
    dlog("--uri", ns_uri, "write", "a", input="x\n").error(1, "does not exist")
    r = dlog("--uri", ns_uri, "write", "--create", "a", input=b"hello\r\nworld\n\xff\xfeend\n").ok()
    assert r.out == "wrote 3 records, txid 1..3, last DLSN 1,0,2\n"
    r = dlog("--uri", ns_uri, "write", "a", "--txid-start", "10", input="ten\neleven").ok()  # no final newline
    assert r.out == "wrote 2 records, txid 10..11, last DLSN 2,0,1\n"
    assert dlog("--uri", ns_uri, "write", "a", input="").ok().out == "wrote 0 records\n"
    with storage.open_namespace(ns_uri) as ns:
        dlm = ns.open_log("a")
        assert dlm.last_dlsn() == DLSN(2, 0, 1) and dlm.last_txid() == 11
        with dlm.open_reader(DLSN.INITIAL) as rd:
            assert [x.payload for x in rd.read_bulk(10)] == [b"hello", b"world", b"\xff\xfeend", b"ten", b"eleven"]

    r = dlog("--uri", ns_uri, "show", "a").ok()
    assert r.lines[0] == "log: a"
    assert show_fields(r.out) == {
        "log": "a",
        "firstTxId": "1",
        "lastTxId": "11",
        "firstDLSN": "1,0,0",
        "lastDLSN": "2,0,1",
        "endOfStreamMarked": "false",
        "recordCount": "5",
        "segments": "2",
    }
    segs = segment_lines(r.out)
    assert segs[1]["state"] == "completed" and segs[1]["truncation"] == "active"
    assert (segs[1]["firstTxId"], segs[1]["lastTxId"], segs[1]["recordCount"]) == ("1", "3", "3")
    assert (segs[1]["firstDLSN"], segs[1]["lastDLSN"], segs[1]["startSequenceId"]) == ("1,0,0", "1,0,2", "0")
    assert (segs[2]["firstTxId"], segs[2]["lastTxId"], segs[2]["lastDLSN"], segs[2]["recordCount"]) == (
        "10",
        "11",
        "2,0,1",
        "2",
    )
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z", segs[2]["completionTime"])

    assert dlog("--uri", ns_uri, "count", "a").ok().out == "total is 5 records.\n"
    assert dlog("--uri", ns_uri, "count", "a", "1,0,1").ok().out == "total is 4 records.\n"
    assert dlog("--uri", ns_uri, "count", "a", "2,0,0").ok().out == "total is 2 records.\n"
    assert dlog("--uri", ns_uri, "count", "a", "--scan").ok().out == "total is 5 records.\n"

    r = dlog("--uri", ns_uri, "dump", "a").ok()
    assert r.err == ""
    assert parse_records(r.out) == [
        (1, DLSN(1, 0, 0), "hello"),
        (2, DLSN(1, 0, 1), "world"),
        (3, DLSN(1, 0, 2), "\ufffd\ufffdend"),
        (10, DLSN(2, 0, 0), "ten"),
        (11, DLSN(2, 0, 1), "eleven"),
    ]
    assert "Record (txn = 3, bytes = 5, dlsn = 1,0,2, sequence id = 2)" in r.lines
    assert "Record (txn = 11, bytes = 6, dlsn = 2,0,1, sequence id = 4)" in r.lines
    r = dlog("--uri", ns_uri, "dump", "a", "--hex", "--from", "1,0,2", "--limit", "2").ok()
    assert parse_records(r.out) == [(3, DLSN(1, 0, 2), "fffe656e64"), (10, DLSN(2, 0, 0), "74656e")]
    assert [t for t, _, _ in parse_records(dlog("--uri", ns_uri, "dump", "a", "--txid", "4").ok().out)] == [10, 11]
    assert [t for t, _, _ in parse_records(dlog("--uri", ns_uri, "dump", "a", "-n", "1").ok().out)] == [1]
    assert dlog("--uri", ns_uri, "dump", "a", "--txid", "99").ok().out == ""

    # an in-progress segment: its last record as readers see it
    with storage.open_namespace(ns_uri) as ns, ns.open_log("a").open_writer() as w:
        w.write(LogRecord(20, b"live"))
        w.flush()
        r = dlog("--uri", ns_uri, "show", "a").ok()
        seg3 = segment_lines(r.out)[3]
        assert (seg3["state"], seg3["firstTxId"], seg3["lastTxId"], seg3["recordCount"]) == (
            "inprogress",
            "20",
            "20",
            "1",
        )
        assert seg3["lastDLSN"] == "3,0,0" and seg3["completionTime"] == "-"
        assert show_fields(r.out)["recordCount"] == "6"
        assert dlog("--uri", ns_uri, "count", "a").ok().out == "total is 6 records.\n"

    # bad input
    dlog("--uri", ns_uri, "show", "nope").error(1, "'nope' does not exist")
    dlog("--uri", ns_uri, "count", "nope").error(1, "does not exist")
    dlog("--uri", ns_uri, "dump", "nope").error(1, "does not exist")
    dlog("--uri", ns_uri, "show", "bad name").error(1, "invalid log name")
    dlog("--uri", ns_uri, "count", "a", "1,x").error(2, "invalid DLSN")
    dlog("--uri", ns_uri, "dump", "a", "--from", "one").error(2, "invalid DLSN")
    dlog("--uri", ns_uri, "dump", "a", "--from", "1,0,0", "--txid", "1").error(2, "either --from or --txid")
    dlog("--uri", ns_uri, "dump", "a", "--txid", "-3").error(2, "--txid")
    dlog("--uri", ns_uri, "write", "a", "--txid-start", "5", input="old\n").error(1, "stdin line 1", "transaction id 5")
    dlog("--uri", ns_uri, "write", "a", "--txid-start", "x").error(2, "--txid-start")


def test_truncate_and_seal(dlog: Dlog, ns_uri: str) -> None:
    dlog("--uri", ns_uri, "write", "--create", "t", input="a\nb\nc\n").ok()
    dlog("--uri", ns_uri, "write", "t", input="d\ne\nf\n").ok()
    dlog("--uri", ns_uri, "truncate", "t", "1,x,0").error(2, "invalid DLSN")
    dlog("--uri", ns_uri, "truncate", "t").error(2, "missing argument")
    dlog("--uri", ns_uri, "truncate", "t", "9,0,0").error(1, "past the end")
    dlog("--uri", ns_uri, "truncate", "nope", "1,0,0").error(1, "does not exist")
    assert dlog("--uri", ns_uri, "truncate", "t", "2,0,1").ok().out == "truncated t before 2,0,1\n"
    segs = segment_lines(dlog("--uri", ns_uri, "show", "t").ok().out)
    assert segs[1]["truncation"] == "truncated"
    assert segs[2]["truncation"] == "partially_truncated" and segs[2]["minActiveDLSN"] == "2,0,1"
    assert [t for t, _, _ in parse_records(dlog("--uri", ns_uri, "dump", "t").ok().out)] == [5, 6]
    assert dlog("--uri", ns_uri, "count", "t", "--scan").ok().out == "total is 2 records.\n"
    # a start inside the truncated part: readers skip to the first readable record (as DistributedLog positions readers)
    assert [t for t, _, _ in parse_records(dlog("--uri", ns_uri, "dump", "t", "--from", "1,0,1").ok().out)] == [5, 6]

    r = dlog("--uri", ns_uri, "seal", "t").ok()
    assert re.fullmatch(r"sealed t: end of stream at 3,0,0\n", r.out)
    assert dlog("--uri", ns_uri, "seal", "t").ok().out == "t was already sealed\n"
    fields = show_fields(dlog("--uri", ns_uri, "show", "t").ok().out)
    assert fields["endOfStreamMarked"] == "true" and fields["lastTxId"] == "6" and fields["lastDLSN"] == "2,0,2"
    dlog("--uri", ns_uri, "write", "t", input="more\n").error(1, "end of stream")
    assert [t for t, _, _ in parse_records(dlog("--uri", ns_uri, "dump", "t", "-n", "0").ok().out)] == [5, 6]
    r = dlog("--uri", ns_uri, "tail", "t")  # a sealed log: tail ends at once, exit 0
    assert r.rc == 0 and r.out == "" and "end of stream" in r.err
    with storage.open_namespace(ns_uri) as ns:
        assert ns.open_log("t").is_end_of_stream()


class Tail:
    """A ``dlog tail`` process whose stdout lines are collected by a thread.

    A real process, not the in-process runner: the test signals it (SIGINT/SIGTERM) while it follows, and the
    in-process runner returns only when the command has ended."""

    def __init__(self, env: dict[str, str], *args: str) -> None:
        self.proc = subprocess.Popen(
            [*dlog_command(), *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env, text=True
        )
        self.lines: queue.Queue[str] = queue.Queue()
        threading.Thread(target=self._pump, daemon=True).start()

    def _pump(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.lines.put(line.rstrip("\n"))

    def next_record(self, timeout: float) -> tuple[int, DLSN, str] | None:
        """The next (txid, dlsn, payload) printed, or None if none came within ``timeout``."""
        deadline = time.monotonic() + timeout
        header = None
        while True:
            try:
                line = self.lines.get(timeout=max(0.0, deadline - time.monotonic()))
            except queue.Empty:
                return None
            if header is None:
                header = RECORD_LINE.match(line)
                continue
            return int(header.group(1)), DLSN.parse(header.group(3)), line

    def stop(self, sig: int) -> tuple[int, str]:
        self.proc.send_signal(sig)
        rc = self.proc.wait(timeout=20)
        assert self.proc.stderr is not None
        return rc, self.proc.stderr.read()

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()


@pytest.fixture
def tails(cli_env: dict[str, str]) -> Iterator[Callable[..., Tail]]:
    started: list[Tail] = []

    def start(*args: str) -> Tail:
        t = Tail(cli_env, *args)
        started.append(t)
        return t

    yield start
    for t in started:
        t.kill()


def test_tail_follows_until_signal(dlog: Dlog, ns_uri: str, tails: Callable[..., Tail]) -> None:
    dlog("--uri", ns_uri, "tail", "nope").error(1, "does not exist")
    dlog("--uri", ns_uri, "tail", "x", "--from", "zz").error(2, "invalid DLSN")
    with storage.open_namespace(ns_uri) as ns:
        dlm = ns.open_log("f")
        with dlm.open_writer() as w:
            w.write_bulk([LogRecord(1, b"old-1"), LogRecord(2, b"old-2")])
            w.flush()
            # default start: the current end. Keep writing until the tail prints something: whatever it
            # prints first must come after the records written before it started.
            follow = tails("--uri", ns_uri, "tail", "f")
            txid = 3
            first = None
            deadline = time.monotonic() + 30
            while first is None and time.monotonic() < deadline:
                w.write(LogRecord(txid, f"new-{txid}".encode()))
                w.flush()
                txid += 1
                first = follow.next_record(timeout=0.3)
            assert first is not None, "tail printed nothing"
            assert first[0] >= 3 and first[2] == f"new-{first[0]}"
            seen = [first]
            while seen[-1][0] < txid - 1:  # drain what was written meanwhile
                rec = follow.next_record(timeout=10)
                assert rec is not None
                seen.append(rec)
            for _ in range(3):  # then new records arrive one by one, in order
                w.write(LogRecord(txid, f"new-{txid}".encode()))
                w.flush()
                rec = follow.next_record(timeout=10)
                assert rec == (txid, dlm.last_dlsn(), f"new-{txid}")
                seen.append(rec)
                txid += 1
            assert [r[0] for r in seen] == list(range(first[0], txid))
            assert [r[1] for r in seen] == sorted(r[1] for r in seen)
            rc, err = follow.stop(signal.SIGINT)
            assert rc == 0, err
            assert "Traceback" not in err

            # --txid / --from: from that record on, then SIGTERM
            by_txid = tails("--uri", ns_uri, "tail", "f", "--txid", "2", "--hex")
            by_dlsn = tails("--uri", ns_uri, "tail", "f", "--from", "1,0,0")
            assert by_txid.next_record(timeout=20) == (2, DLSN(1, 0, 1), b"old-2".hex())
            assert by_dlsn.next_record(timeout=20) == (1, DLSN(1, 0, 0), "old-1")
            assert by_dlsn.next_record(timeout=20) == (2, DLSN(1, 0, 1), "old-2")
            for t in (by_txid, by_dlsn):
                rc, err = t.stop(signal.SIGTERM)
                assert rc == 0, err


def test_tail_limit_stops_after_n_records(dlog: Dlog, ns_uri: str, tails: Callable[..., Tail]) -> None:
    with storage.open_namespace(ns_uri) as ns:
        dlm = ns.open_log("f")
        with dlm.open_writer() as w:
            w.write_bulk([LogRecord(t, f"r-{t}".encode()) for t in range(1, 6)])
            w.flush()
    # from the start: the first N records, then exit 0 (no Ctrl-C needed)
    r = dlog("--uri", ns_uri, "tail", "f", "--from", "1,0,0", "--limit", "3").ok()
    assert [(t, p) for t, _, p in parse_records(r.out)] == [(1, "r-1"), (2, "r-2"), (3, "r-3")]
    assert r.err == ""
    r = dlog("--uri", ns_uri, "tail", "f", "--txid", "4", "-n", "2", "--hex").ok()
    assert [(t, p) for t, _, p in parse_records(r.out)] == [(4, b"r-4".hex()), (5, b"r-5".hex())]
    # from the end (the default): waits for new records, prints N and exits by itself
    follow = tails("--uri", ns_uri, "tail", "f", "--limit", "2")
    with storage.open_namespace(ns_uri) as ns, ns.open_log("f").open_writer() as w:
        txid = 6
        first = None
        deadline = time.monotonic() + 30
        while first is None and time.monotonic() < deadline:  # until the tail has started and sees one
            w.write(LogRecord(txid, f"r-{txid}".encode()))
            w.flush()
            txid += 1
            first = follow.next_record(timeout=0.3)
        assert first is not None, "tail printed nothing"
        w.write(LogRecord(txid, f"r-{txid}".encode()))
        w.flush()
        second = follow.next_record(timeout=20)
        assert second is not None and second[0] == first[0] + 1
        assert follow.proc.wait(timeout=20) == 0  # stopped by itself after 2 records
        assert follow.next_record(timeout=0.5) is None
    dlog("--uri", ns_uri, "tail", "f", "--limit", "-1").error(2, "--limit")


def test_bench_on_namespace(dlog: Dlog, ns_uri: str) -> None:
    r = dlog("--uri", ns_uri, "bench", "--records", "300", "--size", "64").ok()
    assert r.err == ""
    assert [ln.split()[:3] for ln in r.lines[1:]] == [["write", "300", "19200"], ["read", "300", "19200"]]
    assert all(float(ln.split()[4]) > 0 for ln in r.lines[1:])
    assert dlog("--uri", ns_uri, "list").ok().out == ""  # the temporary log is gone
    dlog("--uri", ns_uri, "bench", "-n", "10", "--log", "kept").ok()
    assert dlog("--uri", ns_uri, "count", "kept").ok().out == "total is 10 records.\n"
    dlog("--uri", ns_uri, "bench", "-n", "10", "--log", "kept").error(1, "exist")


# --- a URI with no namespace --------------------------------------------------------------------
def _read_only_commands(dlog: Dlog) -> list[list[str]]:
    """Every command that must not create a namespace (``subscribers``/``lag`` when present)."""
    top = dlog("--help").ok().out
    cmds = [["list"], ["show", "a"], ["count", "a"], ["dump", "a"], ["tail", "a"], ["delete", "a"]]
    cmds += [["seal", "a"], ["truncate", "a", "1,0,0"], ["write", "a"]]
    return cmds + [[c, "a"] for c in ("subscribers", "lag") if f"  {c} " in top]


def test_read_only_commands_never_create_a_namespace(
    dlog: Dlog, tmp_path: Path, zk_server: ZooKeeperServer, zk_chroot: str
) -> None:
    cmds = _read_only_commands(dlog)
    where = tmp_path / "typo" / "ns"
    for uri in (str(where), f"distributedlog-local://{where}"):
        for cmd in cmds:
            r = dlog("--uri", uri, *cmd, input="x\n").error(1)
            assert r.err == (
                f"dlog: error: namespace {uri} does not exist (no metadata/metadata.db in {where}): check the URI; "
                "only writers create a namespace (dlog create, dlog write --create, the Spark sink)\n"
            ), cmd
            assert not (tmp_path / "typo").exists(), cmd
    zk_uri = f"distributedlog://{zk_server.hosts}{zk_chroot}"
    for cmd in cmds:
        dlog("--uri", zk_uri, *cmd, input="x\n").error(1, f"namespace {zk_uri} does not exist", zk_chroot)
    client = KazooClient(hosts=zk_server.hosts, timeout=10.0)
    client.start(timeout=30)
    try:
        assert client.exists(zk_chroot) is None
    finally:
        client.stop()
        client.close()

    # writers still create it
    uri = f"distributedlog-local://{where}"
    assert dlog("--uri", uri, "write", "--create", "a", input="x\n").ok().out.startswith("wrote 1 records")
    assert dlog("--uri", uri, "list").ok().lines == ["a"]
    assert dlog("--uri", str(tmp_path / "other"), "create", "b").ok().lines == ["created b"]


# --- ZooKeeper binding ---------------------------------------------------------------------------
def test_bind_zookeeper_namespace(dlog: Dlog, zk_server: ZooKeeperServer, zk_chroot: str, tmp_path: Path) -> None:
    uri = f"distributedlog://{zk_server.hosts}{zk_chroot}"
    seg = f"file://{tmp_path / 'segments'}"
    dlog("--uri", uri, "list").error(1, "does not exist", zk_chroot, "bind --segments")  # read-only: creates nothing
    dlog("--uri", uri, "bind").error(2, "--segments")
    dlog("--uri", uri, "bind", "--segments", "relative/path").error(1, "file:///abs/path")
    assert dlog("--uri", uri, "bind", "--segments", seg).ok().out == f"bound {uri} to {seg}\n"
    assert dlog("--uri", uri, "bind", "--segments", seg).ok().out == f"bound {uri} to {seg}\n"  # same: no-op
    dlog("--uri", uri, "bind", "--segments", f"file://{tmp_path / 'other'}").error(1, "already bound")
    dlog("--uri", uri, "create", "z").ok()
    assert dlog("--uri", uri, "write", "z", input="zk\n").ok().out == "wrote 1 records, txid 1..1, last DLSN 1,0,0\n"
    assert dlog("--uri", uri, "list").ok().lines == ["z"]
    assert (tmp_path / "segments").is_dir()
    dlog("--uri", f"distributedlog-local://{tmp_path / 'emb'}", "bind", "--segments", seg).error(
        1, "not a ZooKeeper namespace URI"
    )


# --- output plumbing (embedded only) -------------------------------------------------------------
def test_closed_stdout_and_progress_bar(dlog: Dlog, cli_env: dict[str, str], tmp_path: Path) -> None:
    uri = f"distributedlog-local://{tmp_path / 'ns'}"
    lines = "".join(f"{'x' * 100}-{i}\n" for i in range(3000))
    dlog("--uri", uri, "write", "--create", "big", input=lines).ok()

    # Real processes below (not the in-process runner): a pipe whose reader goes away and a terminal on stderr
    # are file descriptors of the process, which the in-process runner's streams have not.
    # `dlog dump big -n 0 | head -1`: stops quietly when the reader goes away
    proc = subprocess.Popen(
        [*dlog_command(), "--uri", uri, "dump", "big", "-n", "0"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=cli_env,
    )
    assert proc.stdout is not None and proc.stderr is not None
    assert proc.stdout.readline() == b"-" * 48 + b"\n"
    proc.stdout.close()
    err = proc.stderr.read().decode()
    assert proc.wait(timeout=30) == 0, err
    assert err == ""

    # stderr on a terminal, stdout to a pipe: a progress bar on stderr; stdout stays clean
    master, slave = pty.openpty()
    chunks: list[bytes] = []

    def drain() -> None:
        while True:
            try:
                data = os.read(master, 65536)
            except OSError:  # EIO once the child closed the terminal
                return
            if not data:
                return
            chunks.append(data)

    reader = threading.Thread(target=drain, daemon=True)
    reader.start()
    try:
        proc = subprocess.Popen(
            [*dlog_command(), "--uri", uri, "dump", "big", "-n", "0"],
            stdout=subprocess.PIPE,
            stderr=slave,
            env=cli_env,
        )
        os.close(slave)
        out, _ = proc.communicate(timeout=60)
        reader.join(timeout=10)
    finally:
        os.close(master)
    assert proc.returncode == 0
    assert len(parse_records(out.decode())) == 3000
    shown = b"".join(chunks)
    assert b"dumping" in shown and b"3000/3000" in shown, shown[-500:]
