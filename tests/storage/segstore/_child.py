"""Child-process programs for the segment store tests (run as a script, talk over stdin/stdout).

STORE is a local store's root directory, or ``rados:`` followed by the JSON of a
``RadosLocation`` (pool, conf, client_id, keyring, namespace).

Modes:
  append-loop STORE SIZE WINDOW   create a ledger ("L id"), append forever with WINDOW appends in
                                 flight, print "A id" per acknowledged entry in order; on the
                                 first error print "E ErrorClass", then try one more append and
                                 print "E2 ErrorClass" (or "E2 ok" if it succeeded).
  wait-append STORE              create a ledger, append entries 0 and 1 ("L id"), then append
                                 one entry per "go" line on stdin ("D entry_id"); exit at EOF.
  ids STORE N                     create N ledgers ("I id" each), delete every other one, "done".
"""

from __future__ import annotations

import collections
import json
import sys
from concurrent.futures import Future

from storage.errors import DLError
from storage.segstore.base import SegmentStore
from storage.segstore.local import LocalSegmentStore

#: Data objects of RADOS ledgers roll at 1 MiB here too (as in the parent's fixtures).
RADOS_TEST_MAX_OBJECT_BYTES = 1 << 20


def open_store(spec: str) -> SegmentStore:
    """The store a ``STORE`` argument names (see the module docstring)."""
    if spec.startswith("rados:"):
        from storage.segstore.rados import RadosLocation, RadosSegmentStore

        location = RadosLocation(**json.loads(spec[len("rados:") :]))
        return RadosSegmentStore(location, max_object_bytes=RADOS_TEST_MAX_OBJECT_BYTES)
    return LocalSegmentStore(spec)


def payload(ledger_id: int, entry_id: int, size: int) -> bytes:
    """The deterministic payload of an entry, so readers can check every byte."""
    head = f"{ledger_id}:{entry_id}:".encode()
    return head + bytes([entry_id % 251]) * max(0, size - len(head))


def out(line: str) -> None:
    sys.stdout.write(line + "\n")
    sys.stdout.flush()


def append_loop(root: str, size: int, window: int) -> None:
    store = open_store(root)
    writer = store.create_ledger()
    lid = writer.ledger_id
    out(f"L {lid}")
    pending: collections.deque[Future[int]] = collections.deque()
    next_id = 0
    try:
        while True:
            while len(pending) < window:
                pending.append(writer.append_async(payload(lid, next_id, size)))
                next_id += 1
            out(f"A {pending.popleft().result()}")
    except DLError as exc:
        out(f"E {type(exc).__name__}")
    try:
        writer.append(payload(lid, next_id, size))
        out("E2 ok")
    except DLError as exc:
        out(f"E2 {type(exc).__name__}")
    store.close()


def wait_append(root: str) -> None:
    store = open_store(root)
    writer = store.create_ledger()
    writer.append(b"entry-0")
    writer.append(b"entry-1")
    out(f"L {writer.ledger_id}")
    for line in sys.stdin:
        if line.strip() == "go":
            out(f"D {writer.append(b'more')}")
    writer.close()
    store.close()


def ids(root: str, n: int) -> None:
    store = open_store(root)
    created = []
    for _ in range(n):
        writer = store.create_ledger()
        created.append(writer.ledger_id)
        writer.close()
        out(f"I {writer.ledger_id}")
    for lid in created[::2]:
        store.delete_ledger(lid)
    out("done")
    store.close()


def main(argv: list[str]) -> None:
    mode, root, *rest = argv
    if mode == "append-loop":
        append_loop(root, int(rest[0]), int(rest[1]))
    elif mode == "wait-append":
        wait_append(root)
    elif mode == "ids":
        ids(root, int(rest[0]))
    else:
        raise SystemExit(f"unknown mode {mode}")


if __name__ == "__main__":
    main(sys.argv[1:])
