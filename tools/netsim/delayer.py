#!/usr/bin/env python3
"""Added network delay without netem: a user-space NFQUEUE delayer, stdlib only (raw netlink).

It serves kernels without ``sch_netem`` (``CONFIG_NET_SCH_NETEM`` not set) or the nftables ``queue``
statement (``CONFIG_NFT_QUEUE`` not set) that have the iptables ``NFQUEUE`` target
(``CONFIG_NETFILTER_XT_TARGET_NFQUEUE``, usable through iptables-nft's ``nft_compat``) and
``nfnetlink_queue``. A rule such as::

    iptables -w -A OUTPUT -d 10.251.0.12 -j NFQUEUE --queue-num 7 --queue-bypass

hands each matching packet to the process bound to queue 7 *of that network namespace*; this process holds
it for ``delay ± jitter`` milliseconds (uniform) and then accepts it. It talks the nfnetlink_queue protocol
itself over an ``AF_NETLINK``/``NETLINK_NETFILTER`` socket (no ``libnetfilter_queue``, no PyPI package):
bind the queue for ``AF_INET``, copy mode ``META`` (no payload is copied to user space), ``FAIL_OPEN`` (a
full queue lets packets through instead of dropping them), then read ``NFQNL_MSG_PACKET`` messages and
answer each with an ``NFQNL_MSG_VERDICT`` (``NF_ACCEPT``) when its time has come. Release times never go
backwards, so the packets of a flow keep their order (``--reorder`` lets jitter reorder them, like netem).
``--queue-bypass`` on the rule makes packets pass untouched when no delayer is bound (it died or was
stopped), so a dead delayer never turns into a partition.

Run inside the namespace whose ``OUTPUT`` (or ``INPUT``) chain has the rule::

    ip netns exec dlc-x-h4 python3 tools/netsim/delayer.py --queue 7 --delay-ms 50 --jitter-ms 20

It prints ``ready`` on stdout once bound, and runs until SIGTERM/SIGINT (then it accepts every packet it
still holds and unbinds). Exit status 2 when the queue cannot be bound (not root, no nfnetlink_queue,
another process holds that queue number).
"""

from __future__ import annotations

import argparse
import errno
import heapq
import os
import random
import select
import signal
import socket
import struct
import sys
import time
from collections.abc import Iterator, Sequence

__all__ = ["DelayerError", "NfQueue", "main"]

NETLINK_NETFILTER = 12
NFNL_SUBSYS_QUEUE = 3
NFQNL_MSG_PACKET = 0
NFQNL_MSG_VERDICT = 1
NFQNL_MSG_CONFIG = 2
NFQA_PACKET_HDR = 1
NFQA_VERDICT_HDR = 2
NFQA_CFG_CMD = 1
NFQA_CFG_PARAMS = 2
NFQA_CFG_QUEUE_MAXLEN = 3
NFQA_CFG_MASK = 4
NFQA_CFG_FLAGS = 5
NFQNL_CFG_CMD_BIND = 1
NFQNL_CFG_CMD_UNBIND = 2
NFQNL_COPY_META = 1
NFQA_CFG_F_FAIL_OPEN = 1
NF_DROP = 0
NF_ACCEPT = 1
NLM_F_REQUEST = 0x1
NLM_F_ACK = 0x4
NLMSG_ERROR = 2
NLMSG_DONE = 3
NETLINK_NO_ENOBUFS = 5
SOL_NETLINK = 270

_NLMSGHDR = struct.Struct("=IHHII")  # len, type, flags, seq, pid (host order)
_NFGENMSG = struct.Struct("!BBH")  # family, version, res_id (queue number, big endian)
_NLATTR = struct.Struct("=HH")  # len, type (host order)


class DelayerError(RuntimeError):
    """The netlink queue could not be set up (the message names the kernel's errno)."""


def _align4(n: int) -> int:
    return (n + 3) & ~3


def _attr(kind: int, payload: bytes) -> bytes:
    raw = _NLATTR.pack(_NLATTR.size + len(payload), kind) + payload
    return raw + b"\0" * (_align4(len(raw)) - len(raw))


def _attrs(data: bytes) -> Iterator[tuple[int, bytes]]:
    off = 0
    while off + _NLATTR.size <= len(data):
        length, kind = _NLATTR.unpack_from(data, off)
        if length < _NLATTR.size:
            return
        yield kind & 0x3FFF, data[off + _NLATTR.size : off + length]
        off += _align4(length)


class NfQueue:
    """One bound nfnetlink queue of the current network namespace.

    Raises:
        DelayerError: (constructor) the socket could not be opened or the kernel refused the binding.
    """

    def __init__(self, queue: int, maxlen: int = 8192) -> None:
        self.queue = queue
        self._seq = 0
        try:
            self.sock = socket.socket(socket.AF_NETLINK, socket.SOCK_RAW, NETLINK_NETFILTER)
            self.sock.bind((0, 0))
            self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4 * 1024 * 1024)
            self.sock.setsockopt(SOL_NETLINK, NETLINK_NO_ENOBUFS, 1)
        except OSError as e:
            raise DelayerError(f"cannot open a NETLINK_NETFILTER socket: {e}") from None
        try:
            self._config(_attr(NFQA_CFG_CMD, struct.pack("!BxH", NFQNL_CFG_CMD_BIND, socket.AF_INET)))
            self._config(_attr(NFQA_CFG_PARAMS, struct.pack("!IB", 0, NFQNL_COPY_META)))
            self._config(_attr(NFQA_CFG_QUEUE_MAXLEN, struct.pack("!I", maxlen)))
            flags = struct.pack("!I", NFQA_CFG_F_FAIL_OPEN)
            self._config(_attr(NFQA_CFG_FLAGS, flags) + _attr(NFQA_CFG_MASK, flags))
        except DelayerError:
            self.sock.close()
            raise

    def _send(self, msg_type: int, payload: bytes, flags: int = 0) -> int:
        self._seq += 1
        body = _NFGENMSG.pack(socket.AF_UNSPEC, 0, self.queue) + payload
        kind = (NFNL_SUBSYS_QUEUE << 8) | msg_type
        self.sock.send(_NLMSGHDR.pack(_NLMSGHDR.size + len(body), kind, NLM_F_REQUEST | flags, self._seq, 0) + body)
        return self._seq

    def _config(self, payload: bytes) -> None:
        seq = self._send(NFQNL_MSG_CONFIG, payload, NLM_F_ACK)
        while True:
            data = self.sock.recv(65536)
            for kind, mseq, body in self._messages(data):
                if kind == NLMSG_ERROR and mseq == seq:
                    code = -struct.unpack_from("=i", body)[0]
                    if code:
                        raise DelayerError(f"queue {self.queue}: kernel refused config: {os.strerror(code)}")
                    return

    @staticmethod
    def _messages(data: bytes) -> Iterator[tuple[int, int, bytes]]:
        off = 0
        while off + _NLMSGHDR.size <= len(data):
            length, kind, _flags, seq, _pid = _NLMSGHDR.unpack_from(data, off)
            if length < _NLMSGHDR.size:
                return
            yield kind, seq, data[off + _NLMSGHDR.size : off + length]
            off += _align4(length)

    def packet_ids(self) -> list[int]:
        """Read what the kernel has queued now (non-blocking); return the packet ids, in arrival order."""
        ids: list[int] = []
        while True:
            try:
                data = self.sock.recv(65536, socket.MSG_DONTWAIT)
            except BlockingIOError:
                return ids
            except OSError as e:
                if e.errno == errno.ENOBUFS:
                    continue
                raise
            for kind, _seq, body in self._messages(data):
                if kind != (NFNL_SUBSYS_QUEUE << 8) | NFQNL_MSG_PACKET:
                    continue
                for akind, payload in _attrs(body[_NFGENMSG.size :]):
                    if akind == NFQA_PACKET_HDR:
                        ids.append(struct.unpack_from("!I", payload)[0])

    def verdict(self, packet_id: int, verdict: int = NF_ACCEPT) -> None:
        """Tell the kernel what to do with packet ``packet_id``."""
        self._send(NFQNL_MSG_VERDICT, _attr(NFQA_VERDICT_HDR, struct.pack("!II", verdict, packet_id)))

    def close(self) -> None:
        """Unbind the queue and close the socket (packets then bypass, thanks to ``--queue-bypass``)."""
        try:
            self._send(NFQNL_MSG_CONFIG, _attr(NFQA_CFG_CMD, struct.pack("!BxH", NFQNL_CFG_CMD_UNBIND, 0)))
        except OSError:
            pass
        self.sock.close()


def run(queue: int, delay_ms: float, jitter_ms: float, loss: float, reorder: bool, seed: int | None) -> int:
    """Hold each packet of ``queue`` for ``delay_ms ± jitter_ms`` (and drop a ``loss`` fraction); return the
    exit status once SIGTERM/SIGINT arrives.

    Raises:
        DelayerError: the queue could not be bound.
    """
    rng = random.Random(seed)
    q = NfQueue(queue)
    stopping = False

    def stop(_sig: int, _frame: object) -> None:
        nonlocal stopping
        stopping = True

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    print("ready", flush=True)
    held: list[tuple[float, int, int]] = []  # (release time, arrival counter, packet id)
    counter = 0
    last_release = 0.0
    try:
        while not stopping:
            now = time.monotonic()
            while held and held[0][0] <= now:
                _, _, pid = heapq.heappop(held)
                q.verdict(pid)
            wait = max(0.0, held[0][0] - now) if held else 0.5
            try:
                ready, _, _ = select.select([q.sock], [], [], wait)
            except InterruptedError:
                continue
            if not ready:
                continue
            now = time.monotonic()
            for pid in q.packet_ids():
                if loss > 0 and rng.random() < loss:
                    q.verdict(pid, NF_DROP)
                    continue
                release = now + max(0.0, delay_ms + rng.uniform(-jitter_ms, jitter_ms)) / 1000.0
                if not reorder:
                    release = max(release, last_release)
                    last_release = release
                counter += 1
                heapq.heappush(held, (release, counter, pid))
    finally:
        for _, _, pid in held:
            try:
                q.verdict(pid)
            except OSError:
                break
        q.close()
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    """Command line: see the module docstring."""
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    p.add_argument("--queue", type=int, required=True, help="NFQUEUE number (of this network namespace)")
    p.add_argument("--delay-ms", type=float, default=50.0)
    p.add_argument("--jitter-ms", type=float, default=0.0, help="uniform in [-jitter, +jitter]")
    p.add_argument("--loss", type=float, default=0.0, help="fraction of queued packets dropped")
    p.add_argument("--reorder", action="store_true", help="let jitter reorder packets (default: keep order)")
    p.add_argument("--seed", type=int, default=None)
    p.add_argument("--tag", default="", help="ignored: lets the harness recognise its process")
    a = p.parse_args(argv)
    try:
        return run(a.queue, a.delay_ms, a.jitter_ms, a.loss, a.reorder, a.seed)
    except DelayerError as e:
        print(f"delayer: {e}", file=sys.stderr, flush=True)
        return 2


if __name__ == "__main__":
    sys.exit(main())
